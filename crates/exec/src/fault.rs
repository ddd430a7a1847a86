//! An I/O failure at a path ([`AtPath`]): what the executor's errors keep of the system's
//! error, with where it happened.

use std::path::PathBuf;

/// An I/O failure at a path: where, and what the system said.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct AtPath {
    /// The path it happened at.
    pub path: PathBuf,
    /// The system's error.
    #[source]
    pub source: std::io::Error,
}

impl AtPath {
    /// `source` at `path`.
    pub(crate) fn new(path: impl Into<PathBuf>, source: std::io::Error) -> AtPath {
        AtPath {
            path: path.into(),
            source,
        }
    }
}
