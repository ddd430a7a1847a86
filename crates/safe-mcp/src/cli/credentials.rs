//! What a starting terminal server wires up for its credentials: on SIGHUP it reads `file:`
//! credentials again (a rotated token takes effect without a restart), in a task of the
//! server's runtime that holds the service weakly. Without `file:` credentials SIGHUP keeps its default
//! meaning. (Whether the credentials fit the view is the service's decision:
//! [`TerminalService::credentials_fit`].)

use std::sync::Arc;

use safe_mcp_core::credentials::Source;
use safe_mcp_core::terminal::TerminalService;

/// The task that reloads on SIGHUP, when the policy has a `file:` credential.
pub(crate) fn reloader(
    service: &Arc<TerminalService>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let files = service
        .policy()
        .credentials
        .specs
        .iter()
        .any(|s| matches!(s.source, Source::File(_)));
    if !files {
        return None;
    }
    let service = Arc::downgrade(service);
    Some(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                return eprintln!("safe-mcp: warning: SIGHUP will not reload credentials: {e}");
            }
        };
        while hangups.recv().await.is_some() {
            let Some(service) = service.upgrade() else {
                return;
            };
            for line in service.reload_credentials() {
                eprintln!("safe-mcp: credentials: {line}");
            }
        }
    })
}
