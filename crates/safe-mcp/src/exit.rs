//! How the binary gives up: [`fatal`] prints `fatal: <reason>` on stderr and yields the
//! non-zero exit code every startup failure uses.
//!
//! Owns that one convention, shared by `main.rs` and the subcommands it dispatches to
//! (`audit_cli`, `demo`). It is a leaf: it must never import `main.rs` or any other file of
//! this crate (they import it), and it must never decide what may run or exit the process
//! itself; callers return the code it gives.

use std::process::ExitCode;

/// Prints `fatal: <reason>` on stderr; returns exit code 2.
pub(crate) fn fatal(reason: impl std::fmt::Display) -> ExitCode {
    eprintln!("fatal: {reason}");
    ExitCode::from(2)
}
