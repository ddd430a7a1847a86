//! Everything before a call runs, shared by `run_command` and `start_process`: parse,
//! judge, the attempt record and the plan; then what may still refuse it before admission
//! (shipping that refuses calls, the jail's size, approval).

use std::path::PathBuf;
use std::time::Duration;

use safe_mcp_contract::{ConfinementSummary, ExecPlan, Executor};
use serde_json::{Value, json};

use super::result::{decision_detail, syntax_refusal};
use super::service::{MAX_STDIN_BYTES, RunRequest, TerminalService};
use crate::audit::{Attempt, CallId};
use crate::envelope::{OperationResult, ResultCode};
use crate::policy::{Decision, evaluate};

/// A call judged and planned, not yet run.
pub(super) struct Prepared {
    pub(super) decision: Decision,
    pub(super) argv: Vec<Vec<String>>,
    pub(super) attempt: Attempt,
    pub(super) plan: ExecPlan,
    pub(super) timeout: u64,
    pub(super) cwd: PathBuf,
    /// The confinement the executor applies, typed (the attempt record has it as JSON).
    pub(super) confinement: ConfinementSummary,
    /// The call's token for nested calls, registered until this drops.
    pub(super) route: Option<super::service::Route>,
    /// A nested call's place among its parent's running ones, held until this drops.
    pub(super) slot: Option<std::sync::Arc<super::service::NestedSlot>>,
}

/// How a call may be approved: through the client (`approver`), or with a ticket, which is
/// bound to the MCP `session` that asked.
#[derive(Clone)]
pub(super) struct Asking {
    pub(super) approver: Option<crate::approval::AskPerson>,
    pub(super) session: String,
    pub(super) ticket: Option<String>,
    /// A nested call, which can be approved only through the client, never by a ticket
    /// (nothing could repeat it with one).
    pub(super) nested: bool,
}

/// How a call ends before it runs.
pub(super) enum Early {
    /// Refused; the attempt is still to be recorded.
    Refused(OperationResult, Box<Attempt>),
    /// A bug; already reported on stderr.
    Internal(OperationResult),
}

impl TerminalService {
    /// Everything before execution, shared by run_command and start_process: parse, judge,
    /// build the attempt record and the plan. `Err` is a refusal (with its attempt) or an
    /// internal error.
    pub(super) fn prepare(
        &self,
        call: &CallId,
        tool: &'static str,
        req: RunRequest,
        executor: &dyn Executor,
    ) -> Result<Prepared, Early> {
        let mut attempt = Attempt::new(call, tool, self.redactor.redact(&req.command.display()));
        attempt.cwd = req.cwd.clone();
        attempt.caller = req.caller.clone();
        attempt.parent = req.parent.as_ref().map(|p| p.call.clone());

        let list = match req.command.parse() {
            Ok(list) => list,
            Err(e) => {
                return Err(Early::Refused(
                    self.redacted(syntax_refusal(tool, &e)),
                    Box::new(attempt),
                ));
            }
        };
        if req
            .stdin
            .as_ref()
            .is_some_and(|s| s.len() > MAX_STDIN_BYTES)
        {
            let result = OperationResult::new(
                tool,
                ResultCode::InvalidRequest,
                format!(
                    "stdin is too long (at most {MAX_STDIN_BYTES} bytes); write the data to a file in the jail and pass its name"
                ),
            );
            return Err(Early::Refused(result, Box::new(attempt)));
        }
        if req.timeout_seconds == Some(0) {
            let result = OperationResult::new(
                tool,
                ResultCode::InvalidRequest,
                "timeout_seconds must be at least 1",
            );
            return Err(Early::Refused(result, Box::new(attempt)));
        }
        let decision = evaluate(&self.policy, &self.jail, &list, req.cwd.as_deref());
        let argv: Vec<Vec<String>> = decision
            .stages
            .iter()
            .map(|s| self.redactor.redact_argv(&s.argv))
            .collect();
        attempt.argv = Some(argv.clone());
        attempt.rule = Some(decision.rule.clone());
        if decision.code != ResultCode::Ok {
            let mut detail = decision_detail(&decision);
            detail.insert("would_run".into(), json!(false));
            let result = OperationResult::new(tool, decision.code, decision.reason.clone())
                .with_detail(Value::Object(detail));
            return Err(Early::Refused(self.redacted(result), Box::new(attempt)));
        }
        let Some(approved) = decision.approve() else {
            eprintln!(
                "safe-mcp: internal error in call {call}: an allowed decision lacks a program or its cwd"
            );
            return Err(Early::Internal(OperationResult::internal(tool)));
        };
        let confinement = executor.confinement_summary().clone();
        attempt.confinement = match serde_json::to_value(&confinement) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("safe-mcp: internal error in call {call}: {e}");
                return Err(Early::Internal(OperationResult::internal(tool)));
            }
        };
        let limit = self.policy.limits.timeout_seconds;
        let timeout = req.timeout_seconds.map_or(limit, |t| t.min(limit));
        let cwd = approved.cwd.clone();
        let mut env = self.env.clone();
        // Where this call's commands reach the ruled programs: the server, with the call's
        // token.
        let route = self.nested_route(call, &req);
        if let (Some(shims), Some(route)) = (&self.nested, &route) {
            let value = format!("{}@{}", route.token, shims.socket().display());
            env.push((crate::nested::NESTED_VARIABLE.to_owned(), value));
        }
        let plan = ExecPlan {
            pipelines: approved.pipelines,
            joins: approved.joins,
            cwd: approved.cwd,
            env,
            stdin: req.stdin.map(String::into_bytes),
            timeout: Duration::from_secs(timeout),
            capture_limit: self.capture_limit(),
            output_total_limit: self.policy.limits.max_output_total_bytes,
            observer: req.observer,
            interactive: None,
            egress: self.egress.as_ref().map(|p| p.for_call(call)),
            stdio: req.parent.as_ref().map(|p| p.stdio.clone()),
        };
        Ok(Prepared {
            decision,
            argv,
            attempt,
            plan,
            timeout,
            cwd,
            confinement,
            route,
            slot: req.parent.map(|p| p.slot),
        })
    }

    /// [`Self::prepare`], then what may still refuse the call before it is admitted:
    /// shipping that refuses calls (`on_failure = "deny"` with a sink down), checked first
    /// so that no person is asked about a call that could not run, and approval. Shared by
    /// run_command and start_process.
    pub(super) async fn prepare_admissible(
        &self,
        call: &CallId,
        tool: &'static str,
        req: RunRequest,
        executor: &dyn Executor,
    ) -> Result<Prepared, Early> {
        let asking = Asking {
            approver: req.approver.clone(),
            session: req.session.clone(),
            ticket: req.approval_ticket.clone(),
            nested: req.parent.is_some(),
        };
        let mut prepared = self.prepare(call, tool, req, executor)?;
        if let Some(why) = self.gate.log().shipping_refusal() {
            let result = crate::audit::NotAdmitted::shipping(why).result(tool);
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        // What a process session made since the last call goes before this one runs; a
        // sweep that cannot finish refuses every call until one does.
        self.sweep_protected(call);
        if let Some(why) = self.held_refusal() {
            let result = OperationResult::new(tool, ResultCode::SandboxUnavailable, why);
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        if let Some(why) = self.usage.refusal() {
            let result = OperationResult::new(tool, ResultCode::PolicyDenied, why);
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        if let Err(result) = self.seek_approval(tool, &mut prepared, &asking).await {
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        Ok(prepared)
    }
}
