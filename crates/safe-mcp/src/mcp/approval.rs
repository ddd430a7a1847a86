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
use safe_mcp_core::approval::{Answer, ApprovalRequest, Approver, Choice, Outcome};
use safe_mcp_http::page::PageAnswer;

/// Why a session on protocol 2026-07-28 or later cannot be asked.
const NEWER_PROTOCOL: &str = "the session speaks MCP 2026-07-28 or later, which forbids a server's requests to the client (elicitation among them), so no person can be asked through it";

/// Whether rmcp refused to send a request because the session's protocol forbids them.
fn forbids_requests(e: &rmcp::ErrorData) -> bool {
    e.message
        .contains("server-to-client requests are not allowed")
}

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
            let ((answer, choice), via) = match (&self.rounds, &self.pages) {
                (Some(rounds), _) => (ask_in_rounds(rounds, request), "mrtr"),
                (None, None) => (self.ask_form(request).await, "form"),
                (None, Some(pages)) => (self.ask_page(pages, request).await, "url"),
            };
            Outcome {
                choice,
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
fn ask_in_rounds(rounds: &Rounds, request: &ApprovalRequest) -> (Answer, Option<Choice>) {
    if !rounds.form {
        let why = format!(
            "{NEWER_PROTOCOL}, and this request declared no form elicitation to answer in its rounds"
        );
        return (Answer::NoCapability(why), None);
    }
    if request.digest == safe_mcp_core::approval::UNBOUND {
        let why =
            format!("{NEWER_PROTOCOL}, and this approval cannot be bound to the repeated call");
        return (Answer::NoCapability(why), None);
    }
    rounds.mrtr.ask(&rounds.round, request, &rounds.caller)
}

impl ClientApprover {
    async fn ask_form(&self, request: &ApprovalRequest) -> (Answer, Option<Choice>) {
        use rmcp::service::ElicitationMode;
        if !self
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            let why = "the client did not declare the elicitation capability, so no person can be asked through it";
            return (Answer::NoCapability(why.into()), None);
        }
        let schema = match crate::mcp::approval_form::schema(request) {
            Ok(s) => s,
            Err(e) => return (Answer::Failed(format!("the approval form: {e}")), None),
        };
        let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: request.message(),
            requested_schema: schema,
        };
        let asked = self
            .peer
            .create_elicitation_with_timeout(params, Some(request.timeout))
            .await;
        let answer = match asked {
            Ok(result) => match result.action {
                ElicitationAction::Accept => {
                    return crate::mcp::approval_form::read(result.content.as_ref());
                }
                ElicitationAction::Decline => Answer::Declined,
                ElicitationAction::Cancel => Answer::Cancelled,
                other => Answer::Failed(format!("an answer the form does not know: {other:?}")),
            },
            Err(ServiceError::Timeout { .. }) => Answer::TimedOut,
            Err(ServiceError::McpError(e)) if forbids_requests(&e) => {
                Answer::NoCapability(NEWER_PROTOCOL.into())
            }
            Err(e) => Answer::Failed(e.to_string()),
        };
        (answer, None)
    }

    async fn ask_page(
        &self,
        pages: &Arc<safe_mcp_http::page::Pages>,
        request: &ApprovalRequest,
    ) -> (Answer, Option<Choice>) {
        let opened = match pages.open(request) {
            Ok(o) => o,
            Err(e) => return (Answer::Failed(format!("the approval page: {e}")), None),
        };
        let message = format!(
            "{}\nOpen this page to approve or deny it (one use, expires in {} s).",
            request.message(),
            request.timeout.as_secs()
        );
        let url = match url::Url::parse(&opened.url) {
            Ok(u) => u,
            Err(e) => return (Answer::Failed(format!("the approval URL: {e}")), None),
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
        let mut choice = None;
        let answer = loop {
            tokio::select! {
                answered = &mut page => break match answered {
                    Ok(Ok(PageAnswer { approve: true, choice: Ok(chosen) })) => {
                        choice = Some(chosen);
                        Answer::Approved
                    }
                    Ok(Ok(PageAnswer { approve: true, choice: Err(why) })) => {
                        Answer::Failed(format!("the scope chosen could not be read: {why}"))
                    }
                    Ok(Ok(PageAnswer { approve: false, .. })) => Answer::Declined,
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
        (answer, choice)
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
