//! The admission gate: the one place that decides whether an acting call may proceed given
//! the state of the audit trail, and that names every call.
//!
//! Owns the call ids (passed on as values, never kept in thread state) and the fail-mode
//! decision: under `audit_fail_mode = "closed"` a call whose attempt record cannot be made
//! durable does not act; under `"open"` it acts and the server warns. A refusal is recorded
//! too, attempt and outcome, and so is every call of a read-only tool, so every call of
//! every tool leaves the same two records.
//! It must never let a caller act before [`Gate::admit`] has returned `Ok`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{Map, Value};

use super::record::{Attempt, CallId, Caller, Outcome};
use super::writer::{AuditError, AuditLog};
use crate::config::AuditFailMode;
use crate::envelope::{OperationResult, ResultCode};

/// Which server names the calls: the two share a trail's format, not their id space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// Call ids `<pid>-<n>`.
    Terminal,
    /// Call ids `<pid>-f<n>`.
    Files,
}

/// The trail refused the attempt record under fail-closed, or shipping refuses calls
/// (`on_failure = "deny"` with a sink down): nothing may act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAdmitted(Option<String>);

impl NotAdmitted {
    /// The record could not be written.
    pub const UNWRITTEN: NotAdmitted = NotAdmitted(None);

    /// Shipping refuses calls, for this reason.
    pub fn shipping(why: String) -> NotAdmitted {
        NotAdmitted(Some(why))
    }

    /// The envelope a client gets: AUDIT_UNAVAILABLE, and why nothing happened.
    pub fn result(&self, tool: &str) -> OperationResult {
        if let Some(why) = &self.0 {
            return OperationResult::new(
                tool,
                ResultCode::AuditUnavailable,
                format!("{why}, so nothing acts until it is back"),
            );
        }
        let what = if tool == "run_command" {
            "nothing ran"
        } else {
            "nothing changed"
        };
        OperationResult::new(
            tool,
            ResultCode::AuditUnavailable,
            format!(
                "the audit record could not be written and audit_fail_mode is \"closed\", so {what}"
            ),
        )
    }
}

/// The audit trail of one server, with the admission decision in front of it.
#[derive(Debug)]
pub struct Gate {
    log: AuditLog,
    server: Server,
    calls: AtomicU64,
}

impl Gate {
    /// A gate in front of `log`.
    pub fn new(log: AuditLog, server: Server) -> Gate {
        Gate {
            log,
            server,
            calls: AtomicU64::new(0),
        }
    }

    /// The trail (for startup checks).
    pub fn log(&self) -> &AuditLog {
        &self.log
    }

    /// A fresh call id.
    pub fn begin(&self) -> CallId {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let pid = std::process::id();
        CallId::new(match self.server {
            Server::Terminal => format!("{pid}-{n}"),
            Server::Files => format!("{pid}-f{n}"),
        })
    }

    /// Writes `attempt` and waits until it is durable. `Ok` means the call may act: the
    /// record is on disk, or fail-open lets it act without one (and says so on stderr).
    pub fn admit(&self, attempt: &Attempt) -> Result<(), NotAdmitted> {
        // `[audit.ship] on_failure = "deny"` with a sink down: the record would not reach
        // the receiver, so nothing acts (whatever audit_fail_mode says).
        if let Some(why) = self.log.shipping_refusal() {
            tracing::error!(
                "audit unavailable, refusing call {} ({}): {why}",
                attempt.call,
                attempt.tool
            );
            let refused = NotAdmitted::shipping(why);
            let _ = self.append(
                "attempt",
                &attempt.clone().refused(&refused.result(attempt.tool)),
                false,
            );
            return Err(refused);
        }
        match self.append_seq("attempt", attempt, true) {
            // Deny mode: the receiver has it before the command acts.
            Ok(seq) => self.log.shipping_confirmed(seq).map_err(|why| {
                tracing::error!(
                    "audit unavailable, refusing call {} ({}): {why}",
                    attempt.call,
                    attempt.tool
                );
                NotAdmitted::shipping(why)
            }),
            Err(e) => match self.log.fail_mode() {
                AuditFailMode::Closed => {
                    tracing::error!(
                        "audit unavailable, refusing call {} ({}): {e}",
                        attempt.call,
                        attempt.tool
                    );
                    Err(NotAdmitted::UNWRITTEN)
                }
                AuditFailMode::Open => {
                    tracing::warn!(
                        "audit_fail_mode = \"open\": call {} ({}) proceeds without its attempt record: {e}",
                        attempt.call,
                        attempt.tool
                    );
                    Ok(())
                }
            },
        }
    }

    /// Records a call that did not act: refused before it could, or a read-only tool. The
    /// attempt carries the result's code and reason, then comes its outcome. Nothing acts,
    /// so nothing waits for the disk; a failure is reported on stderr.
    pub fn record(&self, attempt: Attempt, result: &OperationResult) {
        let (call, caller) = (attempt.call.clone(), attempt.caller.clone());
        let attempt = attempt.refused(result);
        if let Err(e) = self.append("attempt", &attempt, false) {
            tracing::warn!("call {} was not audited: {e}", attempt.call);
        }
        self.outcome(&call, &caller, result, |_| {});
    }

    /// The one outcome step: the outcome record of `call` for `caller` as `result` ended
    /// it, with what `fill` adds (an exit code, counts, a session's end, a file written).
    pub fn outcome(
        &self,
        call: &CallId,
        caller: &Caller,
        result: &OperationResult,
        fill: impl FnOnce(&mut Outcome),
    ) {
        let mut outcome = Outcome::of(call, result);
        outcome.caller = caller.clone();
        fill(&mut outcome);
        self.finish(&outcome);
    }

    /// Records how an admitted call ended.
    pub fn finish(&self, outcome: &Outcome) {
        if let Err(e) = self.append("outcome", outcome, false) {
            tracing::warn!(
                "the outcome record of call {} was not written: {e}",
                outcome.call
            );
        }
    }

    /// Appends one of the record types of [`super::record`] as a record of `kind`
    /// (`attempt` and `outcome` through the calls above; `network`, `approval` directly),
    /// durable at once when `durable`.
    pub fn append(
        &self,
        kind: &str,
        record: &impl Serialize,
        durable: bool,
    ) -> Result<(), AuditError> {
        self.append_seq(kind, record, durable).map(|_| ())
    }

    /// [`Gate::append`], returning the record's seq.
    fn append_seq(
        &self,
        kind: &str,
        record: &impl Serialize,
        durable: bool,
    ) -> Result<u64, AuditError> {
        // The record types serialize to objects; anything else is refused, never written.
        let fields: Map<String, Value> = match serde_json::to_value(record) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(self.log.error("a record is not a JSON object")),
            Err(e) => return Err(self.log.error(format!("cannot encode a record: {e}"))),
        };
        self.log.append(kind, fields, durable)
    }
}
