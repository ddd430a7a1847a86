//! A command that needs approval runs only once a person has said yes (DESIGN §10): through
//! the client (a form, or the server's page), or with a ticket a person approved
//! ([`crate::tickets`]) where the client cannot be asked.

use safe_mcp_contract::ConfinementSummary;
use serde_json::{Map, Value, json};

use super::prepare::{Asking, Prepared};
use super::service::TerminalService;
use crate::envelope::{OperationResult, ResultCode};

impl TerminalService {
    /// A command that needs approval runs only once a person has said yes (DESIGN §10):
    /// `Err` is the refusal; the attempt in `prepared` then says what was asked and why it
    /// was not given.
    pub(super) async fn seek_approval(
        &self,
        tool: &'static str,
        prepared: &mut Prepared,
        asking: &Asking,
    ) -> Result<(), OperationResult> {
        use crate::approval::{ApprovalMode, ApprovalRequest};
        if !prepared.decision.needs_approval {
            return Ok(());
        }
        let reasons: Vec<String> = prepared
            .decision
            .stages
            .iter()
            .filter_map(|s| s.approval.clone())
            .collect();
        let settings = &self.policy.approvals;
        let refuse_as = |code: ResultCode, reason: String, ticket: Option<Value>| {
            let mut detail = Map::new();
            detail.insert("needs_approval".into(), json!(true));
            detail.insert("approval_reasons".into(), json!(reasons));
            detail.insert("would_run".into(), json!(false));
            if let Some(ticket) = ticket {
                detail.insert("approval".into(), ticket);
            }
            self.redacted(
                OperationResult::new(tool, code, reason).with_detail(Value::Object(detail)),
            )
        };
        let refuse_with = |reason, ticket| refuse_as(ResultCode::PolicyDenied, reason, ticket);
        let refuse = |reason: String| refuse_with(reason, None);
        let exact: Vec<Vec<String>> = prepared
            .plan
            .pipelines
            .iter()
            .flatten()
            .map(|stage| stage.argv.clone())
            .collect();
        let cwd = prepared.cwd.display().to_string();
        let digest = crate::tickets::digest(tool, &exact, &cwd);
        let caller = prepared.attempt.caller.sub.clone().unwrap_or_default();
        // A ticket a person approved for this exact call: spent here, once.
        if let Some(id) = &asking.ticket {
            return match self.redeem_ticket(id, &caller, &asking.session, &digest, &reasons) {
                Ok(record) => {
                    prepared.attempt.approval = Some(record);
                    Ok(())
                }
                Err((record, why)) => {
                    prepared.attempt.approval = Some(record);
                    Err(refuse_as(why.code(), format!("{why}; nothing ran"), None))
                }
            };
        }
        let ticket = |why: &str, prepared: &mut Prepared| {
            if asking.nested {
                prepared.attempt.approval = Some(not_asked_json(&reasons, "nested-no-ticket"));
                return Err(refuse(format!(
                    "{}; a command started it, and {why}: a ticket could not be given to it. Run it as a call of its own (run_command), where it can be approved",
                    reasons.join("; ")
                )));
            }
            let request = crate::tickets::TicketRequest {
                tool,
                shown: prepared.argv.clone(),
                command: prepared.attempt.command.clone(),
                cwd: cwd.clone(),
                reasons: reasons.clone(),
                digest,
                caller: caller.clone(),
                session: asking.session.clone(),
            };
            let given = self.ticket_refusal(request, why, "nothing ran");
            prepared.attempt.approval = Some(given.record);
            Err(refuse_with(given.reason, given.detail))
        };
        let not_asked = |decision: &str| not_asked_json(&reasons, decision);
        if settings.mode == ApprovalMode::Deny {
            prepared.attempt.approval = Some(not_asked("denied-by-mode"));
            return Err(refuse(format!(
                "{}; [terminal.approvals] mode = \"deny\" refuses it without asking. Do the task without it, or ask the operator",
                reasons.join("; ")
            )));
        }
        if settings.mode == ApprovalMode::Ticket {
            return ticket(
                "[terminal.approvals] mode = \"ticket\" approves through tickets only",
                prepared,
            );
        }
        let Some(approver) = &asking.approver else {
            if settings.mode == ApprovalMode::Auto {
                return ticket("this transport cannot ask a person", prepared);
            }
            prepared.attempt.approval = Some(not_asked("no-transport"));
            return Err(refuse(format!(
                "{}; this server cannot ask a person here, so nothing ran. The operator can set [terminal.approvals] url_base for an approval page",
                reasons.join("; ")
            )));
        };
        let request = ApprovalRequest {
            call: prepared.attempt.call.to_string(),
            tool,
            stages: prepared.argv.clone(),
            command: prepared.attempt.command.clone(),
            cwd: prepared.cwd.display().to_string(),
            confinement: confinement_line(&prepared.confinement),
            reasons: reasons.clone(),
            timeout: settings.timeout,
            digest,
        };
        let asked = crate::audit::ApprovalAsked {
            call: prepared.attempt.call.clone(),
            event: "asked",
            tool,
            argv: request.stages.clone(),
            required: reasons.clone(),
            caller: prepared.attempt.caller.clone(),
        };
        if let Err(e) = self.gate.append("approval", &asked, false) {
            eprintln!("safe-mcp: warning: an approval request was not recorded: {e}");
        }
        let outcome = approver.0.ask(&request).await;
        prepared.attempt.approval = Some(outcome.record(&reasons));
        match &outcome.answer {
            _ if outcome.approved() => Ok(()),
            crate::approval::Answer::NoCapability(why) if settings.mode == ApprovalMode::Auto => {
                ticket(why, prepared)
            }
            _ => Err(refuse(outcome.refusal(settings.timeout))),
        }
    }
}

/// What giving a ticket instead of an approval makes: the attempt's `approval` record, the
/// refusal's reason, and its `detail.approval` (none when no ticket could be given).
pub(crate) struct TicketRefusal {
    pub(crate) record: Value,
    pub(crate) reason: String,
    pub(crate) detail: Option<Value>,
}

impl TerminalService {
    /// Gives a ticket for `request`, which could not be approved in this call because of
    /// `why`; `nothing` ends the reason ("nothing ran", "nothing was written").
    pub(crate) fn ticket_refusal(
        &self,
        request: crate::tickets::TicketRequest,
        why: &str,
        nothing: &str,
    ) -> TicketRefusal {
        let reasons = request.reasons.clone();
        match self.tickets.issue(request) {
            Ok(issued) => {
                let how = format!(
                    "ask the person to run `safe-mcp approvals approve {t}` (with the server's --config) on the machine the server runs on; `safe-mcp approvals show {t}` shows exactly what it approves. Then repeat this same call with \"approval_ticket\": \"{t}\"",
                    t = issued.ticket
                );
                TicketRefusal {
                    record: json!({
                        "required": reasons, "via": "ticket", "decision": "ticket-issued",
                        "ticket": issued.ticket,
                    }),
                    reason: format!(
                        "{}; this needs a person's approval and {why}, so it was given ticket {} instead: {how}. The ticket expires in {} s; {nothing}",
                        reasons.join("; "),
                        issued.ticket,
                        self.policy.approvals.ticket_ttl.as_secs()
                    ),
                    detail: Some(
                        json!({"ticket": issued.ticket, "expires_at": issued.expires_at, "how": how}),
                    ),
                }
            }
            Err(e) => TicketRefusal {
                record: not_asked_json(&reasons, "no-transport"),
                reason: format!("{}; {why}, and {e}; {nothing}", reasons.join("; ")),
                detail: None,
            },
        }
    }

    /// Spends ticket `id` for the exact call `digest` of `caller` in `session`: the attempt's
    /// `approval` record, or that record and why it was refused.
    pub(crate) fn redeem_ticket(
        &self,
        id: &str,
        caller: &str,
        session: &str,
        digest: &[u8; 32],
        reasons: &[String],
    ) -> Result<Value, (Value, crate::tickets::TicketError)> {
        match self.tickets.redeem(id, caller, session, digest) {
            Ok(by) => Ok(json!({
                "required": reasons, "via": "ticket-cli", "decision": "approved",
                "ticket": id, "approver_uid": by,
            })),
            Err(e) => Err((
                json!({"required": reasons, "via": "ticket-cli", "decision": "refused", "ticket": id}),
                e,
            )),
        }
    }
}

/// The attempt record's `approval` when nobody was asked.
fn not_asked_json(reasons: &[String], decision: &str) -> Value {
    json!({"required": reasons, "decision": decision, "via": "none"})
}

/// The confinement summary of a run in words, for a person approving it.
fn confinement_line(summary: &ConfinementSummary) -> String {
    let network = match summary.egress {
        Some(tier) => format!("network only through the allowlist proxy ({tier} tier)"),
        None if summary.network => "network open".to_owned(),
        None => "no network".to_owned(),
    };
    format!(
        "sandbox {}, {} view, Landlock {}, capabilities {}, {network}",
        summary.mode, summary.view, summary.landlock, summary.capabilities
    )
}
