//! `run_command` from start to end: prepare, make the attempt durable while the executor
//! confines the children, run, finish; the outcome record last.

use std::time::Instant;

use safe_mcp_contract::{Cancel, Durable, Executor};
use serde_json::json;

use super::prepare::{Early, Prepared};
use super::result::{Admission, RUN, RunFacts};
use super::service::{RunRequest, TerminalService};
use crate::audit::{Attempt, CallId, Outcome};
use crate::envelope::OperationResult;

impl TerminalService {
    /// Runs a request end to end. Every path out of here is an envelope, and every call
    /// leaves an attempt and an outcome record, refusals included.
    pub async fn run(
        &self,
        req: RunRequest,
        executor: &dyn Executor,
        cancel: Cancel,
    ) -> OperationResult {
        let started = Instant::now();
        let call = self.gate.begin();
        let caller = req.caller.clone();
        match self.run_inner(&call, req, executor, cancel).await {
            Err((result, attempt)) => {
                let result = result.with_duration(started.elapsed());
                self.gate.record(attempt, &result);
                result
            }
            Ok((mut result, facts)) => {
                self.usage.call_ended();
                let moved = self.sweep_protected(&call);
                if !moved.is_empty() {
                    result.detail.insert("protected_moved".into(), json!(moved));
                }
                let result = result.with_duration(started.elapsed());
                let mut outcome = Outcome::of(&call, &result);
                outcome.caller = caller;
                outcome.exit_code = facts.exit_code;
                outcome.output = facts.output;
                outcome.cancelled = facts.cancelled;
                outcome.executed = facts.executed;
                self.gate.finish(&outcome);
                result
            }
        }
    }

    /// `Err` is a refusal before admission, with the attempt to record; `Ok` is the result
    /// of an admitted call (it may still have failed to run).
    pub(super) async fn run_inner(
        &self,
        call: &CallId,
        req: RunRequest,
        executor: &dyn Executor,
        cancel: Cancel,
    ) -> Result<(OperationResult, RunFacts), (OperationResult, Attempt)> {
        let prepared = match self.prepare_admissible(call, RUN, req, executor).await {
            Ok(p) => p,
            Err(Early::Refused(result, attempt)) => return Err((result, *attempt)),
            Err(Early::Internal(result)) => return Ok((result, RunFacts::default())),
        };
        let Prepared {
            decision,
            argv,
            attempt,
            plan,
            timeout,
            cwd,
            confinement,
            route: _route,
            slot: _slot,
        } = prepared;
        // The record is made durable while the executor forks and confines the children;
        // they wait at a gate and exec only once this resolves to true.
        let (gate, admission) = (&self.gate, Admission::default());
        let admitting = &admission;
        let durable: Durable<'_> = Box::pin(async move { admitting.admit(gate, &attempt) });
        let egress = plan.egress.clone();
        let result = match executor.execute(plan, cancel, durable).await {
            Ok(outcome) => {
                let (mut result, facts) =
                    self.finish(&decision, &argv, outcome, timeout, cwd, confinement);
                // What the proxy refused, and why: the tools' own errors do not say.
                let refused = match &egress {
                    Some(e) => e.0.finish().await,
                    None => Vec::new(),
                };
                if !refused.is_empty() {
                    let refused: Vec<String> =
                        refused.iter().map(|r| self.redactor.redact(r)).collect();
                    result
                        .detail
                        .insert("network_refused".into(), json!(refused));
                }
                return Ok((result, facts));
            }
            Err(failure) => admission.failure(RUN, call, &failure),
        };
        Ok((result, RunFacts::default()))
    }
}
