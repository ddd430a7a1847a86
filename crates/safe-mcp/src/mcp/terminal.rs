//! MCP wiring of the terminal server: commands and process sessions (the file tools are in
//! [`super::file_tools`]), tool schemas only, no rules.
//!
//! Owns translating `tools/call` arguments into core requests and envelopes into tool
//! results. Arguments are deserialized here (through [`super::call`]), not by the SDK, so that
//! a bad argument comes back as an INVALID_REQUEST envelope that matches the declared
//! `outputSchema` like every other result. It must never decide anything: every verdict comes
//! from `safe_mcp_core`.

use std::sync::Arc;

use rmcp::model::{CallToolResult, Implementation, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use safe_mcp_core::progress::CommandProgress;
use safe_mcp_core::terminal::{Executor, Observer, OutputObserver, RunRequest, TerminalService};

use crate::mcp::call::{
    RecordRefusal, arguments, call_counted, envelope_schema, input, to_result, tool_of,
};
use crate::mcp::gateway::no_resources;
use crate::mcp::progress::Ticker;
pub use crate::mcp::session_args::{
    CommandArg, DescribeArgs, ExplainArgs, HandleArgs, NoArgs, ReadArgs, RunArgs, StartArgs, Until,
    WriteArgs,
};
use crate::mcp::shared::SessionScopes;
pub use crate::mcp::shared::{Runs, Shared};
use safe_mcp_core::OperationResult;
use safe_mcp_core::terminal::process;
use std::time::Duration;

/// The terminal MCP server.
#[derive(Clone)]
pub struct TerminalServer {
    service: Arc<TerminalService>,
    executor: Arc<dyn Executor>,
    /// This connection: a session's handle works only here.
    owner: Arc<str>,
    /// The sessions' runs, awaited at shutdown so that each writes its outcome record.
    runs: Runs,
    /// The out-of-band approval pages (`[terminal.approvals] url_base`).
    pages: Option<Arc<safe_mcp_http::page::Pages>>,
    /// Tool calls running at once, shared by every client of an `--http` server.
    calls: Option<Arc<safe_mcp_http::limits::Calls>>,
    /// Ports exposed at once, shared likewise.
    exposed: crate::mcp::expose::Exposed,
    /// The sealing key and spent nonces of approvals on MCP 2026-07-28, shared likewise.
    mrtr: Arc<crate::mcp::mrtr::Mrtr>,
    /// Ends this connection's session scopes when the last clone of the server goes.
    _session: Arc<SessionScopes>,
    /// The downstream servers whose tools this server also serves (`[[gateway.servers]]`).
    gateway: Option<Arc<crate::gateway::Gateway>>,
}

/// How long output must pause for `until = "quiet"` to return (a prompt, a server that is
/// up and waiting).
const QUIET_READ: Duration = Duration::from_millis(500);

/// How long a waiting read that found news gives the process to end (its last words are
/// often a traceback).
const SETTLE: Duration = Duration::from_millis(150);

/// Waits until `done` or `max` has passed, looking again after 0.5 ms, then twice as long
/// each time up to 20 ms: quick answers stay quick, long waits cost little.
async fn until(max: Duration, mut done: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    let mut pause = Duration::from_micros(500);
    while !done() && start.elapsed() < max {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

impl RecordRefusal for TerminalService {
    fn record_refusal(
        &self,
        tool: &'static str,
        args: &JsonObject,
        result: &OperationResult,
        caller: &safe_mcp_core::audit::Caller,
    ) {
        let request = format!("{tool} {}", serde_json::Value::Object(args.clone()));
        TerminalService::record_refusal(self, tool, &request, result, caller);
    }
}

#[tool_router]
impl TerminalServer {
    /// The core service the tools call.
    pub(crate) fn service(&self) -> &Arc<TerminalService> {
        &self.service
    }

    /// What a gateway call of this request takes of the connection.
    fn asking(&self, context: &RequestContext<RoleServer>) -> crate::mcp::gateway::Asking<'_> {
        crate::mcp::gateway::Asking {
            service: &self.service,
            session: self.session_for(context),
            approver: self.approver(context),
            calls: self.calls.as_ref(),
        }
    }

    /// Builds the server over a core service and an executor, with the count of running
    /// calls (`--http`) and what every connection shares.
    pub fn new(
        service: Arc<TerminalService>,
        executor: Arc<dyn Executor>,
        calls: Option<Arc<safe_mcp_http::limits::Calls>>,
        shared: Shared,
    ) -> Self {
        let Shared {
            runs,
            pages,
            exposed,
            mrtr,
            gateway,
        } = shared;
        // One stdio connection per server process; 64 random bits name it (the pid, should
        // the kernel give none: handles never leave this process anyway).
        let owner =
            safe_mcp_core::random::hex(8).unwrap_or_else(|_| format!("pid-{}", std::process::id()));
        let session = Arc::new(SessionScopes {
            scopes: Arc::clone(service.scopes()),
            owner: owner.clone(),
        });
        TerminalServer {
            service,
            executor,
            _session: session,
            owner: owner.into(),
            runs,
            pages,
            calls,
            exposed,
            mrtr,
            gateway,
        }
    }

    /// What a ticket of this request is bound to besides its caller: this connection, or
    /// nothing on MCP 2026-07-28, which has no sessions (each request may reach another
    /// instance of this server).
    pub(crate) fn session_for(&self, context: &RequestContext<RoleServer>) -> String {
        if crate::mcp::approval::stateless(context) {
            String::new()
        } else {
            self.owner.to_string()
        }
    }

    /// Who owns the process sessions this request starts and may use: this connection, or
    /// on MCP 2026-07-28 (no sessions: each request gets a server instance of its own) the
    /// caller, by its `sub` (everyone alike without `[http.auth]`, as on a loopback with no
    /// callers told apart). A handle stays 128 random bits either way.
    fn owner_for(&self, context: &RequestContext<RoleServer>) -> String {
        if crate::mcp::approval::stateless(context) {
            let caller = crate::mcp::call::caller_of(context).sub.unwrap_or_default();
            format!("caller:{caller}")
        } else {
            self.owner.to_string()
        }
    }

    /// The process session behind `handle` for this request, or the refusal (recorded).
    fn session_of(
        &self,
        context: &RequestContext<RoleServer>,
        handle: &str,
        caller: &safe_mcp_core::audit::Caller,
    ) -> Result<Arc<safe_mcp_core::sessions::Session>, safe_mcp_core::OperationResult> {
        self.service
            .session(tool_of(context), handle, &self.owner_for(context), caller)
    }

    /// Who asks a person for a call of this request's client.
    pub(crate) fn approver(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> safe_mcp_core::approval::AskPerson {
        // On 2026-07-28 the client is asked in the call's own rounds (MRTR).
        let newer = crate::mcp::approval::stateless(context);
        let round = context
            .extensions
            .get::<Arc<crate::mcp::mrtr::Round>>()
            .cloned();
        let rounds = match (newer, round) {
            (true, Some(round)) => Some(crate::mcp::approval::Rounds {
                round,
                mrtr: Arc::clone(&self.mrtr),
                caller: crate::mcp::call::caller_of(context).sub.unwrap_or_default(),
                form: crate::mcp::approval::declares_form(context),
            }),
            _ => None,
        };
        safe_mcp_core::approval::AskPerson(Arc::new(crate::mcp::approval::ClientApprover {
            peer: context.peer.clone(),
            pages: self.pages.clone(),
            rounds,
        }))
    }

    /// Start a long-running command as a session (a build, test suite, dev server, watcher,
    /// or a REPL you feed input), confined like run_command, and return at once with its
    /// `handle` and `pid`. Use it instead of run_command when the command runs longer than
    /// one call should wait, never ends by itself, or needs input after it starts. Then
    /// read_process_output (what is new, redacted), write_process_input, stop_process;
    /// list_processes lists yours. Idle sessions are killed (no read or write for
    /// [terminal.sessions] idle_timeout_seconds). A dev server listens on the sandbox's own
    /// loopback (later run_command calls reach it); `expose_port` also makes it reachable
    /// from the host at the `exposed.url` the result gives. `pty` runs it on a terminal (a
    /// REPL, `git add -p`, `less`, a TUI): reads return the screen and cursor.
    #[tool(
        input_schema = input::<StartArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Start a process session", read_only_hint = false, destructive_hint = true,
                    idempotent_hint = false, open_world_hint = false)
    )]
    async fn start_process(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let asked = format!(
            "{} {}",
            process::START,
            serde_json::Value::Object(args.clone())
        );
        let (caller, args): (_, StartArgs) = arguments!(args, context, self.service.as_ref());
        // The port first: a refusal there runs nothing.
        let reserved = match args.expose_port {
            Some(port) => match crate::mcp::expose::reserve(
                &self.service,
                self.executor.as_ref(),
                &self.exposed,
                port,
                &asked,
                &caller,
            )
            .await
            {
                Ok(reserved) => Some(reserved),
                Err(result) => return to_result(result),
            },
            None => None,
        };
        let req = RunRequest {
            command: args.command.into(),
            cwd: args.cwd,
            stdin: None,
            timeout_seconds: args.timeout_seconds,
            observer: None,
            approver: Some(self.approver(&context)),
            caller: caller.clone(),
            session: self.session_for(&context),
            approval_ticket: args.approval_ticket,
            parent: None,
        };
        let (session, run) = match self
            .service
            .start_process(
                req,
                Arc::clone(&self.executor),
                &self.owner_for(&context),
                args.pty.map(Into::into),
            )
            .await
        {
            Ok(started) => started,
            Err(result) => return to_result(result),
        };
        let task = tokio::spawn(run);
        if let Ok(mut runs) = self.runs.lock() {
            runs.retain(|t| !t.is_finished());
            runs.push(task);
        }
        // Answer once the first stage runs (its attempt record is durable) or failed.
        until(Duration::from_secs(10), || {
            session.pid() != 0 || session.end().is_some()
        })
        .await;
        let mut result = self.service.started_result(&session);
        if let Some(reserved) = reserved
            && result.ok
        {
            crate::mcp::expose::serve(
                reserved,
                &session,
                &self.service,
                Arc::clone(&self.executor),
                &mut result,
            );
        }
        to_result(result)
    }

    /// Read a session's output that is new since the last read: stdout, stderr (redacted),
    /// running, exit_code, dropped_bytes, and `more` when more is ready than one read takes.
    /// On a terminal: `screen` (its rows), `cursor`, and the `scrollback` rows that scrolled
    /// off since the last read.
    /// `wait_seconds` waits: until="output" (default) for new output, "quiet" for output
    /// that then pauses (a server that is up), "exit" (up to 120 s) for the end, returning
    /// all of the run at once, its start and end kept when long. Once a session has ended
    /// and its last output was read, its handle is gone.
    #[tool(
        input_schema = input::<ReadArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Read a session's output", read_only_hint = true, destructive_hint = false,
                    idempotent_hint = false, open_world_hint = false)
    )]
    async fn read_process_output(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, ReadArgs) = arguments!(args, context, self.service.as_ref());
        let session = match self.session_of(&context, &args.handle, &caller) {
            Ok(s) => s,
            Err(r) => return to_result(r),
        };
        let wanted = args.until.unwrap_or(Until::Output);
        let most = match wanted {
            Until::Exit => process::MAX_EXIT_WAIT_SECONDS,
            Until::Output | Until::Quiet => process::MAX_WAIT_SECONDS,
        };
        let wait = Duration::from_secs(args.wait_seconds.unwrap_or(0).min(most));
        // A reader waiting is not idle.
        session.touch();
        // With a progress token, a long wait says so once a second, so that the client's
        // request timeout does not end it.
        let started = tokio::time::Instant::now();
        let ticker = Ticker::start(&context, move || {
            let waited = started.elapsed().as_secs();
            (waited > 0).then(|| {
                (
                    waited as f64,
                    Some(wait.as_secs() as f64),
                    Some(format!("waiting for the session ({waited} s)")),
                )
            })
        });
        until(wait, || match wanted {
            Until::Output => session.has_news(),
            Until::Exit => !session.running(),
            Until::Quiet => {
                !session.running() || (session.has_unread() && session.quiet_for() >= QUIET_READ)
            }
        })
        .await;
        // A read that says "running" beside the traceback that ended the process misleads:
        // news that came while waiting gets a moment for the end that often follows it, and
        // once both streams are closed the end is a moment away.
        // A screen is read again as often as wanted: a terminal's read returns at once.
        if wanted == Until::Output && !wait.is_zero() && !session.on_terminal() {
            until(SETTLE, || !session.running()).await;
        }
        if session.ending() {
            until(Duration::from_secs(2), || !session.running()).await;
        }
        ticker.stop().await;
        to_result(
            self.service
                .read_process(&session, &caller, wanted == Until::Exit, args.raw),
        )
    }

    /// Write text to a session's stdin (a REPL's next line, an answer to a prompt); set
    /// close_stdin to end its input. On a terminal, also press keys by name (Enter, Ctrl-C,
    /// Up, ...) and resize it.
    #[tool(
        input_schema = input::<WriteArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Write to a session", read_only_hint = false, destructive_hint = true,
                    idempotent_hint = false, open_world_hint = false)
    )]
    async fn write_process_input(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, WriteArgs) = arguments!(args, context, self.service.as_ref());
        let session = match self.session_of(&context, &args.handle, &caller) {
            Ok(s) => s,
            Err(r) => return to_result(r),
        };
        let typing = process::Typing {
            data: &args.data,
            keys: &args.keys,
            resize: args.resize.map(Into::into),
            close: args.close_stdin,
        };
        to_result(self.service.write_process(&session, &typing, &caller))
    }

    /// Stop a session: its whole process tree is killed; returns its last output and exit
    /// code.
    #[tool(
        input_schema = input::<HandleArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Stop a session", read_only_hint = false, destructive_hint = true,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn stop_process(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, HandleArgs) = arguments!(args, context, self.service.as_ref());
        let session = match self.session_of(&context, &args.handle, &caller) {
            Ok(s) => s,
            Err(r) => return to_result(r),
        };
        session.stop(safe_mcp_core::sessions::EndedBy::Stop);
        until(Duration::from_secs(5), || !session.running()).await;
        if !session.running() {
            self.exposed.close(&session.handle);
        }
        to_result(self.service.stopped_result(&session, &caller))
    }

    /// List this connection's sessions: handle, command, running, exit_code, started.
    #[tool(
        input_schema = input::<NoArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "List sessions", read_only_hint = true, destructive_hint = false,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn list_processes(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, NoArgs {}) = arguments!(args, context, self.service.as_ref());
        to_result(
            self.service
                .list_processes(&self.owner_for(&context), &caller),
        )
    }

    /// Run an allowlisted command inside the jail, without a shell, confined by the kernel.
    /// Returns stdout, stderr and the exit code (a non-zero exit is still ok). Call
    /// describe_policy first to see what is allowed. A command that runs longer than the
    /// call's timeout, never ends (a dev server), or needs input later: start_process.
    #[tool(
        input_schema = input::<RunArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Run a command", read_only_hint = false, destructive_hint = true,
                    idempotent_hint = false, open_world_hint = false)
    )]
    async fn run_command(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, RunArgs) = arguments!(args, context, self.service.as_ref());
        // With a progress token: bytes printed so far, and the latest line, redacted.
        let watched = context
            .meta
            .get_progress_token()
            .map(|_| Arc::new(CommandProgress::new(self.service.capture_limit())));
        let ticker = match &watched {
            Some(watched) => {
                let (watched, service) = (Arc::clone(watched), Arc::clone(&self.service));
                Ticker::start(&context, move || {
                    watched
                        .poll(service.redactor())
                        .map(|u| (u.progress, None, u.message))
                })
            }
            None => Ticker::start(&context, || None),
        };
        let req = RunRequest {
            command: args.command.into(),
            cwd: args.cwd,
            stdin: args.stdin,
            timeout_seconds: args.timeout_seconds,
            observer: watched.map(|w| Observer(w as Arc<dyn OutputObserver>)),
            approver: Some(self.approver(&context)),
            caller: caller.clone(),
            session: self.session_for(&context),
            approval_ticket: args.approval_ticket,
            parent: None,
        };
        let cancel = Box::pin(context.ct.clone().cancelled_owned());
        let result = self.service.run(req, self.executor.as_ref(), cancel).await;
        ticker.stop().await;
        to_result(result)
    }

    /// Explain what run_command would do with this command: the verdict, the rule that
    /// decided, the absolute program and argv per stage, and the confinement. Never runs it.
    #[tool(
        input_schema = input::<ExplainArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Explain a command", read_only_hint = true, destructive_hint = false,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn explain_command(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, ExplainArgs) = arguments!(args, context, self.service.as_ref());
        // A gateway tool's name and its JSON arguments: that call's verdict.
        if let (Some(gateway), CommandArg::Line(line)) = (&self.gateway, &args.command)
            && let Some(result) =
                crate::mcp::gateway::explain(self.asking(&context), gateway, line, &context)
        {
            return to_result(result);
        }
        let command = args.command.into();
        let describe = safe_mcp_core::terminal::Describe::new(&self.service);
        let mut result = describe.explain_call(
            &command,
            args.cwd.as_deref(),
            self.executor.confinement(),
            &caller,
        );
        if result.detail.get("needs_approval") == Some(&serde_json::Value::Bool(true)) {
            let who = caller.sub.clone().unwrap_or_default();
            let cwd = args.cwd.as_deref();
            let how = match describe.pre_approved(&command, cwd, &who, &self.session_for(&context))
            {
                Some(scope) => format!(
                    "approved by scope {} ({}): it runs without asking",
                    scope.id, scope.described
                ),
                None => {
                    crate::mcp::approval::how_asked(&context, &self.service, self.pages.is_some())
                }
            };
            if let Some(other) = describe.approved_elsewhere(&command, cwd, &who) {
                result.detail.insert(
                    "scope_elsewhere".into(),
                    format!(
                        "scope {} of another server covers this call; this server asks",
                        other.id
                    )
                    .into(),
                );
            }
            result.detail.insert("approved".into(), how.into());
        }
        to_result(result)
    }

    /// Describe the policy in a few lines: what can run, where commands and the file tools
    /// write, the network, the limits, the syntax that works, how to change a file, the
    /// confinement. `verbose: true` returns every detail (rules, seccomp and Landlock lists).
    #[tool(
        input_schema = input::<DescribeArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Describe the policy", read_only_hint = true, destructive_hint = false,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn describe_policy(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, DescribeArgs) = arguments!(args, context, self.service.as_ref());
        let mut result = safe_mcp_core::terminal::Describe::new(&self.service).describe_call(
            self.executor.confinement(),
            &caller,
            args.verbose,
        );
        if result.ok {
            let how =
                crate::mcp::approval::how_asked(&context, &self.service, self.pages.is_some());
            result.detail.insert(
                "approvals".into(),
                format!("a command that needs approval is approved {how}").into(),
            );
            let who = caller.sub.clone().unwrap_or_default();
            let scopes = safe_mcp_core::terminal::Describe::new(&self.service)
                .scopes_of(&who, &self.session_for(&context));
            result.detail.insert("pre_approved".into(), scopes.into());
            if let Some(gateway) = &self.gateway {
                result
                    .detail
                    .insert("gateway".into(), gateway.describe(args.verbose));
            }
        }
        to_result(result)
    }
}

/// The terminal's tools: commands and process sessions, and the file tools
/// ([`crate::mcp::file_tools`]), built once.
fn router() -> &'static rmcp::handler::server::router::tool::ToolRouter<TerminalServer> {
    static ROUTER: std::sync::OnceLock<
        rmcp::handler::server::router::tool::ToolRouter<TerminalServer>,
    > = std::sync::OnceLock::new();
    ROUTER.get_or_init(|| TerminalServer::tool_router() + TerminalServer::file_tool_router())
}

#[tool_handler(router = router())]
impl ServerHandler for TerminalServer {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let audit = self.service.as_ref();
        // MRTR (2026-07-28): the retry's answers and state reach the approver; an approval
        // it needs to ask for comes back as this call's InputRequiredResult.
        let round = Arc::new(crate::mcp::mrtr::Round {
            responses: request.input_responses.clone(),
            state: request.request_state.clone(),
            asked: std::sync::Mutex::default(),
        });
        let mut context = context;
        context.extensions.insert(Arc::clone(&round));
        let gateway = match &self.gateway {
            Some(g) if router().get(&request.name).is_none() => {
                crate::mcp::gateway::call(self.asking(&context), g, &request, &context).await
            }
            _ => None,
        };
        let response = match gateway {
            Some(response) => response,
            None => {
                call_counted(self, router(), self.calls.as_ref(), audit, request, context).await?
            }
        };
        let asked = round.asked.lock().ok().and_then(|mut a| a.take());
        Ok(match asked {
            Some(input) => rmcp::model::CallToolResponse::InputRequired(input),
            None => response,
        })
    }

    /// The terminal's tools, then the gateway's servers' (those each one's policy lets the
    /// client see, while it runs).
    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let mut tools = router().list_all();
        if let Some(gateway) = &self.gateway {
            tools.extend(gateway.tools());
        }
        Ok(rmcp::model::ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        router().get(name).cloned().or_else(|| {
            let gateway = self.gateway.as_ref()?;
            gateway.tools().into_iter().find(|t| t.name == name)
        })
    }

    async fn list_resources(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, rmcp::ErrorData> {
        let items = match &self.gateway {
            Some(g) => g.resources().await,
            None => Vec::new(),
        };
        Ok(rmcp::model::ListResourcesResult::with_all_items(items))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, rmcp::ErrorData> {
        let items = match &self.gateway {
            Some(g) => g.templates().await,
            None => Vec::new(),
        };
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(
            items,
        ))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, rmcp::ErrorData> {
        let gateway = self.gateway.as_ref().ok_or_else(no_resources)?;
        let asking = self.asking(&context);
        crate::mcp::gateway::read_resource(asking, gateway, request, &context)
            .await
            .map(Into::into)
    }

    #[allow(deprecated)] // resources/subscribe: the 2025-11-25 form
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let gateway = self.gateway.as_ref().ok_or_else(no_resources)?;
        let asking = self.asking(&context);
        crate::mcp::gateway::subscription(asking, gateway, request.uri, true, &context).await
    }

    #[allow(deprecated)] // resources/unsubscribe: the 2025-11-25 form
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let gateway = self.gateway.as_ref().ok_or_else(no_resources)?;
        let asking = self.asking(&context);
        crate::mcp::gateway::subscription(asking, gateway, request.uri, false, &context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, rmcp::ErrorData> {
        let items = match &self.gateway {
            Some(g) => g.prompts().await,
            None => Vec::new(),
        };
        Ok(rmcp::model::ListPromptsResult::with_all_items(items))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, rmcp::ErrorData> {
        let gateway = self.gateway.as_ref().ok_or_else(no_resources)?;
        let asking = self.asking(&context);
        crate::mcp::gateway::get_prompt(asking, gateway, request, &context)
            .await
            .map(Into::into)
    }

    /// A client of a gateway is told when the servers' tools change.
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if let Some(gateway) = &self.gateway {
            gateway.watch(context.peer.clone());
        }
    }

    /// `logging/setLevel` is answered (the logging capability is declared, and clients such
    /// as the conformance suite set a level first) and passed on to the gateway's servers;
    /// the server's own warnings still go to its stderr, not as log notifications. rmcp
    /// marks logging deprecated (SEP-2577, the 2026-07-28 protocol), but 2025-11-25 clients
    /// still send it.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        if let Some(gateway) = &self.gateway {
            gateway.set_level(request).await;
        }
        Ok(())
    }

    #[allow(deprecated)] // the logging capability: see `set_level`
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new({
            let mut capabilities = ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build();
            // The gateway's tools come and go with their servers; its servers' resources
            // and prompts pass through where their entries say so.
            if let Some(gateway) = &self.gateway {
                if let Some(tools) = capabilities.tools.as_mut() {
                    tools.list_changed = Some(true);
                }
                if gateway.shares() {
                    let more = ServerCapabilities::builder()
                        .enable_resources()
                        .enable_resources_subscribe()
                        .enable_prompts()
                        .build();
                    capabilities.resources = more.resources;
                    capabilities.prompts = more.prompts;
                }
            }
            capabilities
        })
        .with_server_info(Implementation::new(
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "safe-mcp terminal: runs a small allowlisted set of commands inside one directory, \
                 without a shell, confined by the kernel. Call describe_policy first; use \
                 explain_command to check a command without running it, and start_process for \
                 work that outlives one call (builds, servers, REPLs).",
        )
    }
}
