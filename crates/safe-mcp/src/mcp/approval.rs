//! Asking a person (DESIGN §10): the MCP side of approvals.
//!
//! Without `url_base`, the server sends `elicitation/create` in form mode: one boolean,
//! `approve`, and a message naming every stage's argv, the cwd and the confinement; only
//! `accept` with `approve = true` is a yes. With `url_base`, it opens a one-time page
//! ([`safe_mcp_http::page`]) and sends a URL-mode elicitation pointing at it; the call then
//! waits for the answer given *on that page*, so a client that accepts elicitations on its own
//! (or a hook that answers them) approves nothing. A client that declines or cancels the URL
//! request refuses the call at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use rmcp::model::ElicitationAction;
use rmcp::service::{ElicitationError, ServiceError};
use rmcp::{Peer, RoleServer};
use safe_mcp_core::approval::{Answer, ApprovalRequest, Approver, Outcome};

/// Why a session on protocol 2026-07-28 or later cannot be asked.
const NEWER_PROTOCOL: &str = "the session speaks MCP 2026-07-28 or later, which forbids a server's requests to the client (elicitation among them), so no person can be asked through it";

/// Whether rmcp refused to send a request because the session's protocol forbids them.
fn forbids_requests(e: &rmcp::ErrorData) -> bool {
    e.message
        .contains("server-to-client requests are not allowed")
}

pub use crate::mcp::mrtr::ApproveForm;

/// Asks through one client session (and the server's page, when there is one), or, on
/// MCP 2026-07-28, through the call's own rounds ([`crate::mcp::mrtr`]).
pub struct ClientApprover {
    pub peer: Peer<RoleServer>,
    pub pages: Option<Arc<safe_mcp_http::page::Pages>>,
    /// On 2026-07-28: the call's round, the server's sealing key, the caller, and whether
    /// the request declared form elicitation.
    pub rounds: Option<Rounds>,
}

/// What asking through MRTR needs.
pub struct Rounds {
    pub round: Arc<crate::mcp::mrtr::Round>,
    pub mrtr: Arc<crate::mcp::mrtr::Mrtr>,
    pub caller: String,
    pub form: bool,
}

impl Approver for ClientApprover {
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>> {
        Box::pin(async move {
            let started = Instant::now();
            let (answer, via) = match (&self.rounds, &self.pages) {
                (Some(rounds), _) => (ask_in_rounds(rounds, request), "mrtr"),
                (None, None) => (self.ask_form(request).await, "form"),
                (None, Some(pages)) => (self.ask_page(pages, request).await, "url"),
            };
            Outcome {
                answer,
                via,
                waited: started.elapsed(),
            }
        })
    }

    fn asks_in_rounds(&self) -> bool {
        self.rounds.is_some()
    }
}

/// MCP 2026-07-28: the form goes back in the call's result, the answer comes with its
/// repeat. A client that declared no form elicitation, or a request no repeat can be bound
/// to, cannot be asked this way.
fn ask_in_rounds(rounds: &Rounds, request: &ApprovalRequest) -> Answer {
    if !rounds.form {
        return Answer::NoCapability(format!(
            "{NEWER_PROTOCOL}, and this request declared no form elicitation to answer in its rounds"
        ));
    }
    if request.digest == safe_mcp_core::approval::UNBOUND {
        return Answer::NoCapability(format!(
            "{NEWER_PROTOCOL}, and this approval cannot be bound to the repeated call"
        ));
    }
    rounds.mrtr.ask(&rounds.round, request, &rounds.caller)
}

impl ClientApprover {
    async fn ask_form(&self, request: &ApprovalRequest) -> Answer {
        let asked = self
            .peer
            .elicit_with_timeout::<ApproveForm>(request.message(), Some(request.timeout))
            .await;
        match asked {
            Ok(Some(ApproveForm { approve: true })) => Answer::Approved,
            Ok(Some(ApproveForm { approve: false })) => Answer::ApproveFalse,
            Ok(None) | Err(ElicitationError::NoContent) => Answer::Failed("the answer held no form".into()),
            Err(ElicitationError::UserDeclined) => Answer::Declined,
            Err(ElicitationError::UserCancelled) => Answer::Cancelled,
            Err(ElicitationError::CapabilityNotSupported) => Answer::NoCapability(
                "the client did not declare the elicitation capability, so no person can be asked through it".into(),
            ),
            Err(ElicitationError::Service(ServiceError::Timeout { .. })) => Answer::TimedOut,
            Err(ElicitationError::Service(ServiceError::McpError(e))) if forbids_requests(&e) => {
                Answer::NoCapability(NEWER_PROTOCOL.into())
            }
            Err(ElicitationError::ParseError { .. }) => {
                Answer::Failed("the answer was not the form that was asked for".into())
            }
            Err(e) => Answer::Failed(e.to_string()),
        }
    }

    async fn ask_page(
        &self,
        pages: &Arc<safe_mcp_http::page::Pages>,
        request: &ApprovalRequest,
    ) -> Answer {
        let opened = match pages.open(request) {
            Ok(o) => o,
            Err(e) => return Answer::Failed(format!("the approval page: {e}")),
        };
        let message = format!(
            "{}\nOpen this page to approve or deny it (one use, expires in {} s).",
            request.message(),
            request.timeout.as_secs()
        );
        let url = match url::Url::parse(&opened.url) {
            Ok(u) => u,
            Err(e) => return Answer::Failed(format!("the approval URL: {e}")),
        };
        let client = self.peer.elicit_url_with_timeout(
            message,
            url,
            opened.token.clone(),
            Some(request.timeout),
        );
        let page = tokio::time::timeout(request.timeout, opened.answer);
        tokio::pin!(client, page);
        // The page decides; the client can only refuse (decline, cancel) or fail to show it.
        let mut client_done = false;
        let answer = loop {
            tokio::select! {
                answered = &mut page => break match answered {
                    Ok(Ok(true)) => Answer::Approved,
                    Ok(Ok(false)) => Answer::Declined,
                    Ok(Err(_)) => Answer::Failed("the approval page closed".into()),
                    Err(_) => Answer::TimedOut,
                },
                shown = &mut client, if !client_done => {
                    client_done = true;
                    match shown {
                        Ok(ElicitationAction::Decline) => break Answer::Declined,
                        Ok(ElicitationAction::Cancel) => break Answer::Cancelled,
                        Ok(_) => {} // accepted: the person still answers on the page
                        Err(ElicitationError::CapabilityNotSupported) => {
                            break Answer::NoCapability(
                                "url_base is set, but the client did not declare URL-mode elicitation, so it cannot show the approval page".into(),
                            );
                        }
                        Err(ElicitationError::Service(ServiceError::Timeout { .. })) => {}
                        Err(ElicitationError::Service(ServiceError::McpError(e)))
                            if forbids_requests(&e) =>
                        {
                            break Answer::NoCapability(NEWER_PROTOCOL.into());
                        }
                        Err(e) => break Answer::Failed(e.to_string()),
                    }
                }
            }
        };
        pages.close(&opened.token);
        answer
    }
}

/// Whether this request speaks MCP 2026-07-28 or later: no sessions, and no requests from the
/// server to the client (an approval is asked in the call's own rounds).
pub(crate) fn stateless(context: &rmcp::service::RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28)
}

/// Whether this request declares form elicitation (declaring neither mode means form).
pub(crate) fn declares_form(context: &rmcp::service::RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// How a call of this request's client that needs approval would be approved, in a
/// sentence: what `describe_policy` and `explain_command` tell the model before it asks.
pub(crate) fn how_asked(
    context: &rmcp::service::RequestContext<RoleServer>,
    service: &safe_mcp_core::terminal::TerminalService,
    page: bool,
) -> String {
    use rmcp::service::ElicitationMode;
    use safe_mcp_core::approval::ApprovalMode;
    let mode = service.policy().approvals.mode;
    let ticket = || {
        if service.tickets().has_desk() {
            "with a ticket: the call is refused with detail.approval.ticket, a person approves it with `safe-mcp approvals approve TICKET`, then the same call repeated with approval_ticket runs once".to_owned()
        } else {
            "not at all: this client cannot be asked and the server has no approval desk, so such a call is refused".to_owned()
        }
    };
    let modes = context.peer.supported_elicitation_modes();
    let client = if stateless(context) {
        declares_form(context).then_some(
            "by a person answering a form this client shows between the call's rounds (MCP 2026-07-28 input_required, with a sealed requestState)",
        )
    } else if page && modes.contains(&ElicitationMode::Url) {
        Some(
            "on the server's one-time approval page, which this client is sent to (URL elicitation)",
        )
    } else if !page && modes.contains(&ElicitationMode::Form) {
        Some("by a person answering a form in this client (elicitation)")
    } else {
        None
    };
    match (mode, client) {
        (ApprovalMode::Deny, _) => "never: [terminal.approvals] mode = \"deny\" refuses such calls".to_owned(),
        (ApprovalMode::Ticket, _) => ticket(),
        (_, Some(how)) => how.to_owned(),
        (ApprovalMode::Auto, None) => ticket(),
        (ApprovalMode::Elicit, None) => "not at all: this client cannot be asked and [terminal.approvals] mode = \"elicit\" allows no ticket, so such a call is refused".to_owned(),
    }
}
