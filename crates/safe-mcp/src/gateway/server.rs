//! One downstream server: its confined runs one after another (restarted on a crash with a
//! backoff, stopped with the gateway), the MCP client that speaks to the current run, and
//! the tools it lists that its policy lets the client see.
//!
//! Its MCP client ([`Client`]) hears what the server tells the gateway (its lists changed,
//! progress, log messages) and what it asks (sampling, elicitation). Progress reaches the
//! client whose call it belongs to (the server is given a token of the gateway's own, mapped
//! back), only ever increasing. Log messages reach every client, redacted. Sampling and
//! elicitation pass to the client of the call in flight only where the server's entry
//! allows them (`allow_sampling`, `allow_elicitation`), and each request is recorded either
//! way; the server is told of neither capability otherwise.
//!
//! The run itself is the narrowed service's ([`safe_mcp_core::terminal::downstream`]); this
//! module only connects the client to its pipes and keeps the state the gateway answers
//! with: running or not, its pid, how often it restarted, the last reason it ended.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, Implementation, Tool};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RunningService};
use safe_mcp_contract::Interactive;
use safe_mcp_core::config::GatewayServer;
use safe_mcp_core::envelope::ResultCode;
use safe_mcp_core::terminal::downstream::{DownstreamEnd, DownstreamIo, Runner};
use safe_mcp_core::terminal::gateway::Forwarder;
use safe_mcp_core::terminal::{Executor, TerminalService};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::gateway::pipe::Pipes;

/// How long a started server has to answer `initialize` and list its tools.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// The first pause before a restart; it doubles with each quick failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest pause before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run this long was healthy: the backoff starts over.
const HEALTHY: Duration = Duration::from_secs(60);
/// After a call timed out, how long the server has to answer a ping before it counts as
/// hung and is restarted.
const PING_WITHIN: Duration = Duration::from_secs(2);
/// How long an ended call's progress is still passed on.
const LATE_PROGRESS: Duration = Duration::from_secs(5);

/// A call being forwarded: its token, its client, the last progress passed on.
struct Forward {
    token: u64,
    upstream: Upstream,
    progress: f64,
}

/// The calls being forwarded, and those ended lately (oldest first).
#[derive(Default)]
struct Forwards {
    live: Vec<Forward>,
    ended: std::collections::VecDeque<(Instant, Forward)>,
}

impl Forwards {
    /// Forgets the calls ended more than [`LATE_PROGRESS`] ago.
    fn prune(&mut self) {
        while self
            .ended
            .front()
            .is_some_and(|(at, _)| at.elapsed() >= LATE_PROGRESS)
        {
            self.ended.pop_front();
        }
    }

    fn find(&mut self, token: u64) -> Option<&mut Forward> {
        if let Some(at) = self.live.iter().position(|f| f.token == token) {
            return self.live.get_mut(at);
        }
        self.ended
            .iter_mut()
            .map(|(_, f)| f)
            .find(|f| f.token == token)
    }
}

/// One of a server's allowed tools: its own name, and the tool as the client sees it
/// (`<server>__<tool>`, with `approval_ticket` where `confirm` names it).
pub struct Listed {
    /// The name the server knows it by.
    pub own: String,
    /// The tool the client is shown.
    pub tool: Tool,
}

/// What changed of a server, for the clients.
#[derive(Debug, Clone)]
pub enum Change {
    /// Its tools (it started, ended, or said so).
    Tools,
    /// Its resources' list.
    Resources,
    /// Its prompts' list.
    Prompts,
    /// One resource a client subscribed to.
    Updated(String),
    /// A log message of the server's (redacted), for every client.
    #[allow(deprecated)] // logging: deprecated on 2026-07-28 (SEP-2577), spoken on 2025-11-25
    Log(rmcp::model::LoggingMessageNotificationParam),
}

/// What the gateway is told when something of a server changed.
pub type OnChange = Arc<dyn Fn(Change) + Send + Sync>;

/// The current run, once its client is ready.
struct Live {
    peer: Peer<RoleClient>,
    /// Its ends; stopping through them ends the run (a hung server is restarted).
    pipes: Arc<Pipes>,
}

/// What the gateway reports of a server.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Whether a run is up and answering.
    pub ready: bool,
    /// Its pid while it runs.
    pub pid: Option<u32>,
    /// How many times it was started.
    pub starts: u64,
    /// Why the last run ended or could not start, redacted.
    pub last_end: Option<String>,
}

/// One `[[gateway.servers]]` entry at run time.
pub struct Server {
    /// Its entry.
    pub entry: GatewayServer,
    /// Its narrowed service (its jail, network, credentials, redactor).
    pub narrowed: Arc<TerminalService>,
    executor: Arc<dyn Executor>,
    live: Mutex<Option<Live>>,
    /// Its allowed tools as the client sees them, made once per listing.
    tools: Mutex<Arc<Vec<Listed>>>,
    status: Mutex<Status>,
    stop: CancellationToken,
    /// The calls being forwarded now and those ended in the last [`LATE_PROGRESS`], by the
    /// progress token the server was given: whose client its progress, and its sampling and
    /// elicitation requests, go to (the client library may hand the gateway a progress
    /// notice after the result it preceded).
    forwards: Mutex<Forwards>,
    tokens: std::sync::atomic::AtomicU64,
    /// The terminal's own service: what the server asks of a client is recorded there.
    pub main: Arc<TerminalService>,
}

/// The client a forwarded call came from, and its progress token.
#[derive(Clone)]
pub struct Upstream {
    /// The client.
    pub peer: rmcp::service::Peer<rmcp::service::RoleServer>,
    /// Its progress token for this call, if it asked for progress.
    pub progress: Option<rmcp::model::ProgressToken>,
    /// Who the client is.
    pub caller: safe_mcp_core::audit::Caller,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Server {
    /// A server not yet started.
    pub fn new(
        entry: GatewayServer,
        (main, narrowed): (Arc<TerminalService>, Arc<TerminalService>),
        executor: Arc<dyn Executor>,
        stop: CancellationToken,
    ) -> Server {
        Server {
            entry,
            narrowed,
            executor,
            live: Mutex::default(),
            tools: Mutex::default(),
            status: Mutex::default(),
            stop,
            forwards: Mutex::default(),
            tokens: std::sync::atomic::AtomicU64::new(1),
            main,
        }
    }

    /// Registers a call being forwarded for `upstream`: the token the server is given.
    pub fn begin_forward(&self, upstream: Upstream) -> u64 {
        let token = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut forwards = lock(&self.forwards);
        forwards.prune();
        forwards.live.push(Forward {
            token,
            upstream,
            progress: f64::NEG_INFINITY,
        });
        token
    }

    /// Whether `progress` on `token` is past the last passed on (and now is the last): it
    /// must increase, and a notice handled late is dropped rather than sent out of order.
    pub fn progress_advances(&self, token: u64, progress: f64) -> bool {
        let mut forwards = lock(&self.forwards);
        match forwards.find(token) {
            Some(f) if progress > f.progress => {
                f.progress = progress;
                true
            }
            _ => false,
        }
    }

    /// The forwarded call `token` ended.
    pub fn end_forward(&self, token: u64) {
        let mut forwards = lock(&self.forwards);
        if let Some(at) = forwards.live.iter().position(|f| f.token == token) {
            let ended = forwards.live.swap_remove(at);
            forwards.ended.push_back((Instant::now(), ended));
        }
    }

    /// The client of the forwarded call `token` (for its progress, also shortly after it
    /// ended), or of the latest call still running when `None`.
    pub fn upstream(&self, token: Option<u64>) -> Option<Upstream> {
        let mut forwards = lock(&self.forwards);
        match token {
            Some(t) => forwards.find(t).map(|f| f.upstream.clone()),
            None => forwards
                .live
                .iter()
                .max_by_key(|f| f.token)
                .map(|f| f.upstream.clone()),
        }
    }

    /// Its allowed tools, as the client sees them.
    pub fn tools(&self) -> Arc<Vec<Listed>> {
        Arc::clone(&lock(&self.tools))
    }

    /// The client of its current run, while it is up.
    pub fn peer(&self) -> Option<Peer<RoleClient>> {
        lock(&self.live).as_ref().map(|l| l.peer.clone())
    }

    /// The client of its current run and the run's ends (which name the run).
    pub fn current(&self) -> Option<(Peer<RoleClient>, Arc<Pipes>)> {
        lock(&self.live)
            .as_ref()
            .map(|l| (l.peer.clone(), Arc::clone(&l.pipes)))
    }

    /// `text` from the server, redacted as its own secrets and the terminal's are.
    pub fn scrub_text(&self, text: &str) -> String {
        safe_mcp_core::terminal::gateway::scrub_text(text, &self.narrowed, &self.main)
    }

    /// `value` from the server, every string in it redacted as [`Server::scrub_text`] does.
    pub fn scrub_value(&self, value: &mut Value) {
        safe_mcp_core::terminal::gateway::scrub(value, &self.narrowed, &self.main);
    }

    /// `item` from the server (a listing, a request it makes of the client) redacted as
    /// [`Server::scrub_value`] does; `None`, so that it is withheld, when its redacted form
    /// is not one (never passed on as it was: that would pass a secret on).
    pub fn scrub<T: serde::Serialize + serde::de::DeserializeOwned>(&self, item: &T) -> Option<T> {
        let mut value = serde_json::to_value(item).ok()?;
        self.scrub_value(&mut value);
        let scrubbed = serde_json::from_value(value).ok();
        if scrubbed.is_none() {
            tracing::warn!(
                "gateway server {}: an item it sent is withheld: redacted, it no longer reads as one",
                self.entry.name
            );
        }
        scrubbed
    }

    /// Why a call of it cannot be forwarded while it is down, and what to do instead.
    pub fn not_running(&self) -> String {
        let last = self.status().last_end;
        format!(
            "the {} server is not running now (last: {}); it is restarted by itself, so try again shortly (tools/list shows its tools once it is up)",
            self.entry.name,
            last.as_deref().unwrap_or("starting")
        )
    }

    /// Its state now.
    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// The executor its runs are confined by.
    pub fn executor(&self) -> &dyn Executor {
        self.executor.as_ref()
    }

    /// Runs the server until the gateway stops: each run started, connected, watched, and
    /// after it ends restarted after a pause that doubles while runs keep failing quickly.
    pub async fn supervise(self: Arc<Self>, changed: OnChange) {
        let mut failures: u32 = 0;
        while !self.stop.is_cancelled() {
            let began = Instant::now();
            let end = self.run_once(&changed).await;
            let reason = match (&end.result.code, end.exit_code) {
                (ResultCode::Ok, _) => end.result.reason.clone(),
                (code, _) => format!("{}: {}", code.as_str(), end.result.reason),
            };
            {
                let mut status = lock(&self.status);
                status.ready = false;
                status.pid = None;
                status.last_end = Some(self.scrub_text(&reason));
            }
            *lock(&self.live) = None;
            *lock(&self.tools) = Arc::default();
            changed(Change::Tools);
            if self.stop.is_cancelled() {
                break;
            }
            failures = if began.elapsed() >= HEALTHY {
                0
            } else {
                failures.saturating_add(1)
            };
            let pause = FIRST_BACKOFF
                .saturating_mul(1 << failures.min(8))
                .min(MAX_BACKOFF);
            tracing::warn!(
                "gateway server {} ended ({reason}); restarting in {} ms",
                self.entry.name,
                pause.as_millis()
            );
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.stop.cancelled() => break,
            }
        }
    }

    /// One run: started through the narrowed service, its client connected and its tools
    /// listed, then watched until it or its client ends.
    async fn run_once(self: &Arc<Self>, changed: &OnChange) -> DownstreamEnd {
        let run_stop = self.stop.child_token();
        let (pipes, started) = Pipes::new(run_stop.clone());
        let failed = |why: String| DownstreamEnd {
            exit_code: None,
            result: safe_mcp_core::OperationResult::new(
                "gateway_serve",
                ResultCode::InternalError,
                why,
            ),
        };
        let ends = match pipes.ends() {
            Ok(ends) => ends,
            Err(e) => return failed(format!("its pipes could not be made: {e}")),
        };
        tokio::spawn(Arc::clone(&pipes).keep_stderr(ends.stderr));
        let telling = Arc::clone(&pipes);
        let io = DownstreamIo {
            stdio: ends.given,
            interactive: Interactive(Arc::clone(&pipes) as _),
            stopped_because: Arc::new(move || telling.stopped_because()),
        };
        lock(&self.status).starts += 1;
        let me = Arc::clone(self);
        let (command, cancel) = (
            self.entry.command.clone(),
            Box::pin(run_stop.clone().cancelled_owned()),
        );
        let mut run = tokio::spawn(async move {
            Runner::of(&me.narrowed)
                .serve(command, me.executor.as_ref(), io, cancel)
                .await
        });
        let ended = |joined: Result<DownstreamEnd, tokio::task::JoinError>| {
            joined.unwrap_or_else(|e| failed(format!("the server's run failed: {e}")))
        };
        let stdin = tokio::select! {
            s = started => s,
            joined = &mut run => return ended(joined),
        };
        let client = match stdin {
            Ok((fd, pid)) => self.connect((&pipes, ends.stdout), fd, pid, changed).await,
            Err(_) => Err("the server's stdin never arrived".to_owned()),
        };
        match client {
            Ok(running) => {
                changed(Change::Tools);
                tokio::select! {
                    _ = running.waiting() => {}
                    () = run_stop.cancelled() => {}
                }
            }
            Err(why) => tracing::warn!("gateway server {}: {why}", self.entry.name),
        }
        if self.stop.is_cancelled() {
            pipes.stop_for("the gateway stopped");
        } else {
            pipes.stop_after("its MCP connection ended");
        }
        ended(run.await)
    }

    /// Connects the MCP client to a started run and lists its tools.
    async fn connect(
        self: &Arc<Self>,
        (pipes, stdout): (&Arc<Pipes>, crate::gateway::pipe::Reader),
        stdin: std::os::fd::OwnedFd,
        pid: u32,
        changed: &OnChange,
    ) -> Result<RunningService<RoleClient, Client>, String> {
        let writer = tokio::net::unix::pipe::Sender::from_owned_fd(stdin)
            .map_err(|e| format!("its stdin: {e}"))?;
        let client = Client::new(Arc::downgrade(self), Arc::clone(changed));
        let ready = async {
            let running = client
                .serve((stdout, writer))
                .await
                .map_err(|e| format!("it did not initialize: {e}"))?;
            let tools = running
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("it did not list its tools: {e}"))?;
            Ok::<_, String>((running, tools))
        };
        let (running, tools) = tokio::time::timeout(READY_WITHIN, ready)
            .await
            .map_err(|_| format!("it was not ready within {} s", READY_WITHIN.as_secs()))??;
        self.keep_tools(tools);
        *lock(&self.live) = Some(Live {
            peer: running.peer().clone(),
            pipes: Arc::clone(pipes),
        });
        let mut status = lock(&self.status);
        status.ready = true;
        status.pid = Some(pid);
        Ok(running)
    }

    /// After a call timed out: a server that does not answer a ping either is hung (a
    /// single-threaded server stuck in one call answers nothing more), and its run is
    /// stopped, so that the supervisor starts it again.
    pub async fn restart_if_hung(&self, peer: &Peer<RoleClient>, run: &Arc<Pipes>) {
        let ping = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        let answered = tokio::time::timeout(PING_WITHIN, peer.send_request(ping)).await;
        if !matches!(answered, Ok(Ok(_))) {
            tracing::warn!(
                "gateway server {} answers no ping after a call timed out; restarting it",
                self.entry.name
            );
            // That run only: a restart since (a fresh run) is left alone.
            if let Some(live) = lock(&self.live).as_ref()
                && Arc::ptr_eq(&live.pipes, run)
            {
                live.pipes.stop_for(&format!(
                    "restarted: it answered no ping within {} s after a call timed out (hung)",
                    PING_WITHIN.as_secs()
                ));
            }
        }
    }

    /// Keeps the tools its policy lists to the client.
    fn keep_tools(&self, tools: Vec<Tool>) {
        let listed = tools
            .into_iter()
            .filter(|t| self.entry.tools.lists(&t.name))
            .filter_map(|tool| {
                let own = tool.name.to_string();
                // What the server says of its tools reaches the model: redacted.
                let mut tool = self.scrub(&tool)?;
                // A tool a person approves each call of takes the ticket a refusal gives,
                // as run_command does; the gateway keeps it from the server.
                if self.entry.tools.needs_approval(&own) {
                    with_ticket(&mut tool);
                }
                tool.name = safe_mcp_core::gateway::client_name(&self.entry.name, &own).into();
                Some(Listed { own, tool })
            })
            .collect();
        *lock(&self.tools) = Arc::new(listed);
    }

    /// Lists its tools again (it said they changed).
    pub async fn relist(&self) {
        if let Some(peer) = self.peer()
            && let Ok(tools) = peer.list_all_tools().await
        {
            self.keep_tools(tools);
        }
    }

    /// The last of what the current run wrote to stderr, redacted.
    pub fn stderr_tail(&self) -> Option<String> {
        let tail = lock(&self.live).as_ref().map(|l| l.pipes.stderr_tail())?;
        Some(self.scrub_text(&tail))
    }

    /// What `describe_policy` says of it (the gateway's description lists each server's).
    pub fn describe(&self, verbose: bool) -> Value {
        let status = self.status();
        let entry = &self.entry;
        let names = |v: &[safe_mcp_core::gateway::NamePattern]| {
            v.iter().map(|p| p.text().to_owned()).collect::<Vec<_>>()
        };
        let tools: Vec<String> = self
            .tools()
            .iter()
            .map(|l| l.tool.name.to_string())
            .collect();
        let policy = self.narrowed.policy();
        let mut out = serde_json::json!({
            "name": entry.name,
            "running": status.ready,
            "pid": status.pid,
            "starts": status.starts,
            "last_end": status.last_end,
            "tools": tools,
            "policy": {
                "allow": names(&entry.tools.allow),
                "deny": names(&entry.tools.deny),
                "confirm": names(&entry.tools.confirm),
                "args": entry.tools.args.iter().map(|a| a.describe()).collect::<Vec<_>>(),
                "max_result_bytes": entry.max_result_bytes,
                "call_timeout_seconds": entry.call_timeout_seconds,
            },
            "confined": {
                "programs": policy.allow.iter().collect::<Vec<_>>(),
                "write_paths": policy.write_paths,
                "network": policy.network.mode.as_str(),
                "allow_domains": policy.network.allow.iter().map(|d| d.text()).collect::<Vec<_>>(),
                "summary": self.executor.confinement_summary(),
            },
        });
        if verbose {
            out["stderr_tail"] = self.stderr_tail().into();
            out["confinement"] =
                serde_json::to_value(self.executor.confinement()).unwrap_or(Value::Null);
        }
        out
    }
}

/// The client side of one run.
pub struct Client {
    server: Weak<Server>,
    changed: OnChange,
}

impl Client {
    /// The client of `server`'s run, telling the gateway through `changed`.
    pub fn new(server: Weak<Server>, changed: OnChange) -> Client {
        Client { server, changed }
    }

    /// Whether its server passes resources and prompts through.
    fn passes(&self) -> bool {
        self.server.upgrade().is_some_and(|s| s.entry.resources)
    }

    /// The client of the call in flight a server's request belongs to, and the request
    /// redacted, once the entry allows `what` (`allowed`); recorded either way.
    fn ask_upstream<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        (what, params): (&str, &T),
        allowed: impl Fn(&Server) -> bool,
        key: &str,
    ) -> Result<(Upstream, T), rmcp::ErrorData> {
        let server = self
            .server
            .upgrade()
            .ok_or_else(|| rmcp::ErrorData::internal_error("the gateway is stopping", None))?;
        let upstream = server.upstream(None);
        let caller = upstream
            .as_ref()
            .map(|u| u.caller.clone())
            .unwrap_or_default();
        let forwarder = Forwarder::of(&server.main);
        let refuse = |why: String| {
            forwarder.asked(&server.entry, what, Err(why.clone()), &caller);
            rmcp::ErrorData::invalid_request(why, None)
        };
        if !allowed(&server) {
            return Err(refuse(format!(
                "the safe-mcp gateway does not pass {what} on for the {} server ([[gateway.servers]] {key} = false)",
                server.entry.name
            )));
        }
        let Some(upstream) = upstream else {
            return Err(refuse(format!(
                "{what} is passed on only during a call of one of the {} server's tools",
                server.entry.name
            )));
        };
        let Some(params) = server.scrub(params) else {
            return Err(refuse(format!(
                "the safe-mcp gateway could not redact this {what} request of the {} server, so it is not passed on",
                server.entry.name
            )));
        };
        forwarder.asked(&server.entry, what, Ok(()), &caller);
        Ok((upstream, params))
    }
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.relist().await;
            (self.changed)(Change::Tools);
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.passes() {
            (self.changed)(Change::Resources);
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.passes() {
            (self.changed)(Change::Prompts);
        }
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if self.passes() {
            (self.changed)(Change::Updated(params.uri));
        }
    }

    async fn on_progress(
        &self,
        mut params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        let token = match &params.progress_token.0 {
            rmcp::model::NumberOrString::Number(n) => u64::try_from(*n).ok(),
            rmcp::model::NumberOrString::String(s) => s.parse().ok(),
        };
        let Some((token, upstream)) = token.and_then(|t| Some((t, server.upstream(Some(t))?)))
        else {
            return;
        };
        if !server.progress_advances(token, params.progress) {
            return;
        }
        let Some(theirs) = upstream.progress else {
            return;
        };
        params.progress_token = theirs;
        if let Some(message) = params.message.as_mut() {
            *message = server.scrub_text(message);
        }
        let _ = upstream.peer.notify_progress(params).await;
    }

    #[allow(deprecated)] // logging: deprecated on 2026-07-28 (SEP-2577); stdio servers speak 2025-11-25
    async fn on_logging_message(
        &self,
        mut params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        server.scrub_value(&mut params.data);
        params.logger = Some(match params.logger.take() {
            Some(l) => format!("{}/{}", server.entry.name, server.scrub_text(&l)),
            None => server.entry.name.clone(),
        });
        (self.changed)(Change::Log(params));
    }

    #[allow(deprecated)] // sampling: deprecated on 2026-07-28 (SEP-2577); stdio servers speak 2025-11-25
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let what = "sampling/createMessage";
        let (upstream, params) = self.ask_upstream(
            (what, &params),
            |s| s.entry.allow_sampling,
            "allow_sampling",
        )?;
        let asked = upstream.peer.create_message(params).await;
        asked.map_err(|e| rmcp::ErrorData::internal_error(format!("the client: {e}"), None))
    }

    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let what = "elicitation/create";
        let (upstream, params) = self.ask_upstream(
            (what, &params),
            |s| s.entry.allow_elicitation,
            "allow_elicitation",
        )?;
        let asked = upstream.peer.create_elicitation(params).await;
        asked.map_err(|e| rmcp::ErrorData::internal_error(format!("the client: {e}"), None))
    }

    #[allow(deprecated)] // sampling's capability: see `create_message`
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let entry = self.server.upgrade().map(|s| s.entry.clone());
        let mut capabilities = ClientCapabilities::default();
        if let Some(entry) = entry {
            let allowed = ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .build();
            if entry.allow_sampling {
                capabilities.sampling = allowed.sampling;
            }
            if entry.allow_elicitation {
                capabilities.elicitation = allowed.elicitation;
            }
        }
        rmcp::model::ClientConfig::new(
            capabilities,
            Implementation::new("safe-mcp-gateway", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
    }
}

/// The argument a confirm tool's call carries its approved ticket in.
pub const TICKET_ARGUMENT: &str = "approval_ticket";

/// Adds [`TICKET_ARGUMENT`] to `tool`'s input schema.
fn with_ticket(tool: &mut Tool) {
    let mut schema = (*tool.input_schema).clone();
    let properties = schema
        .entry("properties")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(map) = properties.as_object_mut() {
        map.insert(
            TICKET_ARGUMENT.into(),
            serde_json::json!({
                "type": "string",
                "description": "The ticket a refusal gave (detail.approval.ticket), once a person approved it: repeat the same call with it, and it is forwarded once."
            }),
        );
    }
    tool.input_schema = Arc::new(schema);
}
