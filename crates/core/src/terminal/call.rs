//! One command call's path, `run_command`'s and `start_process`'s alike, each step a type
//! that consumes itself (rustls's `State::handle` reads this way):
//!
//! [`Begun`] (a call id, the clock started) → [`Judged`] (parsed, judged, planned; the
//! attempt record drafted) → [`Approved`] (no shipping sink that refuses calls, the held
//! paths swept, the jail within its size, a person's yes where a rule asks for one) → run
//! (the attempt made durable while the executor confines the children; nothing execs
//! before it is on disk) → [`Finished`] (redacted, capped, the outcome record written).
//!
//! A call refused at any step ends as [`Refused`], whose [`Refused::record`] writes its
//! attempt and its outcome: one place for every refusal.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use safe_mcp_contract::{Cancel, ConfinementSummary, Durable, ExecPlan, Executor};
use serde_json::{Value, json};

use super::approval::{Question, confinement_line};
use super::request::{MAX_STDIN_BYTES, RunRequest};
use super::result::{Admission, RUN, RunFacts, decision_detail, syntax_refusal};
use super::state::TerminalService;
use crate::audit::{Attempt, CallId, Caller};
use crate::envelope::{OperationResult, ResultCode};
use crate::policy::{Decision, evaluate};

/// A call that has begun: its id and its clock.
pub(super) struct Begun<'s> {
    service: &'s TerminalService,
    pub(super) call: CallId,
    tool: &'static str,
    started: Instant,
}

/// A call judged and planned, not yet approved.
pub(super) struct Judged<'s> {
    begun: Begun<'s>,
    prepared: Prepared,
    asking: Asking,
}

/// A call that may run: judged, planned, and past every check before admission.
pub(super) struct Approved<'s> {
    begun: Begun<'s>,
    pub(super) prepared: Prepared,
}

/// A call that ran (or that the executor failed), with what its outcome record says.
pub(super) struct Finished<'s> {
    begun: Begun<'s>,
    result: OperationResult,
    facts: RunFacts,
    caller: Caller,
}

/// A call that ends before it runs: its result, and the attempt it leaves on the record.
pub(super) struct Refused<'s> {
    service: &'s TerminalService,
    started: Instant,
    result: OperationResult,
    attempt: Box<Attempt>,
}

/// What a call carries from judgement to its run.
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
    pub(super) route: Option<super::nested_calls::Route>,
    /// A nested call's place among its parent's running ones, held until this drops.
    pub(super) _slot: Option<std::sync::Arc<super::request::NestedSlot>>,
}

/// How a call may be approved: through the client (`approver`), or with a ticket, which is
/// bound to the MCP `session` that asked.
#[derive(Clone)]
struct Asking {
    approver: Option<crate::approval::AskPerson>,
    session: String,
    ticket: Option<String>,
    /// A nested call, which can be approved only through the client, never by a ticket
    /// (nothing could repeat it with one).
    nested: bool,
}

impl<'s> Begun<'s> {
    pub(super) fn new(service: &'s TerminalService, tool: &'static str) -> Begun<'s> {
        Begun {
            service,
            call: service.gate.begin(),
            tool,
            started: Instant::now(),
        }
    }

    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// The call refused with `result`, leaving `attempt` on the record.
    pub(super) fn refuse(&self, result: OperationResult, attempt: Attempt) -> Refused<'s> {
        Refused {
            service: self.service,
            started: self.started,
            result,
            attempt: Box::new(attempt),
        }
    }

    /// Parse, judge, draft the attempt record and build the plan.
    pub(super) fn judge(
        self,
        req: RunRequest,
        executor: &dyn Executor,
    ) -> Result<Judged<'s>, Refused<'s>> {
        let (s, call, tool) = (self.service, self.call.clone(), self.tool);
        let asking = Asking {
            approver: req.approver.clone(),
            session: req.session.clone(),
            ticket: req.approval_ticket.clone(),
            nested: req.parent.is_some(),
        };
        let mut attempt = Attempt::new(&call, tool, s.redactor.redact(&req.command.display()));
        attempt.cwd = req.cwd.clone();
        attempt.caller = req.caller.clone();
        attempt.parent = req.parent.as_ref().map(|p| p.call.clone());

        let list = match req.command.parse() {
            Ok(list) => list,
            Err(e) => {
                return Err(self.refuse(s.redacted(syntax_refusal(tool, &e)), attempt));
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
            return Err(self.refuse(result, attempt));
        }
        if req.timeout_seconds == Some(0) {
            let result = OperationResult::new(
                tool,
                ResultCode::InvalidRequest,
                "timeout_seconds must be at least 1",
            );
            return Err(self.refuse(result, attempt));
        }
        let decision = evaluate(&s.policy, &s.jail, &list, req.cwd.as_deref());
        let argv: Vec<Vec<String>> = decision
            .stages
            .iter()
            .map(|stage| s.redactor.redact_argv(&stage.argv))
            .collect();
        attempt.argv = Some(argv.clone());
        attempt.rule = Some(decision.rule.clone());
        if decision.code != ResultCode::Ok {
            let mut detail = decision_detail(&decision);
            detail.insert("would_run".into(), json!(false));
            let result = OperationResult::new(tool, decision.code, decision.reason.clone())
                .with_detail(Value::Object(detail));
            return Err(self.refuse(s.redacted(result), attempt));
        }
        let Some(approved) = decision.approve() else {
            tracing::error!(
                "internal error in call {call}: an allowed decision lacks a program or its cwd"
            );
            return Err(self.refuse(OperationResult::internal(tool), attempt));
        };
        let confinement = executor.confinement_summary().clone();
        attempt.confinement = match serde_json::to_value(&confinement) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!("internal error in call {call}: {e}");
                return Err(self.refuse(OperationResult::internal(tool), attempt));
            }
        };
        let limit = s.policy.limits.timeout_seconds;
        let timeout = req.timeout_seconds.map_or(limit, |t| t.min(limit));
        let cwd = approved.cwd.clone();
        let mut env = s.env.clone();
        // Where this call's commands reach the ruled programs: the server, with the call's
        // token.
        let route = s.nested.route(&call, &req);
        if let (Some(shims), Some(route)) = (s.nested.shims(), &route) {
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
            capture_limit: s.capture_limit(),
            output_total_limit: s.policy.limits.max_output_total_bytes,
            observer: req.observer,
            interactive: None,
            egress: s.egress.as_ref().map(|p| p.for_call(&call)),
            stdio: req.parent.as_ref().map(|p| p.stdio.clone()),
        };
        let prepared = Prepared {
            decision,
            argv,
            attempt,
            plan,
            timeout,
            cwd,
            confinement,
            route,
            _slot: req.parent.map(|p| p.slot),
        };
        Ok(Judged {
            begun: self,
            prepared,
            asking,
        })
    }
}

impl<'s> Judged<'s> {
    /// The plan the call would run.
    pub(super) fn plan(&self) -> &ExecPlan {
        &self.prepared.plan
    }

    /// Refuses the judged call with `result` (a check of its plan that judging did not make).
    pub(super) fn refuse(self, result: OperationResult) -> Refused<'s> {
        self.begun.refuse(result, self.prepared.attempt)
    }

    /// What may still refuse the call before it is admitted: shipping that refuses calls
    /// (`on_failure = "deny"` with a sink down), checked first so that no person is asked
    /// about a call that could not run; the sweep of what a process session made since the
    /// last call (one that cannot finish refuses every call until one does); the jail's
    /// size; and a person's approval.
    pub(super) async fn approve(self) -> Result<Approved<'s>, Refused<'s>> {
        let Judged {
            begun,
            mut prepared,
            asking,
        } = self;
        let (s, tool) = (begun.service, begun.tool);
        let refusal = if let Some(why) = s.gate.log().shipping_refusal() {
            Some(crate::audit::NotAdmitted::shipping(why).result(tool))
        } else {
            s.sweep_protected(&begun.call);
            if let Some(why) = s.held_refusal() {
                Some(OperationResult::new(
                    tool,
                    ResultCode::SandboxUnavailable,
                    why,
                ))
            } else {
                s.usage
                    .refusal()
                    .map(|why| OperationResult::new(tool, ResultCode::PolicyDenied, why))
            }
        };
        if let Some(result) = refusal {
            return Err(begun.refuse(result, prepared.attempt));
        }
        if let Err(result) = seek_approval(s, tool, &mut prepared, &asking).await {
            return Err(begun.refuse(result, prepared.attempt));
        }
        Ok(Approved { begun, prepared })
    }
}

/// A command that needs approval runs only once a person has said yes (DESIGN §10): `Err`
/// is the refusal; the attempt in `prepared` then says what was asked and why it was not
/// given.
async fn seek_approval(
    s: &TerminalService,
    tool: &'static str,
    prepared: &mut Prepared,
    asking: &Asking,
) -> Result<(), OperationResult> {
    if !prepared.decision.needs_approval {
        return Ok(());
    }
    let reasons: Vec<String> = prepared
        .decision
        .stages
        .iter()
        .filter_map(|s| s.approval.clone())
        .collect();
    let exact: Vec<Vec<String>> = prepared
        .plan
        .pipelines
        .iter()
        .flatten()
        .map(|stage| stage.argv.clone())
        .collect();
    let cwd = prepared.cwd.display().to_string();
    let caller = prepared.attempt.caller.clone();
    let question = Question {
        tool,
        call: prepared.attempt.call.clone(),
        shown: prepared.argv.clone(),
        command: prepared.attempt.command.clone(),
        digest: crate::tickets::digest(tool, &exact, &cwd),
        cwd,
        confinement: confinement_line(&prepared.confinement),
        reasons,
        caller: &caller,
        session: &asking.session,
        ticket: asking.ticket.as_deref(),
        approver: asking.approver.as_ref(),
        nested: asking.nested,
        nothing: "nothing ran",
        subject: "this command",
        scoped: crate::scopes::OwnedCall::of_decision(tool, &prepared.decision),
    };
    match s.approvals().ask_person(&question).await {
        Ok(record) => {
            prepared.attempt.approval = Some(record);
            Ok(())
        }
        Err(not) => {
            let (mut result, record) = not.into_result(tool, &question.reasons);
            prepared.attempt.approval = Some(record);
            result.detail.insert("would_run".into(), json!(false));
            Err(s.redacted(result))
        }
    }
}

impl<'s> Approved<'s> {
    /// The run: the attempt record made durable while the executor forks and confines the
    /// children (they wait at a gate and exec only once it resolves to true), then the
    /// result redacted and capped.
    pub(super) async fn run(
        self,
        executor: &dyn Executor,
        cancel: Cancel,
        caller: Caller,
    ) -> Finished<'s> {
        let Approved { begun, prepared } = self;
        let s = begun.service;
        // `prepared` (its route, the nested call's slot) is held to the end of the run.
        let (gate, admission) = (&s.gate, Admission::default());
        let (admitting, attempt) = (&admission, &prepared.attempt);
        let durable: Durable<'_> = Box::pin(async move { admitting.admit(gate, attempt) });
        let egress = prepared.plan.egress.clone();
        let (result, facts) = match executor.execute(prepared.plan, cancel, durable).await {
            Ok(outcome) => {
                let (mut result, facts) = s.results().finish(
                    &prepared.decision,
                    &prepared.argv,
                    outcome,
                    prepared.timeout,
                    prepared.cwd,
                    prepared.confinement,
                );
                // What the proxy refused, and why: the tools' own errors do not say.
                let refused = match &egress {
                    Some(e) => e.0.finish().await,
                    None => Vec::new(),
                };
                if !refused.is_empty() {
                    let refused: Vec<String> =
                        refused.iter().map(|r| s.redactor.redact(r)).collect();
                    result
                        .detail
                        .insert("network_refused".into(), json!(refused));
                }
                (result, facts)
            }
            Err(failure) => (
                admission.failure(RUN, &begun.call, &failure),
                RunFacts::default(),
            ),
        };
        Finished {
            begun,
            result,
            facts,
            caller,
        }
    }
}

impl Finished<'_> {
    /// The call's end: the jail's usage counted, what the call left in a held place moved
    /// aside (and said), the outcome record written.
    pub(super) fn record(self) -> OperationResult {
        let Finished {
            begun,
            mut result,
            facts,
            caller,
        } = self;
        let s = begun.service;
        s.usage.call_ended();
        let moved = s.sweep_protected(&begun.call);
        if !moved.is_empty() {
            result.detail.insert("protected_moved".into(), json!(moved));
        }
        let result = result.with_duration(begun.started.elapsed());
        s.gate.outcome(&begun.call, &caller, &result, |o| {
            o.exit_code = facts.exit_code;
            o.output = facts.output;
            o.cancelled = facts.cancelled;
            o.executed = facts.executed;
        });
        result
    }
}

impl Refused<'_> {
    /// Writes the refused call's attempt and outcome; its result, timed.
    pub(super) fn record(self) -> OperationResult {
        let result = self.result.with_duration(self.started.elapsed());
        self.service.gate.record(*self.attempt, &result);
        result
    }
}
