//! The process-session tools of the terminal server: `start_process`,
//! `read_process_output`, `write_process_input`, `stop_process`, `list_processes`.
//!
//! A session takes the same path as `run_command` (parse, judge, plan, durable attempt,
//! confinement in the executor), then lives on after the call: its output collects in the
//! session ([`crate::sessions`]), each later call names it by handle, and the outcome record
//! of the start call is written when the session ends, saying how. Every call of these tools
//! leaves its own records too: a write its size and a redacted preview. The server owns the
//! scheduling (spawning the run, long polls, idle checks); nothing here needs a runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::call::{Approved, Begun, Prepared};
use super::ended::{ended_reason, read_reason};
use super::limits::limit_hit;
use super::request::{MAX_STDIN_BYTES, RunRequest};
use super::result::Admission;
use super::state::TerminalService;
use crate::audit::{Attempt, Caller};
use crate::envelope::{OperationResult, ResultCode};
use crate::sessions::{Capacity, CreateError, EndedBy, HandleError, ReadOut, Session, SessionEnd};
use safe_mcp_contract::{ExecPlan, Executor, Interactive, InteractiveIo, Observer, TerminalSize};

/// The tool names.
pub const START: &str = "start_process";
/// Reads output.
pub const READ: &str = "read_process_output";
/// Writes stdin.
pub const WRITE: &str = "write_process_input";
/// Stops a session.
pub const STOP: &str = "stop_process";
/// Lists sessions.
pub const LIST: &str = "list_processes";

/// A session's whole run, for the server to spawn: it ends when the session does, after
/// writing the start call's outcome record.
pub type SessionRun = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The longest a read may wait for news, or for output to pause.
pub const MAX_WAIT_SECONDS: u64 = 30;
/// The longest a read may wait for a session's end (`until = "exit"`): a test suite's run.
pub const MAX_EXIT_WAIT_SECONDS: u64 = 120;

/// A place in the server's count of exposed ports, given back when dropped (the session
/// that exposes a port has ended, or never started).
#[derive(Debug)]
pub struct ExposureSlot(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for ExposureSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl TerminalService {
    /// A place for one more exposed port, at most `[terminal.sessions] max_exposed` at once
    /// for the whole server; or the refusal, recorded (`request` is the call as asked).
    pub fn reserve_exposure(
        &self,
        inner_port: u16,
        request: &str,
        caller: &Caller,
    ) -> Result<ExposureSlot, OperationResult> {
        use std::sync::atomic::Ordering;
        let max = self.policy.sessions.max_exposed;
        let refuse = |code, reason: String| {
            let result = OperationResult::new(START, code, reason);
            self.record_refusal(START, request, &result, caller);
            result
        };
        if inner_port == 0 {
            return Err(refuse(
                ResultCode::InvalidRequest,
                "expose_port must be the port the server listens on (1-65535)".into(),
            ));
        }
        if self.exposed.fetch_add(1, Ordering::AcqRel) >= max {
            self.exposed.fetch_sub(1, Ordering::AcqRel);
            return Err(refuse(
                ResultCode::PolicyDenied,
                format!(
                    "{max} ports are exposed, the most the policy allows ([terminal.sessions] max_exposed); stop a session that exposes one, or start this one without expose_port"
                ),
            ));
        }
        Ok(ExposureSlot(Arc::clone(&self.exposed)))
    }
}

impl TerminalService {
    /// Starts a session for `owner`, on a terminal of `terminal`'s size when asked, or
    /// refuses (the refusal is recorded). The run must be spawned; the session says when it
    /// has started or failed.
    pub async fn start_process(
        self: &Arc<Self>,
        req: RunRequest,
        executor: Arc<dyn Executor>,
        owner: &str,
        terminal: Option<TerminalSize>,
    ) -> Result<(Arc<Session>, SessionRun), OperationResult> {
        let begun = Begun::new(self, START);
        let (call, started) = (begun.call.clone(), begun.started());
        let caller = req.caller.clone();
        let settings = self.policy.sessions;
        let capacity = settings.capacity();
        let counted_as = caller.sub.clone().unwrap_or_default();
        let early_attempt = |req: &RunRequest| Attempt {
            caller: caller.clone(),
            ..Attempt::new(&call, START, self.redactor.redact(&req.command.display()))
        };
        if let Err(why) = self.sessions.room(&counted_as, capacity) {
            let attempt = early_attempt(&req);
            return Err(begun.refuse(full(&why, capacity), attempt).record());
        }
        let wall = req
            .timeout_seconds
            .map_or(settings.max_seconds, |t| t.min(settings.max_seconds));
        if wall == 0 {
            let attempt = early_attempt(&req);
            let result = OperationResult::new(
                START,
                ResultCode::InvalidRequest,
                "timeout_seconds must be at least 1",
            );
            return Err(begun.refuse(result, attempt).record());
        }
        if let Some(result) = terminal.and_then(|size| terminal_refusal(size, executor.as_ref())) {
            let attempt = early_attempt(&req);
            return Err(begun.refuse(result, attempt).record());
        }
        let req = RunRequest {
            stdin: None,
            timeout_seconds: None,
            observer: None,
            ..req
        };
        let judged = begun
            .judge(req, executor.as_ref())
            .map_err(|refused| refused.record())?;
        let stages: usize = judged.plan().pipelines.iter().map(Vec::len).sum();
        if terminal.is_some() && stages != 1 {
            let result = OperationResult::new(
                START,
                ResultCode::InvalidRequest,
                "a session on a terminal runs one program, as a person types it at a prompt: start the pipeline or list without pty, or run its parts one by one",
            );
            return Err(judged.refuse(result).record());
        }
        let Approved { prepared, .. } = judged.approve().await.map_err(|r| r.record())?;
        let Prepared {
            attempt,
            mut plan,
            route,
            ..
        } = prepared;
        let session = match self.sessions.create(
            owner,
            &counted_as,
            attempt.command.clone(),
            call.clone(),
            crate::sessions::Bounds {
                buffer_bytes: settings.buffer_bytes,
                idle_after: Duration::from_secs(settings.idle_timeout_seconds),
                terminal,
            },
            capacity,
        ) {
            Ok(s) => s,
            Err(why @ (CreateError::Full | CreateError::FullForCaller)) => {
                let result = full(&why, capacity).with_duration(started.elapsed());
                self.gate.record(attempt, &result);
                return Err(result);
            }
            Err(CreateError::Internal(e)) => {
                tracing::error!("internal error in call {call}: {e}");
                return Err(OperationResult::internal(START));
            }
        };
        plan.timeout = Duration::from_secs(wall);
        plan.stdin = None;
        // A session's output goes to its ring, not to a result: a dev server may log for
        // hours, so no total bound stops it.
        plan.output_total_limit = 0;
        plan.observer = Some(Observer(Arc::clone(&session) as _));
        plan.interactive = Some(Interactive(Arc::clone(&session) as _));
        if terminal.is_some() {
            // What the program may send: the emulator reads xterm's sequences. Without it
            // a pager warns and waits, and a REPL falls back to a dumb line.
            plan.env.retain(|(name, _)| name != "TERM");
            plan.env.push(("TERM".to_owned(), TERM.to_owned()));
        }
        let run = Box::pin(Arc::clone(self).run_session(
            Arc::clone(&session),
            (plan, attempt, route),
            executor,
            caller,
            started,
        ));
        Ok((session, run))
    }

    /// A session's run, to be spawned: admitted once its attempt record is durable, then
    /// executed to its end; its network records, the sweep of what it wrote, and its
    /// outcome record follow.
    async fn run_session(
        self: Arc<Self>,
        s: Arc<Session>,
        (plan, attempt, route): (ExecPlan, Attempt, Option<super::nested_calls::Route>),
        executor: Arc<dyn Executor>,
        caller: Caller,
        started: Instant,
    ) {
        let me = self;
        // The session's nested calls are routed while it runs.
        let _route = route;
        let (admit, admission) = (Arc::clone(&me), Admission::default());
        let admitting = &admission;
        let durable = Box::pin(async move { admitting.admit(&admit.gate, &attempt) });
        let egress = plan.egress.clone();
        let result = executor.execute(plan, s.stopped(), durable).await;
        // The session's network records (a relay still open ends now) come before its
        // outcome record, as a run's do.
        if let Some(e) = &egress {
            e.0.finish().await;
        }
        // What the session wrote after the last call is swept now that it has ended.
        me.sweep_protected(&s.call);
        let executed = result.as_ref().ok().and_then(|o| me.results().executed(o));
        let (end, exit_code) = match result {
            Ok(outcome) => {
                // Nobody read or wrote it for idle_timeout_seconds: the executor stopped it.
                if outcome.idle {
                    s.stop(EndedBy::Idle);
                }
                // The session's own wall clock is its EndedBy::Timeout; any other limit
                // that stopped it is named.
                let limit = (!outcome.timed_out)
                    .then(|| limit_hit(&outcome, "", &me.policy.limits))
                    .flatten();
                (
                    s.ended(outcome.exit_code, outcome.timed_out, None, limit),
                    outcome.exit_code,
                )
            }
            Err(failure) => {
                let failed = admission.failure(START, &s.call, &failure);
                (
                    s.ended(None, false, Some((failed.code, failed.reason)), None),
                    None,
                )
            }
        };
        let (code, reason) = match &end.failure {
            Some((code, reason)) => (*code, reason.clone()),
            None => (ResultCode::Ok, ended_reason(&end)),
        };
        let result = OperationResult::new(START, code, reason).with_duration(started.elapsed());
        me.gate.outcome(&s.call, &caller, &result, |o| {
            o.reason = Some(result.reason.clone());
            o.exit_code = exit_code;
            o.session_end = Some(end.how);
            o.executed = executed;
        });
    }

    /// The answer to start_process once the session has started (or failed to).
    pub fn started_result(&self, session: &Session) -> OperationResult {
        match session.end().and_then(|e| e.failure) {
            Some((code, reason)) => {
                self.sessions.collect(&session.handle);
                OperationResult::new(START, code, reason)
            }
            None if session.on_terminal() => {
                let size = session.terminal();
                OperationResult::new(
                    START,
                    ResultCode::Ok,
                    "started on a terminal; read its screen with read_process_output (until=\"quiet\" waits for it to settle), type with write_process_input (text, then keys such as Enter or Ctrl-C), end it with stop_process",
                )
                .with_detail(json!({
                    "handle": session.handle,
                    "pid": session.pid(),
                    "command": session.command,
                    "terminal": size.map(|s| json!({"rows": s.rows, "cols": s.cols})),
                }))
            }
            None => OperationResult::new(
                START,
                ResultCode::Ok,
                "started; read its output with read_process_output, write with write_process_input, end it with stop_process",
            )
            .with_detail(json!({
                "handle": session.handle,
                "pid": session.pid(),
                "command": session.command,
            })),
        }
    }

    /// The session behind `handle`, or the INVALID_REQUEST envelope (recorded).
    pub fn session(
        &self,
        tool: &'static str,
        handle: &str,
        owner: &str,
        caller: &Caller,
    ) -> Result<Arc<Session>, OperationResult> {
        self.sessions.get(handle, owner).map_err(|why| {
            let reason = match why {
                HandleError::Elsewhere(server) => format!(
                    "this handle belongs to server {server}, and this is server {}: the call reached another replica than the one that started the session (route each MCP session, or each caller, to one replica; docs/FLEET.md)",
                    self.gate.log().server_id()
                ),
                HandleError::Unknown => "unknown handle: it was never started here, belongs to another connection, or its session ended and its last output was read (list_processes shows yours)".to_owned(),
            };
            let result = OperationResult::new(tool, ResultCode::InvalidRequest, reason);
            self.record_call(tool, handle, &result, None, caller);
            result
        })
    }

    /// `read_process_output`: what is new (the server has waited for news, or not). With
    /// `whole`, a session that has ended hands out everything it still holds in this one
    /// read, its start and its end kept where it is longer than the output limit. A session
    /// on a terminal hands out its screen instead (and, with `raw`, the bytes as printed).
    pub fn read_process(
        &self,
        session: &Session,
        caller: &Caller,
        whole: bool,
        raw: bool,
    ) -> OperationResult {
        // A running session writes between calls: each read is a moment to measure again,
        // and to move aside what it made at a watched protected path.
        self.usage.call_ended();
        self.sweep_protected(&session.call);
        session.touch();
        if session.on_terminal() {
            return self.read_screen(READ, session, caller, raw);
        }
        let out = if whole && !session.running() {
            let cap = self.policy.limits.max_output_bytes;
            let mut out = self.read_and_collect(session, usize::MAX);
            out.stdout = crate::cut::head_and_tail(&out.stdout, cap).0;
            out.stderr = crate::cut::head_and_tail(&out.stderr, cap).0;
            out
        } else {
            self.read_and_collect(session, self.policy.limits.max_output_bytes)
        };
        let mut result = read_result(READ, &out, session.end().as_ref());
        if let Some((_, why)) = session.end().and_then(|e| e.failure) {
            result.reason = format!("it never started: {why}");
        }
        self.record_call(READ, &session.handle, &result, None, caller);
        result
    }

    /// `write_process_input`: text, then named keys (a terminal's), then a new size (a
    /// terminal's), then the end of input (a pipe's).
    pub fn write_process(
        &self,
        session: &Session,
        typing: &Typing<'_>,
        caller: &Caller,
    ) -> OperationResult {
        session.touch();
        let preview: String = self.redactor.redact(typing.data).chars().take(60).collect();
        let mut args = json!({"handle": session.handle, "bytes": typing.data.len(), "preview": preview, "close_stdin": typing.close});
        if !typing.keys.is_empty() {
            args["keys"] = json!(
                typing
                    .keys
                    .iter()
                    .map(|k| self.redactor.redact(k))
                    .collect::<Vec<_>>()
            );
        }
        if let Some(size) = typing.resize {
            args["resize"] = json!({"rows": size.rows, "cols": size.cols});
        }
        let result = match self.typed_bytes(session, typing) {
            Ok(bytes) => write_typed(session, &bytes, typing),
            Err(refusal) => refusal,
        };
        self.record_call(WRITE, &session.handle, &result, Some(args), caller);
        result
    }

    /// The bytes `typing` sends, or the refusal: keys and sizes are a terminal's, the end
    /// of input a pipe's.
    fn typed_bytes(
        &self,
        session: &Session,
        typing: &Typing<'_>,
    ) -> Result<Vec<u8>, OperationResult> {
        let invalid = |why: String| OperationResult::new(WRITE, ResultCode::InvalidRequest, why);
        let terminal = session.on_terminal();
        if !terminal && (!typing.keys.is_empty() || typing.resize.is_some()) {
            return Err(invalid("keys and resize are for a session on a terminal (start_process with pty); this one reads a pipe: write text, ending a line with \"\\n\"".into()));
        }
        if terminal && typing.close {
            return Err(invalid("a terminal has no end of input to close: send the key Ctrl-D (most programs read it as the end), or stop_process".into()));
        }
        if typing.data.is_empty()
            && typing.keys.is_empty()
            && typing.resize.is_none()
            && !typing.close
        {
            return Err(invalid(
                "nothing to write: give data, keys, resize or close_stdin".into(),
            ));
        }
        let bytes = session.typed(typing.data, typing.keys).map_err(invalid)?;
        if bytes.len() > MAX_STDIN_BYTES {
            return Err(invalid(format!(
                "at most {MAX_STDIN_BYTES} bytes per write"
            )));
        }
        if let Some(size) = typing.resize
            && let Some(refusal) = size_refusal(WRITE, size)
        {
            return Err(refusal);
        }
        Ok(bytes)
    }

    /// A read of a session on a terminal: its screen, the cursor, what scrolled off since
    /// the last read (the newest of it, within the output limit), and, with `raw`, the
    /// bytes as printed. The record says how much was handed out, not what.
    fn read_screen(
        &self,
        tool: &'static str,
        session: &Session,
        caller: &Caller,
        raw: bool,
    ) -> OperationResult {
        let limit = self.policy.limits.max_output_bytes;
        let Some(out) = session.read_screen(&self.redactor, raw.then_some(limit)) else {
            return OperationResult::internal(tool);
        };
        if !out.running && !session.has_unread() {
            self.sessions.collect(&session.handle);
        }
        let result = super::screen::screen_result(tool, out, session.end().as_ref(), limit);
        let args = super::screen::read_record(&session.handle, &result);
        self.record_call(tool, &session.handle, &result, Some(args), caller);
        result
    }

    /// `stop_process`, once the server has stopped the session and waited for its end.
    pub fn stopped_result(&self, session: &Session, caller: &Caller) -> OperationResult {
        if session.on_terminal() && !session.running() {
            return self.read_screen(STOP, session, caller, false);
        }
        let out = self.read_and_collect(session, self.policy.limits.max_output_bytes);
        let mut result = read_result(STOP, &out, session.end().as_ref());
        if out.running {
            result = OperationResult::new(
                STOP,
                ResultCode::OperationFailed,
                "the session did not end within 5 seconds of its kill; it is still listed",
            );
        }
        self.record_call(STOP, &session.handle, &result, None, caller);
        result
    }

    /// `list_processes`.
    pub fn list_processes(&self, owner: &str, caller: &Caller) -> OperationResult {
        let list: Vec<serde_json::Value> = self
            .sessions
            .of(owner)
            .iter()
            .map(|s| {
                let end = s.end();
                json!({
                    "handle": s.handle,
                    "command": s.command,
                    "running": end.is_none(),
                    "exit_code": end.as_ref().and_then(|e| e.exit_code),
                    "ended": end.map(|e| e.how),
                    "started": s.started,
                })
            })
            .collect();
        let result =
            OperationResult::new(LIST, ResultCode::Ok, format!("{} session(s)", list.len()))
                .with_detail(json!({"processes": list}));
        self.record_call(LIST, "", &result, None, caller);
        result
    }

    /// Stops every running session, saying why (the server is exiting).
    pub fn stop_all(&self, why: EndedBy) -> Vec<Arc<Session>> {
        let running = self.sessions.all_running();
        for s in &running {
            s.stop(why);
        }
        running
    }

    /// Records a session call that acted on nothing durable (its attempt and outcome).
    /// One read of `session`; once it has ended and been read to the end, its handle is
    /// spent (output it still holds keeps the handle, for the next read).
    fn read_and_collect(&self, session: &Session, limit: usize) -> ReadOut {
        let out = session.read(&self.redactor, limit);
        if !out.running && !session.has_unread() {
            self.sessions.collect(&session.handle);
        }
        out
    }

    fn record_call(
        &self,
        tool: &'static str,
        handle: &str,
        result: &OperationResult,
        args: Option<serde_json::Value>,
        caller: &Caller,
    ) {
        let mut attempt = self.attempt_for(tool, &format!("{tool} {handle}"), caller);
        attempt.args = args.or_else(|| (!handle.is_empty()).then(|| json!({"handle": handle})));
        self.gate.record(attempt, result);
    }
}

/// What one `write_process_input` sends.
#[derive(Debug, Clone, Copy)]
pub struct Typing<'a> {
    /// Text, as typed.
    pub data: &'a str,
    /// Named keys pressed after the text (a terminal's: [`crate::sessions::KEY_NAMES`]).
    pub keys: &'a [String],
    /// A new size for the terminal, after the keys.
    pub resize: Option<TerminalSize>,
    /// Close a pipe's stdin after writing.
    pub close: bool,
}

/// Writes `bytes` and applies the rest of `typing`; the envelope says what was done.
fn write_typed(session: &Session, bytes: &[u8], typing: &Typing<'_>) -> OperationResult {
    let failed = |why: String| {
        OperationResult::new(
            WRITE,
            ResultCode::OperationFailed,
            format!("nothing written: {why}"),
        )
    };
    let n = if bytes.is_empty() && !typing.close {
        0
    } else {
        match session.write(bytes, typing.close) {
            Ok(n) => n,
            Err(why) => return failed(why),
        }
    };
    if n < bytes.len() {
        return OperationResult::new(
            WRITE,
            ResultCode::Ok,
            format!("wrote {n} of {} bytes: the process is not reading; read its output, then write the rest", bytes.len()),
        )
        .with_detail(json!({"written": n, "closed": false}));
    }
    let mut detail = json!({"written": n, "closed": typing.close && !session.on_terminal()});
    if let Some(size) = typing.resize {
        if let Err(why) = session.resize(size) {
            return OperationResult::new(
                WRITE,
                ResultCode::OperationFailed,
                format!("wrote {n} bytes, but not resized: {why}"),
            );
        }
        detail["terminal"] = json!({"rows": size.rows, "cols": size.cols});
    }
    let reason = match typing.resize {
        Some(size) => format!(
            "wrote {n} bytes; the terminal is {} by {} now",
            size.rows, size.cols
        ),
        None => format!("wrote {n} bytes"),
    };
    OperationResult::new(WRITE, ResultCode::Ok, reason).with_detail(detail)
}

/// `TERM` in a session on a terminal.
pub const TERM: &str = "xterm-256color";

/// The smallest and largest terminal a session may ask for: (rows, columns).
pub const TERMINAL_MIN: (u16, u16) = (2, 10);
/// See [`TERMINAL_MIN`].
pub const TERMINAL_MAX: (u16, u16) = (500, 1000);

/// Why a terminal cannot be `size`, if it cannot.
fn size_refusal(tool: &'static str, size: TerminalSize) -> Option<OperationResult> {
    let ((min_rows, min_cols), (max_rows, max_cols)) = (TERMINAL_MIN, TERMINAL_MAX);
    let fits =
        (min_rows..=max_rows).contains(&size.rows) && (min_cols..=max_cols).contains(&size.cols);
    (!fits).then(|| {
        OperationResult::new(
            tool,
            ResultCode::InvalidRequest,
            format!(
                "the terminal would be {} rows by {} columns; a terminal has {min_rows} to {max_rows} rows and {min_cols} to {max_cols} columns (24 by 80 is the usual)",
                size.rows, size.cols
            ),
        )
    })
}

/// Why a session on a terminal of `size` cannot start here, if it cannot.
fn terminal_refusal(size: TerminalSize, executor: &dyn Executor) -> Option<OperationResult> {
    if let Some(refusal) = size_refusal(START, size) {
        return Some(refusal);
    }
    if !executor.confinement().view.terminals {
        return Some(OperationResult::new(
            START,
            ResultCode::SandboxUnavailable,
            format!(
                "a session on a terminal needs a devpts of the command's own, which this server's view cannot give ({}); start it without pty",
                executor.confinement().view.detail
            ),
        ));
    }
    None
}

/// The refusal when `max` sessions are running.
fn full(why: &CreateError, capacity: Capacity) -> OperationResult {
    let reason = if *why == CreateError::FullForCaller {
        format!(
            "you have {} sessions running, the most the policy allows one caller ([terminal.sessions] max_sessions_per_caller); stop one with stop_process",
            capacity.per_caller
        )
    } else {
        format!(
            "{} sessions are running, the most the policy allows ([terminal.sessions] max_sessions); stop one with stop_process",
            capacity.total
        )
    };
    OperationResult::new(START, ResultCode::PolicyDenied, reason)
}

/// The envelope of a read (or of a stop, with its final output).
fn read_result(tool: &'static str, out: &ReadOut, end: Option<&SessionEnd>) -> OperationResult {
    let reason = read_reason(out.running, end);
    let mut detail = json!({
        "stdout": out.stdout,
        "stderr": out.stderr,
        "running": out.running,
        "exit_code": out.exit_code,
        "dropped_bytes": out.dropped_bytes,
        "ended": out.ended,
        "more": out.more,
    });
    if let Some((key, _)) = end.and_then(|e| e.limit.as_ref()) {
        detail["limit"] = json!(key);
    }
    OperationResult::new(tool, ResultCode::Ok, reason).with_detail(detail)
}
