//! How a session's end reads in an envelope: the reason of the start call's outcome, and
//! of each read once the session has ended.

use crate::sessions::{EndedBy, SessionEnd};

/// The reason of a read: `running`, or how it ended.
pub(super) fn read_reason(running: bool, end: Option<&SessionEnd>) -> String {
    match (running, end) {
        (true, _) => "running".to_owned(),
        (false, Some(end)) => ended_reason(end),
        (false, None) => "ended".to_owned(),
    }
}

/// How a session ended, in words: `ended: exit code 1`, and what stopped it when it did
/// not end by itself.
pub(super) fn ended_reason(end: &SessionEnd) -> String {
    let status = end
        .exit_code
        .map_or_else(|| "killed".to_owned(), |c| format!("exit code {c}"));
    if let Some((_, why)) = &end.limit {
        return format!("ended: {status}; {why}");
    }
    match end.how {
        EndedBy::Exit => format!("ended: {status}"),
        EndedBy::Stop => {
            format!("ended: {status}; stopped by stop_process, its whole tree was killed")
        }
        EndedBy::Idle => format!(
            "ended: {status}; no read or write for [terminal.sessions] idle_timeout_seconds, its whole tree was killed"
        ),
        EndedBy::Timeout => format!(
            "ended: {status}; it ran past its timeout ([terminal.sessions] max_seconds), its whole tree was killed"
        ),
        EndedBy::ServerExit => {
            format!("ended: {status}; the server exited, its whole tree was killed")
        }
        EndedBy::Failed => "ended: it failed to start".to_owned(),
    }
}
