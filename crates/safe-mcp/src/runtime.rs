//! The async runtime a server runs on (stdio or HTTP): multi-threaded, every driver on.

use std::process::ExitCode;

use crate::exit::fatal;

/// A runtime with `workers` threads, or the exit code of the failure.
pub fn build(workers: usize) -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| fatal(format!("cannot start the async runtime: {e}")))
}
