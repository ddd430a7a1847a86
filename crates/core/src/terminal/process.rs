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
use super::limits::limit_hit;
use super::request::{MAX_STDIN_BYTES, RunRequest};
use super::result::Admission;
use super::state::TerminalService;
use crate::audit::{Attempt, Caller};
use crate::envelope::{OperationResult, ResultCode};
use crate::sessions::{Capacity, CreateError, EndedBy, HandleError, ReadOut, Session, SessionEnd};
use safe_mcp_contract::{ExecPlan, Executor, Interactive, Observer};

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
    /// Starts a session for `owner`, or refuses (the refusal is recorded). The run must be
    /// spawned; the session says when it has started or failed.
    pub async fn start_process(
        self: &Arc<Self>,
        req: RunRequest,
        executor: Arc<dyn Executor>,
        owner: &str,
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
        let req = RunRequest {
            stdin: None,
            timeout_seconds: None,
            observer: None,
            ..req
        };
        let judged = begun
            .judge(req, executor.as_ref())
            .map_err(|refused| refused.record())?;
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
    /// read, its start and its end kept where it is longer than the output limit.
    pub fn read_process(&self, session: &Session, caller: &Caller, whole: bool) -> OperationResult {
        // A running session writes between calls: each read is a moment to measure again,
        // and to move aside what it made at a watched protected path.
        self.usage.call_ended();
        self.sweep_protected(&session.call);
        session.touch();
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

    /// `write_process_input`.
    pub fn write_process(
        &self,
        session: &Session,
        data: &str,
        close: bool,
        caller: &Caller,
    ) -> OperationResult {
        session.touch();
        let preview: String = self.redactor.redact(data).chars().take(60).collect();
        let args = json!({"handle": session.handle, "bytes": data.len(), "preview": preview, "close_stdin": close});
        let result = if data.len() > MAX_STDIN_BYTES {
            OperationResult::new(
                WRITE,
                ResultCode::InvalidRequest,
                format!("at most {} bytes per write", MAX_STDIN_BYTES),
            )
        } else {
            match session.write(data.as_bytes(), close) {
                Ok(n) if n == data.len() => OperationResult::new(WRITE, ResultCode::Ok, format!("wrote {n} bytes"))
                    .with_detail(json!({"written": n, "closed": close})),
                Ok(n) => OperationResult::new(
                    WRITE,
                    ResultCode::Ok,
                    format!("wrote {n} of {} bytes: the process is not reading; read its output, then write the rest", data.len()),
                )
                .with_detail(json!({"written": n, "closed": false})),
                Err(why) => OperationResult::new(WRITE, ResultCode::OperationFailed, format!("nothing written: {why}")),
            }
        };
        self.record_call(WRITE, &session.handle, &result, Some(args), caller);
        result
    }

    /// `stop_process`, once the server has stopped the session and waited for its end.
    pub fn stopped_result(&self, session: &Session, caller: &Caller) -> OperationResult {
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
    let reason = match (out.running, end) {
        (true, _) => "running".to_owned(),
        (false, Some(end)) => ended_reason(end),
        (false, None) => "ended".to_owned(),
    };
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

/// How a session ended, in words: `ended: exit code 1`, and what stopped it when it did
/// not end by itself.
fn ended_reason(end: &SessionEnd) -> String {
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
