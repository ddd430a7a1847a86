//! Serving MCP over Streamable HTTP (DESIGN §11, `--http ADDR`): one server process, many
//! client sessions, each with its own tool server (its own process-session handles).
//!
//! rmcp's `StreamableHttpService` does the protocol; this crate decides who may reach it:
//! - `--http 127.0.0.1:PORT` (or `[::1]`) on loopback, or `--http unix:PATH`, a socket of
//!   mode 0600 that only the server's user (and root) can connect to;
//! - any other address only with `[http.auth] mode = "oauth"` ([`oauth`]): a server
//!   reachable from the network authenticates every caller, and is refused at start
//!   without it;
//! - `Host` must name the server (loopback names, or `[http] allowed_hosts`), so that a
//!   rebinding DNS name cannot reach it from a browser; a request with an `Origin` is
//!   refused unless `[http] allowed_origins` lists it (403); request bodies are capped;
//! - an MCP session is its caller's, and sessions and requests at once are limited in all
//!   and per caller ([`limits`]).
//!
//! The approval page ([`page`]) is served on the same stack (axum on hyper), on a loopback
//! address of its own. This crate decides who reaches the server; it runs no command and
//! knows no tool: the binary hands [`serve`] a factory of tool servers.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub mod jwks;
pub mod limits;
pub mod oauth;
pub mod page;

/// Where `--http` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    /// `ADDR:PORT`, `[V6]:PORT` or `unix:PATH`; a TCP address must be loopback unless
    /// callers authenticate (`oauth`).
    pub fn parse(text: &str, oauth: bool) -> Result<Listen, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("--http unix:PATH needs a path".into());
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        let addr: SocketAddr = text.parse().map_err(|_| {
            format!("--http {text:?}: give ADDRESS:PORT (such as 127.0.0.1:8080) or unix:PATH")
        })?;
        if !addr.ip().is_loopback() && !oauth {
            return Err(format!(
                "--http {addr}: a non-loopback address would let anyone who reaches it run commands; set [http.auth] mode = \"oauth\" (with issuer, audience and jwks_file or jwks_url), or listen on 127.0.0.1 or unix:PATH"
            ));
        }
        Ok(Listen::Tcp(addr))
    }
}

/// Tasks a server runs beside its transport, on the one runtime [`serve`] makes.
pub type Background = Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>;

/// Serves a fresh `factory(calls)` per client session at `/mcp` until SIGINT or SIGTERM; then
/// `on_end` runs (the sessions' cleanup). `background` runs beside it. The transport's refusals of a caller go to
/// `record`. An error is why it could not serve, for the binary's `fatal:` line.
pub fn serve<S, F>(
    listen: &Listen,
    factory: F,
    settings: safe_mcp_core::config::HttpSettings,
    record: limits::Recorder,
    (workers, background): (usize, Background),
    on_end: impl std::future::Future<Output = ()>,
) -> Result<(), String>
where
    S: rmcp::ServerHandler + Send + 'static,
    F: Fn(std::sync::Arc<limits::Calls>) -> Result<S, std::io::Error> + Send + Sync + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let guard = settings.oauth.clone().map(oauth::Guard::new).transpose()?;
    let result = runtime.block_on(async move {
        for task in background {
            tokio::spawn(task);
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "[::1]".to_owned(),
        ];
        hosts.extend(settings.allowed_hosts);
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(settings.allowed_origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(settings.max_body_bytes)
            .with_cancellation_token(stop.child_token());
        let sessions = std::sync::Arc::new(LocalSessionManager::default());
        let limits = limits::Limits::new(settings.limits, std::sync::Arc::clone(&sessions), record);
        // Every session's tool server counts its running calls in one place.
        let calls = limits::Calls::new(settings.limits);
        let factory = move || factory(std::sync::Arc::clone(&calls));
        let service = StreamableHttpService::new(factory, sessions, config);
        // Layers run outside in: the caller is named (oauth) before it is counted.
        let mut router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(limits, limits::admit))
            .layer(axum::middleware::from_fn(session_closed_is_200));
        if let Some(guard) = guard {
            let metadata = guard.metadata();
            router = router
                .layer(axum::middleware::from_fn_with_state(
                    guard,
                    oauth::authenticate,
                ))
                // The metadata is public: it is how a client finds the issuer.
                .route(
                    oauth::METADATA_PATH,
                    axum::routing::get(move || {
                        let metadata = metadata.clone();
                        async move { axum::Json(metadata) }
                    }),
                );
        }
        let shutdown = {
            let stop = stop.clone();
            async move {
                wait_for_signal().await;
                stop.cancel();
            }
        };
        match listen {
            Listen::Tcp(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                let bound = listener.local_addr().unwrap_or(*addr);
                tracing::info!("serving MCP at http://{bound}/mcp");
                axum::serve(listener, router)
                    .with_graceful_shutdown(shutdown)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Listen::Unix(path) => {
                let listener = bind_unix(path)?;
                tracing::info!("serving MCP at unix:{} (/mcp)", path.display());
                let served = axum::serve(listener, router)
                    .with_graceful_shutdown(shutdown)
                    .await;
                let _ = std::fs::remove_file(path);
                served.map_err(|e| e.to_string())?;
            }
        }
        on_end.await;
        Ok::<(), String>(())
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// A unix socket only this user can connect to: made under a 0077 umask, then checked.
fn bind_unix(path: &std::path::Path) -> Result<tokio::net::UnixListener, String> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    // A socket left by a server that was killed is replaced; anything else is not touched.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "--http unix:{}: something that is not a socket is there",
                path.display()
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let bound = tokio::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(|e| format!("cannot listen on unix:{}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(listener)
}

/// Resolves at the first SIGTERM or SIGINT: the end a supervisor or a client asks for (the
/// MCP stdio shutdown sends SIGTERM when closing stdin was not enough), which the servers
/// meet with the same cleanup as a closed session.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// A DELETE that closed a session answers 200 OK, not the SDK's 202 Accepted: the Python
/// SDK takes anything but 200 or 204 as a failed termination and warns on every close.
async fn session_closed_is_200(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::OK;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::Listen;

    #[test]
    fn only_loopback_and_unix_sockets_are_served_without_auth() {
        for good in ["127.0.0.1:8080", "[::1]:8080", "unix:/run/safe-mcp.sock"] {
            assert!(Listen::parse(good, false).is_ok(), "{good}");
        }
        for bad in [
            "0.0.0.0:8443",
            "192.168.1.5:80",
            "[::]:80",
            "localhost",
            "unix:",
            "8080",
        ] {
            assert!(Listen::parse(bad, false).is_err(), "{bad}");
        }
        let e = Listen::parse("0.0.0.0:8443", false).unwrap_err();
        assert!(e.contains("oauth"), "{e}");
        assert!(matches!(
            Listen::parse("0.0.0.0:8443", true),
            Ok(Listen::Tcp(_))
        ));
    }
}
