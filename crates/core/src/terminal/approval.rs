//! A command that needs approval runs only once a person has said yes (DESIGN §10): through
//! the client (a form, or the server's page), or with a ticket a person approved
//! ([`crate::tickets`]) where the client cannot be asked.

use safe_mcp_contract::ConfinementSummary;
use serde_json::{Value, json};

use crate::approval::{ApprovalMode, ApprovalRequest, AskPerson};
use crate::audit::{ApprovalAsked, CallId, Caller};
use crate::envelope::{OperationResult, ResultCode};

/// One question for a person, as a command or a file write puts it: what the ladder
/// ([`Approvals::ask_person`]) needs to ask it, give a ticket for it, or redeem one.
pub(crate) struct Question<'a> {
    pub(crate) tool: &'static str,
    /// The call the question is recorded under.
    pub(crate) call: CallId,
    /// What the person is shown: each stage's argv (a write: the tool and its path).
    pub(crate) shown: Vec<Vec<String>>,
    pub(crate) command: String,
    pub(crate) cwd: String,
    /// The confinement in words.
    pub(crate) confinement: String,
    /// Why a person must say yes: each rule that asked.
    pub(crate) reasons: Vec<String>,
    /// What a ticket or an MRTR state is bound to: this exact call.
    pub(crate) digest: [u8; 32],
    pub(crate) caller: &'a Caller,
    /// The MCP session (connection) that asked.
    pub(crate) session: &'a str,
    /// A ticket a person approved for this exact call.
    pub(crate) ticket: Option<&'a str>,
    /// Asks a person through the client; `None`: this transport cannot.
    pub(crate) approver: Option<&'a AskPerson>,
    /// A nested call: approved only through the client, never by a ticket (nothing could
    /// repeat it with one).
    pub(crate) nested: bool,
    /// How a refusal ends: "nothing ran", "nothing was written".
    pub(crate) nothing: &'static str,
    /// What the person is asked about: "this command", "this write".
    pub(crate) subject: &'static str,
    /// The call as a scope sees it: what a scope may cover, and what a granted one is
    /// made from.
    pub(crate) scoped: Option<crate::scopes::OwnedCall>,
}

/// The approval ladder's parts: the policy's approval settings, the trail the questions
/// are recorded in, the tickets.
#[derive(Clone, Copy)]
pub(crate) struct Approvals<'a> {
    pub(super) settings: &'a crate::config::ApprovalSettings,
    pub(super) gate: &'a crate::audit::Gate,
    pub(super) tickets: &'a crate::tickets::Tickets,
    pub(super) scopes: &'a crate::scopes::Scopes,
    pub(super) redactor: &'a crate::redact::Redactor,
}

/// A question not answered yes: the attempt's `approval` record, the result code, the
/// reason, and the ticket given instead (for the result's `detail.approval`).
pub(crate) struct NotApproved {
    pub(crate) record: Value,
    pub(crate) code: ResultCode,
    pub(crate) reason: String,
    pub(crate) ticket: Option<Value>,
}

impl NotApproved {
    /// The refusal as `tool` answers it (`detail`: that approval was needed, why, and the
    /// ticket given instead), and the attempt's `approval` record.
    pub(crate) fn into_result(self, tool: &str, reasons: &[String]) -> (OperationResult, Value) {
        let mut detail = json!({"needs_approval": true, "approval_reasons": reasons});
        if let Some(ticket) = self.ticket {
            detail["approval"] = ticket;
        }
        let result = OperationResult::new(tool, self.code, self.reason).with_detail(detail);
        (result, self.record)
    }

    fn denied(record: Value, reason: String) -> NotApproved {
        NotApproved {
            record,
            code: ResultCode::PolicyDenied,
            reason,
            ticket: None,
        }
    }
}

impl Approvals<'_> {
    /// The approval ladder, the one both the commands and the file tools climb: a ticket a
    /// person approved for this exact call (spent here, once); else `mode = "deny"` refuses
    /// without asking; `mode = "ticket"` gives a ticket; a client that can be asked is
    /// asked (the question recorded first); a client that cannot gets a ticket under
    /// `mode = "auto"`, a refusal otherwise. `Ok` is the attempt's `approval` record.
    pub(crate) async fn ask_person(&self, q: &Question<'_>) -> Result<Value, NotApproved> {
        let settings = self.settings;
        let reasons = q.reasons.join("; ");
        if let Some(id) = q.ticket {
            let who = q.caller.sub.clone().unwrap_or_default();
            return self
                .redeem_ticket(id, &who, q.session, &q.digest, &q.reasons)
                .map_err(|(record, why)| NotApproved {
                    record,
                    code: why.code(),
                    reason: format!("{why}; {}", q.nothing),
                    ticket: None,
                });
        }
        let not_asked = |decision: &str| not_asked_json(&q.reasons, decision);
        if settings.mode == ApprovalMode::Deny {
            return Err(NotApproved::denied(
                not_asked("denied-by-mode"),
                format!(
                    "{reasons}; [terminal.approvals] mode = \"deny\" refuses it without asking, so {}. Do the task without it, or ask the operator",
                    q.nothing
                ),
            ));
        }
        // A scope a person granted for calls of this shape answers without asking.
        let who = q.caller.sub.clone().unwrap_or_default();
        if let Some(call) = &q.scoped
            && let Some(scope) = self.scopes.covering(call, &who, q.session)
        {
            return Ok(json!({
                "required": q.reasons, "via": "scope", "decision": "approved",
                "scope": scope.id, "scope_kind": scope.kind, "scope_uses": scope.uses,
            }));
        }
        if settings.mode == ApprovalMode::Ticket {
            let why = "[terminal.approvals] mode = \"ticket\" approves through tickets only";
            return Err(self.instead_a_ticket(q, why));
        }
        let Some(approver) = q.approver else {
            if settings.mode == ApprovalMode::Auto {
                return Err(self.instead_a_ticket(q, "this transport cannot ask a person"));
            }
            return Err(NotApproved::denied(
                not_asked("no-transport"),
                format!(
                    "{reasons}; this server cannot ask a person here, so {}. The operator can set [terminal.approvals] url_base for an approval page",
                    q.nothing
                ),
            ));
        };
        let request = ApprovalRequest {
            call: q.call.to_string(),
            tool: q.tool,
            stages: q.shown.clone(),
            command: q.command.clone(),
            cwd: q.cwd.clone(),
            confinement: q.confinement.clone(),
            reasons: q.reasons.clone(),
            timeout: settings.timeout,
            digest: q.digest,
            preview: q.scoped.as_ref().and_then(|c| self.scopes.preview(c)),
        };
        let asked = ApprovalAsked {
            call: q.call.clone(),
            event: crate::audit::ApprovalEvent::Asked,
            tool: q.tool,
            argv: q.shown.clone(),
            required: q.reasons.clone(),
            caller: q.caller.clone(),
        };
        if let Err(e) = self.gate.append("approval", &asked, false) {
            tracing::warn!("an approval request was not recorded: {e}");
        }
        let outcome = approver.0.ask(&request).await;
        let record = outcome.record(&q.reasons);
        match &outcome.answer {
            _ if outcome.approved() => Ok(self.scope_granted(q, &outcome, &request, record)),
            crate::approval::Answer::NoCapability(why) if settings.mode == ApprovalMode::Auto => {
                Err(self.instead_a_ticket(q, why))
            }
            _ => {
                let why = outcome
                    .refusal(settings.timeout)
                    .replace("this command", q.subject)
                    .replace("nothing ran", q.nothing);
                Err(NotApproved::denied(record, why))
            }
        }
    }

    /// After a yes: the scope the person chose, made and recorded (durable before the
    /// model can use it), its id in the attempt's `approval` record. A scope that cannot
    /// be made (a pipeline, no approvals file) or recorded leaves the yes for this call
    /// alone, and the record says why.
    pub(crate) fn scope_granted(
        &self,
        q: &Question<'_>,
        outcome: &crate::approval::Outcome,
        request: &ApprovalRequest,
        mut record: Value,
    ) -> Value {
        let Some(choice) = outcome
            .choice
            .as_ref()
            .filter(|c| c.kind != crate::scopes::ScopeKind::Once)
        else {
            return record;
        };
        let Some(call) = &q.scoped else {
            record["scope_error"] = json!("this call has no shape a scope can take");
            return record;
        };
        let who = q.caller.sub.clone().unwrap_or_default();
        let grant = crate::scopes::Grant {
            kind: choice.kind,
            free: &choice.free,
            caller: &who,
            session: q.session,
            via: outcome.via,
            approver_uid: None,
        };
        match self.grant_scope(call, &grant, request.preview.as_ref(), &q.call.to_string()) {
            Ok(scope) => {
                record["scope"] = json!(scope.id);
                record["scope_kind"] = json!(scope.kind);
            }
            Err(e) => record["scope_error"] = json!(e),
        }
        record
    }

    /// Makes a scope and records its grant, durable, with the examples the person was
    /// shown; a grant that cannot be recorded is taken back.
    pub(crate) fn grant_scope(
        &self,
        call: &crate::scopes::OwnedCall,
        grant: &crate::scopes::Grant<'_>,
        preview: Option<&crate::scopes::Preview>,
        asked_in: &str,
    ) -> Result<crate::scopes::Scope, String> {
        let scope = self
            .scopes
            .grant(call, grant, |s| self.redactor.redact(s))
            .map_err(|e| e.to_string())?;
        let shown = preview.map(|p| self.redactor.redact(&p.text()));
        let entry = json!({
            "event": "scope-granted", "call": asked_in, "scope": scope.id, "scope_kind": scope.kind,
            "covers": scope.described, "free": grant.free, "caller": scope.caller,
            "via": scope.via, "approver_uid": scope.approver_uid, "expires_at": scope.expires_at,
            "preview": shown,
        });
        if let Err(e) = self.gate.append("approval", &entry, true) {
            let _ = self.scopes.revoke(&scope.id);
            return Err(format!(
                "the grant could not be recorded ({e}), so no scope was made"
            ));
        }
        Ok(scope)
    }

    /// A ticket instead of an approval, which `why` kept this call from; none for a nested
    /// call, which could not repeat itself with one.
    fn instead_a_ticket(&self, q: &Question<'_>, why: &str) -> NotApproved {
        if q.nested {
            return NotApproved::denied(
                not_asked_json(&q.reasons, "nested-no-ticket"),
                format!(
                    "{}; a command started it, and {why}: a ticket could not be given to it. Run it as a call of its own (run_command), where it can be approved",
                    q.reasons.join("; ")
                ),
            );
        }
        let request = crate::tickets::TicketRequest {
            tool: q.tool,
            shown: q.shown.clone(),
            command: q.command.clone(),
            cwd: q.cwd.clone(),
            reasons: q.reasons.clone(),
            digest: q.digest,
            caller: q.caller.sub.clone().unwrap_or_default(),
            session: q.session.to_owned(),
            scoped: q.scoped.clone(),
            preview: q
                .scoped
                .as_ref()
                .and_then(|c| self.scopes.preview(c))
                .map(|p| self.redactor.redact(&p.text())),
        };
        let nothing = q.nothing;
        let reasons = q.reasons.join("; ");
        match self.tickets.issue(request) {
            Ok(issued) => {
                let how = format!(
                    "ask the person to run `safe-mcp approvals approve {t}` (with the server's --config) on the machine the server runs on; `safe-mcp approvals show {t}` shows exactly what it approves. Then repeat this same call with \"approval_ticket\": \"{t}\"",
                    t = issued.ticket
                );
                NotApproved {
                    record: json!({
                        "required": q.reasons, "via": "ticket", "decision": "ticket-issued",
                        "ticket": issued.ticket,
                    }),
                    code: ResultCode::PolicyDenied,
                    reason: format!(
                        "{reasons}; this needs a person's approval and {why}, so it was given ticket {} instead: {how}. The ticket expires in {} s; {nothing}",
                        issued.ticket,
                        self.settings.ticket_ttl.as_secs()
                    ),
                    ticket: Some(
                        json!({"ticket": issued.ticket, "expires_at": issued.expires_at, "how": how}),
                    ),
                }
            }
            Err(e) => NotApproved::denied(
                not_asked_json(&q.reasons, "no-transport"),
                format!("{reasons}; {why}, and {e}; {nothing}"),
            ),
        }
    }

    /// Spends ticket `id` for the exact call `digest` of `caller` in `session`: the attempt's
    /// `approval` record, or that record and why it was refused.
    fn redeem_ticket(
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
pub(super) fn confinement_line(summary: &ConfinementSummary) -> String {
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
