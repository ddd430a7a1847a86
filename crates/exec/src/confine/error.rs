//! Why confinement could not be prepared: the typed [`ConfineError`].

/// Why confinement could not be prepared. Fatal at startup under `enforce`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The Landlock ruleset could not be built as required.
    #[error("Landlock cannot be enforced on this kernel: {0}")]
    Landlock(String),
    /// The seccomp program could not be compiled.
    #[error("the seccomp filter could not be built: {0}")]
    Seccomp(String),
    /// The root of the commands' temporary directories could not be made.
    #[error("the commands' temporary directories: {0}")]
    Tmp(String),
    /// `namespaces = "required"` and no private view could be made.
    #[error("namespaces = \"required\", but no private view of the machine could be made: {0}")]
    Namespaces(String),
    /// Egress is on, but commands cannot be held to the proxy.
    #[error("egress (mode = \"allowlist\") cannot be enforced: {0}")]
    Egress(String),
    /// A call's memory cgroup could not be made.
    #[error("the call's memory cgroup: {0}")]
    Memory(String),
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
