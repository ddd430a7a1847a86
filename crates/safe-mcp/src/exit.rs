//! How the binary gives up and how it talks: [`fatal`] prints `fatal: <reason>` on stderr
//! and yields the non-zero exit code every startup failure uses; [`say_line`] prints a line on
//! stdout, and a reader that went away (`safe-mcp doctor | head`) ends the process quietly
//! with success instead of a panic.
//!
//! Owns that one convention, shared by `main.rs`, `runtime.rs` and the commands `main.rs`
//! dispatches to (`cli/`: serve, policy, doctor, audit, init, demo). It is a leaf: it must
//! never import `main.rs` or any other file of this crate (they import it), and it must never
//! decide what may run or exit the process itself, except [`say_line`] when nobody reads
//! stdout any more; callers return the code it gives.

use std::process::ExitCode;

/// Prints `fatal: <reason>` on stderr; returns exit code 2.
pub(crate) fn fatal(reason: impl std::fmt::Display) -> ExitCode {
    eprintln!("fatal: {reason}");
    ExitCode::from(2)
}

/// Prints `line` on stdout. A closed pipe means the reader has what it wanted: exit 0.
pub(crate) fn say_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("safe-mcp: cannot write to stdout: {e}");
        std::process::exit(2);
    }
}

/// `println!` through [`say_line`].
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::exit::say_line(&format!($($arg)*))
    };
}
pub(crate) use say;
