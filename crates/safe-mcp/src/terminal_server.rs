//! MCP wiring of the terminal server: three tools, tool schemas only, no rules.
//!
//! Owns translating `tools/call` arguments into core requests and envelopes into tool
//! results. Arguments are deserialized here, not by the SDK, so that a bad argument comes back
//! as an INVALID_REQUEST envelope that matches the declared `outputSchema` like every other
//! result. It must never decide anything: every verdict comes from `safe_mcp_core`.

use std::sync::Arc;

use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{CallToolResult, Implementation, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use safe_mcp_core::progress::CommandProgress;
use safe_mcp_core::terminal::{
    CommandInput, Executor, Observer, OutputObserver, RunRequest, TerminalService,
};

use crate::progress::Ticker;
use safe_mcp_core::terminal::process;
use safe_mcp_core::{OperationResult, ResultCode};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// `command`: a POSIX-quoted string (split without a shell) or an argv array.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandArg {
    /// Quoting is tokenization only; `|`, `&&`, `||`, `;` are wired by the server.
    Line(String),
    /// One simple command, taken literally.
    Argv(Vec<String>),
}

impl From<CommandArg> for CommandInput {
    fn from(c: CommandArg) -> Self {
        match c {
            CommandArg::Line(s) => CommandInput::Line(s),
            CommandArg::Argv(v) => CommandInput::Argv(v),
        }
    }
}

/// An optional whole number, also when sent as a float with no fraction (`2.0`): JSON Schema
/// counts 2.0 as an integer, and models send it. A fraction or a negative number stays a
/// clear INVALID_REQUEST.
pub(crate) fn integral<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..=9.0e15).contains(&f) => Ok(Some(f as u64)),
        _ => Err(D::Error::custom(format!(
            "invalid value {n}: expected a whole number (such as 2)"
        ))),
    }
}

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The command: a string such as `git log --oneline | head -5`, or an argv array.
    pub command: CommandArg,
    /// Working directory, relative to the jail root or absolute inside it.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text fed to the first command's stdin (otherwise /dev/null).
    #[serde(default)]
    pub stdin: Option<String>,
    /// Lowers the policy's timeout for this call; it can never raise it.
    #[serde(default, deserialize_with = "integral")]
    pub timeout_seconds: Option<u64>,
}

/// Arguments of `explain_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    /// The command, as for run_command.
    pub command: CommandArg,
    /// Working directory, as for run_command.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// Arguments of `start_process`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The command, as for run_command (pipelines and sequences too).
    pub command: CommandArg,
    /// Working directory, as for run_command.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Lowers the session's wall-clock limit ([terminal.sessions] max_seconds).
    #[serde(default, deserialize_with = "integral")]
    pub timeout_seconds: Option<u64>,
}

/// Arguments of `read_process_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The handle start_process returned.
    pub handle: String,
    /// Wait up to this many seconds (at most 30) for new output or the end.
    #[serde(default, deserialize_with = "integral")]
    pub wait_seconds: Option<u64>,
    /// What to wait for within wait_seconds: "output" (default: the first new line),
    /// "exit" (the session's end: one read for a whole test run), or "quiet" (output that
    /// then pauses for 0.3 s: a prompt, or a dev server that is up).
    #[serde(default)]
    pub until: Option<Until>,
}

/// What `read_process_output` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Until {
    /// New output, or the end.
    Output,
    /// The end.
    Exit,
    /// Output followed by a pause, or the end.
    Quiet,
}

/// Arguments of `write_process_input`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The handle start_process returned.
    pub handle: String,
    /// Text written to the process's stdin (add "\n" to end a line).
    pub data: String,
    /// Close stdin after writing (end of input).
    #[serde(default)]
    pub close_stdin: bool,
}

/// Arguments of `stop_process`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandleArgs {
    /// The handle start_process returned.
    pub handle: String,
}

/// Arguments of `describe_policy` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

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
}

/// The authenticated caller of an HTTP request (`[http.auth]`), as the middleware left it in
/// the request's extensions; nobody over stdio.
pub(crate) fn caller_of(context: &RequestContext<RoleServer>) -> safe_mcp_core::audit::Caller {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<safe_mcp_core::audit::Caller>())
        .cloned()
        .unwrap_or_default()
}

/// The tasks that run the sessions.
pub type Runs = Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>;

pub(crate) fn input<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    // Our argument types always produce an object schema; fall back to an open object.
    let schema = schema_for_input::<T>().unwrap_or_default();
    // schemars marks integers `format: "uint64"`, which no JSON Schema validator knows and
    // the TypeScript SDK warns about for every tool; the type and minimum say enough.
    fn strip_formats(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if map
                    .get("format")
                    .and_then(|f| f.as_str())
                    .is_some_and(|f| f.starts_with("uint") || f.starts_with("int"))
                {
                    map.remove("format");
                }
                map.values_mut().for_each(strip_formats);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip_formats),
            _ => {}
        }
    }
    // An optional argument comes out as `"type": ["integer", "null"]`: legal, but a client
    // that maps schemas onto a one-type dialect (the OpenAPI subset of some model
    // providers) may drop the tool; MCP Inspector's --strict warns. The same, as `anyOf`.
    fn split_nullable(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                let nullable = map
                    .get("type")
                    .and_then(|t| t.as_array())
                    .and_then(|types| {
                        let kinds: Vec<&str> = types.iter().filter_map(|t| t.as_str()).collect();
                        match kinds.as_slice() {
                            [kind, "null"] | ["null", kind] => Some((*kind).to_owned()),
                            _ => None,
                        }
                    });
                if let Some(kind) = nullable {
                    // What describes the argument stays outside; what constrains the value
                    // goes with its type.
                    let mut branch = serde_json::Map::new();
                    branch.insert("type".into(), kind.into());
                    for (key, value) in std::mem::take(map) {
                        if matches!(key.as_str(), "description" | "title" | "default") {
                            map.insert(key, value);
                        } else if key != "type" {
                            branch.insert(key, value);
                        }
                    }
                    map.insert(
                        "anyOf".into(),
                        serde_json::json!([branch, {"type": "null"}]),
                    );
                }
                map.values_mut().for_each(split_nullable);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(split_nullable),
            _ => {}
        }
    }
    let mut value = serde_json::Value::Object((*schema).clone());
    strip_formats(&mut value);
    split_nullable(&mut value);
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => schema,
    }
}

/// The envelope's `outputSchema`, shaped for the clients that validate every result: flat
/// (no `$ref`, no `$defs`), the verdict typed (`ok`, and `code` as a plain enum), no
/// non-standard `format`, `detail` an open object. The Python SDK 1.x re-checks a schema
/// against the 2020-12 metaschema on every call, so each typed property costs its users
/// time per call (the client-speed issue measured 16 ms for the schemars shape under load);
/// the fields are documented in the tool descriptions instead.
pub(crate) fn envelope_schema() -> Arc<JsonObject> {
    let codes: Vec<&str> = ResultCode::ALL.iter().map(|c| c.as_str()).collect();
    // Draft-07, named: jsonschema checks a draft-07 schema against its metaschema about 3.5×
    // faster than a 2020-12 one (0.60 against 2.14 ms per call in the Python SDK 1.30's
    // validate, measured), and Ajv, under the TypeScript SDK, takes draft-07 by default.
    let schema = serde_json::json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "code": {"enum": codes},
        },
        "required": ["ok", "code", "reason", "detail", "action", "duration_ms"],
    });
    match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The tool result: the envelope as `structuredContent`, and the same JSON, keys in reading
/// order, as the text block most clients show the model.
pub(crate) fn to_result(envelope: OperationResult) -> CallToolResult {
    let value = envelope.to_value();
    let mut result = if envelope.ok {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    };
    result.content = vec![rmcp::model::ContentBlock::text(envelope.to_reader_text())];
    result
}

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

/// Runs a tool call through `router`, unless the caller has as many calls running as an
/// `--http` server allows (`calls`): then the answer is a POLICY_DENIED envelope, recorded
/// like any refused call.
pub(crate) async fn call_counted<S: Send + Sync + 'static>(
    server: &S,
    router: &'static rmcp::handler::server::router::tool::ToolRouter<S>,
    calls: Option<&Arc<safe_mcp_http::limits::Calls>>,
    audit: &(dyn RecordRefusal + Sync),
    request: rmcp::model::CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
    let mut _slot = None;
    // Only a known tool is counted (an unknown one is the router's error to give).
    if let (Some(calls), Some(tool)) = (calls, router.get(&request.name)) {
        let caller = caller_of(&context);
        match calls.begin(caller.sub.as_deref().unwrap_or_default()) {
            Ok(slot) => _slot = Some(slot),
            Err(reason) => {
                let name: &'static str = &tool.name;
                let result = OperationResult::new(name, ResultCode::PolicyDenied, reason);
                let args = request.arguments.clone().unwrap_or_default();
                audit.record_refusal(name, &args, &result, &caller);
                return Ok(to_result(result).into());
            }
        }
    }
    let tcc = rmcp::handler::server::tool::ToolCallContext::new(server, request, context);
    router.call(tcc).await
}

/// Records a call the wiring refused before the core saw it (its arguments do not parse).
pub(crate) trait RecordRefusal {
    fn record_refusal(
        &self,
        tool: &'static str,
        args: &JsonObject,
        result: &OperationResult,
        caller: &safe_mcp_core::audit::Caller,
    );
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

/// The arguments of `action` as `T`, or an INVALID_REQUEST envelope, recorded by `audit`.
pub(crate) fn parse_args<T: DeserializeOwned>(
    action: &'static str,
    args: JsonObject,
    audit: &dyn RecordRefusal,
    caller: &safe_mcp_core::audit::Caller,
) -> Result<T, CallToolResult> {
    serde_json::from_value(serde_json::Value::Object(args.clone())).map_err(|e| {
        let result = OperationResult::new(
            action,
            ResultCode::InvalidRequest,
            format!("invalid arguments: {e}"),
        );
        audit.record_refusal(action, &args, &result, caller);
        to_result(result)
    })
}

#[tool_router]
impl TerminalServer {
    /// The core service the tools call.
    pub(crate) fn service(&self) -> &Arc<TerminalService> {
        &self.service
    }

    /// Builds the server over a core service and an executor.
    pub fn new(
        service: Arc<TerminalService>,
        executor: Arc<dyn Executor>,
        runs: Runs,
        pages: Option<Arc<safe_mcp_http::page::Pages>>,
        calls: Option<Arc<safe_mcp_http::limits::Calls>>,
    ) -> Self {
        // One stdio connection per server process; 64 random bits name it (the pid, should
        // the kernel give none: handles never leave this process anyway).
        let owner =
            safe_mcp_core::random::hex(8).unwrap_or_else(|_| format!("pid-{}", std::process::id()));
        TerminalServer {
            service,
            executor,
            owner: owner.into(),
            runs,
            pages,
            calls,
        }
    }

    /// Who asks a person for a call of this request's client.
    pub(crate) fn approver(
        &self,
        peer: &rmcp::Peer<rmcp::RoleServer>,
    ) -> safe_mcp_core::approval::AskPerson {
        safe_mcp_core::approval::AskPerson(Arc::new(crate::approval::ClientApprover {
            peer: peer.clone(),
            pages: self.pages.clone(),
        }))
    }

    /// Start a long-running command as a session (a build, test suite, dev server, watcher,
    /// or a REPL you feed input), confined like run_command, and return at once with its
    /// `handle` and `pid`. Use it instead of run_command when the command runs longer than
    /// one call should wait, never ends by itself, or needs input after it starts. Then
    /// read_process_output (what is new, redacted), write_process_input, stop_process;
    /// list_processes lists yours. Idle sessions are killed (no read or write for
    /// [terminal.sessions] idle_timeout_seconds).
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
        let caller = caller_of(&context);
        let args: StartArgs = match parse_args(process::START, args, self.service.as_ref(), &caller)
        {
            Ok(a) => a,
            Err(r) => return r,
        };
        let req = RunRequest {
            command: args.command.into(),
            cwd: args.cwd,
            stdin: None,
            timeout_seconds: args.timeout_seconds,
            observer: None,
            approver: Some(self.approver(&context.peer)),
            caller: caller.clone(),
        };
        let (session, run) = match self
            .service
            .start_process(req, Arc::clone(&self.executor), &self.owner)
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
        // The idle check: a session nobody reads or writes is killed.
        let (watched, idle) = (Arc::clone(&session), self.service.idle_timeout());
        tokio::spawn(async move {
            while watched.running() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if watched.idle_for() >= idle {
                    watched.stop("idle");
                    break;
                }
            }
        });
        // Answer once the first stage runs (its attempt record is durable) or failed.
        until(Duration::from_secs(10), || {
            session.pid() != 0 || session.end().is_some()
        })
        .await;
        to_result(self.service.started_result(&session))
    }

    /// Read a session's output that is new since the last read: stdout, stderr (redacted),
    /// running, exit_code, dropped_bytes, and `more` when more is ready than one read takes.
    /// `wait_seconds` (at most 30) waits for new output or the end. Once a session has ended
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
        let caller = caller_of(&context);
        let args: ReadArgs = match parse_args(process::READ, args, self.service.as_ref(), &caller) {
            Ok(a) => a,
            Err(r) => return r,
        };
        let session = match self
            .service
            .session(process::READ, &args.handle, &self.owner, &caller)
        {
            Ok(s) => s,
            Err(r) => return to_result(r),
        };
        let wait = args
            .wait_seconds
            .unwrap_or(0)
            .min(process::MAX_WAIT_SECONDS);
        // A reader waiting is not idle.
        session.touch();
        let wanted = args.until.unwrap_or(Until::Output);
        until(Duration::from_secs(wait), || match wanted {
            Until::Output => session.has_news(),
            Until::Exit => !session.running(),
            Until::Quiet => {
                !session.running()
                    || (session.has_unread()
                        && session.quiet_for() >= safe_mcp_core::sessions::QUIET)
            }
        })
        .await;
        to_result(self.service.read_process(&session, &caller))
    }

    /// Write text to a session's stdin (a REPL's next line, an answer to a prompt); set
    /// close_stdin to end its input.
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
        let caller = caller_of(&context);
        let args: WriteArgs = match parse_args(process::WRITE, args, self.service.as_ref(), &caller)
        {
            Ok(a) => a,
            Err(r) => return r,
        };
        let session = match self
            .service
            .session(process::WRITE, &args.handle, &self.owner, &caller)
        {
            Ok(s) => s,
            Err(r) => return to_result(r),
        };
        to_result(
            self.service
                .write_process(&session, &args.data, args.close_stdin, &caller),
        )
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
        let caller = caller_of(&context);
        let args: HandleArgs = match parse_args(process::STOP, args, self.service.as_ref(), &caller)
        {
            Ok(a) => a,
            Err(r) => return r,
        };
        let session = match self
            .service
            .session(process::STOP, &args.handle, &self.owner, &caller)
        {
            Ok(s) => s,
            Err(r) => return to_result(r),
        };
        session.stop("stop");
        until(Duration::from_secs(5), || !session.running()).await;
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
        let caller = caller_of(&context);
        if let Err(r) = parse_args::<NoArgs>(process::LIST, args, self.service.as_ref(), &caller) {
            return r;
        }
        to_result(self.service.list_processes(&self.owner, &caller))
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
        let caller = caller_of(&context);
        let args: RunArgs = match parse_args("run_command", args, self.service.as_ref(), &caller) {
            Ok(a) => a,
            Err(r) => return r,
        };
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
            approver: Some(self.approver(&context.peer)),
            caller: caller.clone(),
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
        let caller = caller_of(&context);
        let args: ExplainArgs =
            match parse_args("explain_command", args, self.service.as_ref(), &caller) {
                Ok(a) => a,
                Err(r) => return r,
            };
        to_result(self.service.explain_call(
            &args.command.into(),
            args.cwd.as_deref(),
            self.executor.confinement(),
            &caller,
        ))
    }

    /// Describe the policy: allowed and denied commands, argument rules, limits, accepted
    /// syntax and the kernel confinement in force.
    #[tool(
        input_schema = input::<NoArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Describe the policy", read_only_hint = true, destructive_hint = false,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn describe_policy(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let caller = caller_of(&context);
        if let Err(r) =
            parse_args::<NoArgs>("describe_policy", args, self.service.as_ref(), &caller)
        {
            return r;
        }
        to_result(
            self.service
                .describe_call(self.executor.confinement(), &caller),
        )
    }
}

/// `fn router()`: the tools of `$server`, built once. rmcp's default handler calls
/// `tool_router()` for every request, which made every tool's schemas again per call (a
/// tenth of the server's CPU per `run_command`, profiled).
macro_rules! built_once_router {
    ($server:ty) => {
        fn router() -> &'static rmcp::handler::server::router::tool::ToolRouter<$server> {
            static ROUTER: std::sync::OnceLock<
                rmcp::handler::server::router::tool::ToolRouter<$server>,
            > = std::sync::OnceLock::new();
            ROUTER.get_or_init(<$server>::tool_router)
        }
    };
}
pub(crate) use built_once_router;

/// The terminal's tools: commands and process sessions, and the file tools
/// ([`crate::file_tools_server`]), built once.
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
        call_counted(self, router(), self.calls.as_ref(), audit, request, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
