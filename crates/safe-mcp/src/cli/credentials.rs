//! What a starting terminal server wires up for its credentials: on SIGHUP it reads `file:`
//! credentials again, its own and its gateway servers' (a rotated token takes effect without a restart), in a task of the
//! server's runtime that holds the service weakly. Without `file:` credentials SIGHUP keeps its default
//! meaning. (Whether the credentials fit the view is the service's decision:
//! [`TerminalService::credentials_fit`].)

use std::sync::Arc;

use safe_mcp_core::credentials::Source;
use safe_mcp_core::terminal::TerminalService;

/// The task that reloads on SIGHUP, when the terminal's policy or a gateway server's has a
/// `file:` credential: every such service reads its own again.
pub(crate) fn reloader(
    services: Vec<Arc<TerminalService>>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let with_files: Vec<std::sync::Weak<TerminalService>> = services
        .iter()
        .filter(|service| {
            service
                .policy()
                .credentials
                .specs
                .iter()
                .any(|s| matches!(s.source, Source::File(_)))
        })
        .map(Arc::downgrade)
        .collect();
    if with_files.is_empty() {
        return None;
    }
    Some(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                return eprintln!("safe-mcp: warning: SIGHUP will not reload credentials: {e}");
            }
        };
        while hangups.recv().await.is_some() {
            for service in with_files.iter().filter_map(std::sync::Weak::upgrade) {
                for line in service.reload_credentials() {
                    eprintln!("safe-mcp: credentials: {line}");
                }
            }
        }
    })
}
