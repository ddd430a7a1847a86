//! Serving: `safe-mcp terminal` and `safe-mcp files`, on stdio or `--http`. One startup
//! path for both: load the policy for the server's section, start shipping, build the
//! service, then hand a factory of tool servers to the transport.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use rmcp::ServiceExt;
use safe_mcp_core::config::{Policy, SandboxMode, Section};
use safe_mcp_core::terminal::TerminalService;
use safe_mcp_exec::LocalExecutor;
use safe_mcp_http as http;
use safe_mcp_http::Background;

use super::load;
use crate::exit::fatal;
use crate::mcp;

/// `safe-mcp terminal`.
pub(crate) fn serve_terminal(config: Option<&Path>, http: Option<&str>) -> ExitCode {
    let (policy, listen) = match begin(config, http, Section::Terminal) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let service = TerminalService::with_egress(&policy, |network, trail, vault| {
        let proxy = safe_mcp_proxy::Proxy::with_credentials(network.clone(), trail, vault)?;
        Ok(Some(Arc::new(proxy)))
    });
    let service = match service {
        Ok(s) => Arc::new(s),
        Err(e) => return fatal(e),
    };
    if let Err(code) = trail_ready(&policy, service.gate().log(), "terminal") {
        return code;
    }
    match service.hold_protected() {
        Ok(notes) => {
            for note in notes {
                eprintln!("safe-mcp: {note}");
            }
        }
        Err(e) => return fatal(e),
    }
    let terminal = service.policy();
    let executor = match start_executor(&service) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if let Some(scratch) = safe_mcp_core::terminal::Executor::scratch_root(&executor) {
        service.count_in_jail_bytes(scratch.to_path_buf());
    }
    let view = safe_mcp_core::terminal::Executor::confinement(&executor)
        .view
        .view;
    if let Err(e) = service.credentials_fit(view) {
        return fatal(e);
    }
    if terminal.sandbox.mode == SandboxMode::Off {
        eprintln!(
            "safe-mcp: WARNING: [terminal.sandbox] mode = \"off\": commands are confined by path checks only, not by the kernel"
        );
    }
    // Four workers: an attempt record's group commit blocks its worker for one fsync, and the
    // stdio transport must keep moving meanwhile.
    // Tickets for clients that cannot be asked are approved at the desk beside the trail;
    // it closes (socket and key removed) when this function returns.
    let _desk = super::approvals::open(&service);
    let runs = mcp::terminal::Runs::default();
    let exposed = mcp::expose::Exposed::default();
    let mrtr = match mcp::mrtr::Mrtr::new(terminal.approvals.state_key.as_ref()) {
        Ok(m) => Arc::new(m),
        Err(e) => return fatal(format!("the approval state's key: {e}")),
    };
    // The approval page's port is taken now: one in use stops the start, not a call.
    let pages = match approval_page(terminal) {
        Ok(pages) => pages,
        Err(code) => return code,
    };
    // The downstream servers, each confined by its own executor; made before any client so
    // that one the machine cannot confine stops the start.
    let gateway = match crate::gateway::Gateway::build(&policy, &service) {
        Ok(g) => g,
        Err(e) => return fatal(e),
    };
    let executor: Arc<dyn safe_mcp_core::terminal::Executor> = Arc::new(executor);
    // Tasks of the server's one runtime: where commands reach the programs with argument
    // rules (nested calls), and the credentials' reload on SIGHUP.
    let mut background: Background = Vec::new();
    if let Some(listener) = mcp::nested::listener(&service, &executor) {
        background.push(Box::pin(listener));
    }
    let mut with_credentials = vec![Arc::clone(&service)];
    if let Some(gateway) = &gateway {
        with_credentials.extend(gateway.servers().iter().map(|s| Arc::clone(&s.narrowed)));
    }
    if let Some(reloader) = super::credentials::reloader(with_credentials) {
        background.push(Box::pin(reloader));
    }
    // The ssh keys' agent, which commands reach through SSH_AUTH_SOCK.
    match crate::ssh_agent::listener(&service) {
        Ok(Some(agent)) => background.push(Box::pin(agent)),
        Ok(None) => {}
        Err(e) => return fatal(e),
    }
    if let Some(gateway) = &gateway {
        background.push(Box::pin(Arc::clone(gateway).run()));
    }
    let closing = Arc::clone(&executor);
    let stopping = gateway.clone();
    let shared = mcp::terminal::Shared {
        runs: Arc::clone(&runs),
        pages,
        exposed,
        mrtr,
        gateway,
    };
    let make = {
        let (service, executor) = (Arc::clone(&service), executor);
        move |calls| {
            mcp::terminal::TerminalServer::new(
                Arc::clone(&service),
                Arc::clone(&executor),
                calls,
                shared.clone(),
            )
        }
    };
    // When the client goes, so do the sessions: each is killed, and its run writes the start
    // call's outcome record ("server-exit") before the process ends.
    let record: http::limits::Recorder = {
        let service = Arc::clone(&service);
        Arc::new(move |r| service.gate().append("http", r, false))
    };
    let end = ending(service, runs, closing, stopping);
    transport(listen, &policy, record, (4, background), end, make)
}

/// The executor for `service`'s confinement, or the exit with what would help.
fn start_executor(service: &TerminalService) -> Result<LocalExecutor, ExitCode> {
    let mode = service.policy().sandbox.mode;
    LocalExecutor::new(&service.confinement_spec()).map_err(|e| match e {
        // Nothing about the sandbox's mode would help here.
        e @ safe_mcp_exec::ConfineError::Process { .. } => fatal(e),
        e @ safe_mcp_exec::ConfineError::Namespaces(_) => fatal(format!(
            "{e} (set [terminal.sandbox] namespaces = \"auto\" to fall back to the host's view)"
        )),
        e => fatal(format!(
            "{e}; sandbox mode is \"{}\" (set [terminal.sandbox] mode = \"best-effort\" to run less confined)",
            mode.as_str()
        )),
    })
}

/// The approval page, listening, where `url_base` names one.
fn approval_page(
    terminal: &safe_mcp_core::config::TerminalPolicy,
) -> Result<Option<Arc<http::page::Pages>>, ExitCode> {
    match &terminal.approvals.url_base {
        Some((base, addr)) => http::page::Pages::bind(base, *addr).map(Some).map_err(|e| {
            fatal(format!(
                "[terminal.approvals] url_base = {base:?}: cannot listen on {addr}: {e}"
            ))
        }),
        None => Ok(None),
    }
}

/// What runs when the client goes: every session is killed, and its run writes the start
/// call's outcome record ("server-exit") before the process ends, and every gateway server
/// is stopped; last, what the sessions
/// made is swept and what the server made is removed.
async fn ending(
    service: Arc<TerminalService>,
    runs: mcp::terminal::Runs,
    closing: Arc<dyn safe_mcp_core::terminal::Executor>,
    gateway: Option<Arc<crate::gateway::Gateway>>,
) {
    let _ = service.stop_all(safe_mcp_core::sessions::EndedBy::ServerExit);
    // The downstream servers too: each run's outcome record is written before the sweep.
    if let Some(gateway) = gateway {
        gateway.stop().await;
    }
    let tasks: Vec<_> = runs
        .lock()
        .map(|mut r| r.drain(..).collect())
        .unwrap_or_default();
    crate::runtime::join_within(
        tasks,
        std::time::Duration::from_secs(5),
        "a session (at the server's exit)",
    )
    .await;
    service.release_protected();
    closing.close();
}

/// `safe-mcp files`.
pub(crate) fn serve_files(config: Option<&Path>, http: Option<&str>) -> ExitCode {
    let (policy, listen) = match begin(config, http, Section::Files) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let (service, notes) = match safe_mcp_organizer::FilesService::start(&policy) {
        Ok(s) => s,
        Err(e) => return fatal(e),
    };
    for note in notes {
        eprintln!("safe-mcp: files: {note}");
    }
    if let Err(code) = trail_ready(&policy, service.gate().log(), "files") {
        return code;
    }
    let service = Arc::new(service);
    let record: http::limits::Recorder = {
        let service = Arc::clone(&service);
        Arc::new(move |r| service.gate().append("http", r, false))
    };
    let make = move |calls| mcp::files::FilesServer::new(Arc::clone(&service), calls);
    transport(listen, &policy, record, (2, Vec::new()), async {}, make)
}

/// What both servers do first: the policy for their section, and where `--http` listens.
fn begin(
    config: Option<&Path>,
    http: Option<&str>,
    section: Section,
) -> Result<(Policy, Option<http::Listen>), ExitCode> {
    let policy = load(config, section).map_err(fatal)?;
    let listen = http
        .map(|a| http::Listen::parse(a, policy.http.oauth.is_some()))
        .transpose()
        .map_err(fatal)?;
    Ok((policy, listen))
}

/// The trail a server writes, ready: shipping started (a failure stops the start), and a
/// warning for each path the server cannot reach and for a trail not writable now.
fn trail_ready(
    policy: &Policy,
    log: &safe_mcp_core::audit::AuditLog,
    server: &str,
) -> Result<(), ExitCode> {
    start_shipping(policy, log, server).map_err(fatal)?;
    for p in safe_mcp_core::preflight::access_problems(policy) {
        eprintln!("safe-mcp: warning: {p}");
    }
    if let Err(e) = log.check() {
        eprintln!(
            "safe-mcp: warning: the audit trail is not writable now ({e}); calls will get AUDIT_UNAVAILABLE until it is"
        );
    }
    Ok(())
}

/// Serves until the client (stdio) or a signal (`--http`) ends it, then runs `end`. Over
/// HTTP each client session gets a tool server of its own (its own session handles), made
/// by `make` with the shared count of running calls.
fn transport<S: rmcp::ServerHandler + Send + 'static>(
    listen: Option<http::Listen>,
    policy: &Policy,
    record: http::limits::Recorder,
    (workers, background): (usize, Background),
    end: impl std::future::Future<Output = ()>,
    make: impl Fn(Option<Arc<http::limits::Calls>>) -> S + Send + Sync + 'static,
) -> ExitCode {
    match listen {
        Some(listen) => http::serve(
            &listen,
            move |calls| Ok(make(Some(calls))),
            policy.http.clone(),
            record,
            (workers, background),
            end,
        )
        .map_or_else(fatal, |()| ExitCode::SUCCESS),
        None => serve_stdio(make(None), (workers, background), end),
    }
}

/// Starts `[audit.ship]`'s sinks for `log`, when the policy names any.
fn start_shipping(
    policy: &Policy,
    log: &safe_mcp_core::audit::AuditLog,
    server: &str,
) -> Result<(), String> {
    let Some(ship) = &policy.audit.ship else {
        return Ok(());
    };
    let shipper = safe_mcp_core::audit::ship::Shipper::start(ship, server).map_err(|e| {
        format!(
            "[audit.ship]: cannot start shipping (spool_dir {}): {e}",
            ship.spool_dir.display()
        )
    })?;
    log.ship_to(shipper);
    Ok(())
}

/// Serves `server` over stdio until the client closes the session.
fn serve_stdio<S: rmcp::ServerHandler>(
    server: S,
    (workers, background): (usize, Background),
    on_end: impl std::future::Future<Output = ()>,
) -> ExitCode {
    let runtime = match crate::runtime::build(workers) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = runtime.block_on(async move {
        for task in background {
            tokio::spawn(task);
        }
        let running = match mcp::stdio::pipes() {
            Some((r, w)) => server.serve(mcp::stdio::LineTransport::new(r, w)).await?,
            None => {
                let transport =
                    mcp::stdio::LineTransport::new(tokio::io::stdin(), tokio::io::stdout());
                server.serve(transport).await?
            }
        };
        // A signal ends the session as a closed stdin does: the sessions are stopped, the
        // jail swept and the cgroups removed (`on_end`) instead of dying halfway.
        let cancel = running.cancellation_token();
        let waited = tokio::select! {
            waited = running.waiting() => Some(waited),
            () = http::wait_for_signal() => None,
        };
        if waited.is_none() {
            cancel.cancel();
        }
        on_end.await;
        if let Some(waited) = waited {
            waited?;
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    });
    // Work still on a blocking thread (a session that would not die) does not hold the
    // process past this.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(format!("the MCP session failed: {e}")),
    }
}
