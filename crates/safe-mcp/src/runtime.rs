//! The async runtime a server runs on (stdio or HTTP): multi-threaded, every driver on; and
//! how its tasks are waited for at exit.

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

/// Waits for `tasks` (each writes an outcome record as it ends), at most `within`; past it,
/// warns that `what` did not end in time and returns, so a task that will not end cannot
/// hold the exit.
pub async fn join_within(
    tasks: Vec<tokio::task::JoinHandle<()>>,
    within: std::time::Duration,
    what: &str,
) {
    let all = async {
        for task in tasks {
            let _ = task.await;
        }
    };
    if tokio::time::timeout(within, all).await.is_err() {
        eprintln!(
            "safe-mcp: warning: {what} did not end within {} seconds",
            within.as_secs()
        );
    }
}
