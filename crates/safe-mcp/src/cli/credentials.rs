//! What a starting terminal server does about its credentials beyond the core: it refuses
//! `env:` credentials where commands would share its view of `/proc` (they could read the
//! server's own environment there), and on SIGHUP it reads `file:` credentials again (a
//! rotated token takes effect without a restart), on a thread of its own that holds the
//! service weakly. Without `file:` credentials SIGHUP keeps its default meaning.

use std::sync::Arc;

use safe_mcp_core::credentials::Source;
use safe_mcp_core::terminal::{Executor, TerminalService};

/// Refuses an `env:` credential when commands run in the host's view: `/proc/<server>/environ`
/// would show them the real value.
pub(crate) fn view_keeps_them(
    service: &TerminalService,
    executor: &impl Executor,
) -> Result<(), String> {
    let from_env: Vec<&str> = service
        .policy()
        .credentials
        .specs
        .iter()
        .filter(|s| matches!(s.source, Source::Env(_)))
        .map(|s| s.name.as_str())
        .collect();
    if from_env.is_empty()
        || executor.confinement().view.view == safe_mcp_contract::ViewKind::Private
    {
        return Ok(());
    }
    Err(format!(
        "[[terminal.credentials]] {} come from the server's environment, and commands here run in the host's view, where /proc shows them that environment; use from = \"file:PATH\" (a file of mode 0600 outside every root), or a private view ([terminal.sandbox] namespaces = \"required\")",
        from_env.join(", ")
    ))
}

/// Starts the thread, when the policy has a `file:` credential.
pub(crate) fn reload_on_hangup(service: &Arc<TerminalService>) {
    let files = service
        .policy()
        .credentials
        .specs
        .iter()
        .any(|s| matches!(s.source, Source::File(_)));
    if !files {
        return;
    }
    let service = Arc::downgrade(service);
    let started = std::thread::Builder::new()
        .name("credentials-reload".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    return eprintln!("safe-mcp: warning: SIGHUP will not reload credentials: {e}");
                }
            };
            runtime.block_on(async move {
                use tokio::signal::unix::{SignalKind, signal};
                let mut hangups = match signal(SignalKind::hangup()) {
                    Ok(s) => s,
                    Err(e) => {
                        return eprintln!(
                            "safe-mcp: warning: SIGHUP will not reload credentials: {e}"
                        );
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
            });
        });
    if let Err(e) = started {
        eprintln!("safe-mcp: warning: SIGHUP will not reload credentials: {e}");
    }
}
