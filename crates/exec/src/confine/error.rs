//! Why confinement could not be prepared: the typed [`ConfineError`].
//!
//! A failure of the system (a directory not made, a Landlock call refused) keeps the
//! system's error as its source, with where it happened; a verdict (no private view on this
//! kernel, no way to hold commands to the proxy) is the sentence that says why and what to
//! do.

use std::path::PathBuf;

pub use crate::fault::AtPath;
use crate::rundir::TmpError;

/// Why confinement could not be prepared. Fatal at startup under `enforce`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The Landlock ruleset could not be built as required.
    #[error("Landlock cannot be enforced on this kernel: {what}: {source}")]
    Landlock {
        /// What was being added or made: a path, a port rule, a syscall.
        what: String,
        /// What the kernel or the landlock crate said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The seccomp program could not be compiled (a jump beyond its reach: a bug).
    #[error("the seccomp filter could not be built: {0}")]
    Seccomp(String),
    /// A temporary directory of the commands could not be made.
    #[error("the commands' temporary directories: {0}")]
    Tmp(#[source] AtPath),
    /// The server's temporary directory lies inside the jail, where commands could reach
    /// every call's temporary files.
    #[error(
        "the server's temporary directory {} lies inside the jail; set TMPDIR for the server to a directory outside it",
        .0.display()
    )]
    TmpInsideJail(PathBuf),
    /// `namespaces = "required"` and no private view could be made: why.
    #[error("namespaces = \"required\", but no private view of the machine could be made: {0}")]
    Namespaces(String),
    /// Egress is on, but commands cannot be held to the proxy: why.
    #[error("egress (mode = \"allowlist\") cannot be enforced: {0}")]
    Egress(String),
    /// The proxy's per-call listener could not be made.
    #[error("egress (mode = \"allowlist\"): the proxy's listener: {0}")]
    EgressListener(#[source] std::io::Error),
    /// A call's memory cgroup could not be made.
    #[error("the call's memory cgroup: {0}")]
    Memory(#[source] AtPath),
    /// What the executor needs of this process could not be had: becoming the children's
    /// subreaper, `/dev/null`. Not Landlock's: the message must not send the operator there.
    #[error("the executor could not start: {what}: {source}")]
    Process {
        /// What was being done.
        what: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
}

impl ConfineError {
    /// A Landlock failure at `what`.
    pub(crate) fn landlock(
        what: impl std::fmt::Display,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> ConfineError {
        ConfineError::Landlock {
            what: what.to_string(),
            source: source.into(),
        }
    }
}

impl From<TmpError> for ConfineError {
    fn from(e: TmpError) -> ConfineError {
        match e {
            TmpError::At(at) => ConfineError::Tmp(at),
            TmpError::InsideJail(dir) => ConfineError::TmpInsideJail(dir),
        }
    }
}
