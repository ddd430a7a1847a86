//! A command that needs approval runs only once a person has said yes (DESIGN §10).

use safe_mcp_contract::ConfinementSummary;
use serde_json::{Map, Value, json};

use super::prepare::Prepared;
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
        approver: Option<&crate::approval::AskPerson>,
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
        let refuse = |reason: String| {
            let mut detail = Map::new();
            detail.insert("needs_approval".into(), json!(true));
            detail.insert("approval_reasons".into(), json!(reasons));
            detail.insert("would_run".into(), json!(false));
            self.redacted(
                OperationResult::new(tool, ResultCode::PolicyDenied, reason)
                    .with_detail(Value::Object(detail)),
            )
        };
        let not_asked =
            |decision: &str| json!({"required": reasons, "decision": decision, "via": "none"});
        if settings.mode == ApprovalMode::Deny {
            prepared.attempt.approval = Some(not_asked("denied-by-mode"));
            return Err(refuse(format!(
                "{}; [terminal.approvals] mode = \"deny\" refuses it without asking. Do the task without it, or ask the operator",
                reasons.join("; ")
            )));
        }
        let Some(approver) = approver else {
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
        if outcome.approved() {
            Ok(())
        } else {
            Err(refuse(outcome.refusal(settings.timeout)))
        }
    }
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
