//! Approvals on MCP 2026-07-28 (issue 34, item 1): the multi round-trip request (MRTR).
//!
//! That era forbids a server's requests to the client, so a call that needs approval is not
//! answered with an elicitation *request* but with an `InputRequiredResult`: the form to show
//! (`inputRequests.approval`) and a sealed `requestState`. The client shows the form, then
//! repeats the same `tools/call` with the answer (`inputResponses.approval`) and the state.
//!
//! Owns what the state binds and when it is spent. The state is sealed with an HMAC key
//! made at every server start (`RequestStateCodec`), bound by associated data to the caller
//! (`sub`) and to the digest of the exact command ([`safe_mcp_core::tickets::digest`]: every
//! stage's argv as it would run, and the cwd), expires with `[terminal.approvals]
//! timeout_seconds`, and carries a nonce that is spent on first use. A state that was
//! altered, forged, is for another call or caller, has expired or was used already approves
//! nothing: the call is POLICY_DENIED and the attempt record says why.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestStateCodec, RequestStateError, SealOptions,
};
use safe_mcp_core::approval::{Answer, ApprovalRequest};
use serde::{Deserialize, Serialize};

/// The form a client shows: one boolean.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct ApproveForm {
    /// Run this exact command, once?
    pub approve: bool,
}

rmcp::elicit_safe!(ApproveForm);

/// The key of the one input request an approval makes.
const KEY: &str = "approval";

/// The server's sealing key and the nonces spent, shared by every connection.
pub struct Mrtr {
    codec: RequestStateCodec,
    spent: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Mrtr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mrtr")
    }
}

/// What one `tools/call` brought for MRTR, and the input it asks for, if it does.
#[derive(Debug, Default)]
pub struct Round {
    /// The client's answers (the retry).
    pub responses: Option<InputResponses>,
    /// The state echoed back (the retry).
    pub state: Option<String>,
    /// Set when this call answers with an `InputRequiredResult` instead of a result.
    pub asked: Mutex<Option<InputRequiredResult>>,
}

/// What the state holds: a nonce; the binding is in the associated data.
#[derive(Serialize, Deserialize)]
struct Sealed {
    nonce: String,
}

/// The associated data: the caller and the exact command.
fn bound_to(caller: &str, request: &ApprovalRequest) -> Vec<u8> {
    let mut ad = Vec::with_capacity(caller.len() + 33);
    ad.extend_from_slice(caller.as_bytes());
    ad.push(0);
    ad.extend_from_slice(&request.digest);
    ad
}

impl Mrtr {
    /// A key of 32 random bytes, new at every start.
    pub fn new() -> Result<Mrtr, String> {
        let key = safe_mcp_core::random::hex(32).map_err(|e| e.to_string())?;
        let codec = RequestStateCodec::try_new(key.into_bytes()).map_err(|e| e.to_string())?;
        Ok(Mrtr {
            codec,
            spent: Mutex::new(HashMap::new()),
        })
    }

    /// The answer for `request` in this `round`: the person's, from a retry whose state
    /// opens for this caller and command; or [`Answer::InputRequired`], with the form and a
    /// fresh state left in `round.asked` for the caller's `tools/call` to return.
    pub fn ask(&self, round: &Round, request: &ApprovalRequest, caller: &str) -> Answer {
        let ad = bound_to(caller, request);
        let Some(state) = &round.state else {
            return self.input_required(round, request, &ad);
        };
        let sealed: Sealed = match self.codec.open_json_with(state, &ad) {
            Ok(s) => s,
            Err(RequestStateError::Expired) => {
                return Answer::Failed(format!(
                    "the approval's requestState expired (it lives {} s); repeat the call without it to be asked again",
                    request.timeout.as_secs()
                ));
            }
            Err(_) => {
                return Answer::Failed(
                    "the requestState does not open for this exact call and caller (altered, forged, or another call's)".into(),
                );
            }
        };
        {
            let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            spent.retain(|_, at| now.duration_since(*at) < Duration::from_secs(2 * 3600));
            if spent.insert(sealed.nonce, now).is_some() {
                return Answer::Failed(
                    "this requestState was used already: an approval runs its call once".into(),
                );
            }
        }
        let Some(reply) = round.responses.as_ref().and_then(|r| r.get(KEY)) else {
            return Answer::Failed("the retry carried no answer to the approval request".into());
        };
        match reply["action"].as_str() {
            Some("accept") => match reply["content"]["approve"].as_bool() {
                Some(true) => Answer::Approved,
                Some(false) => Answer::ApproveFalse,
                None => Answer::Failed("the answer was not the form that was asked for".into()),
            },
            Some("decline") => Answer::Declined,
            Some("cancel") => Answer::Cancelled,
            _ => Answer::Failed("the answer to the approval request has no action".into()),
        }
    }

    fn input_required(&self, round: &Round, request: &ApprovalRequest, ad: &[u8]) -> Answer {
        let nonce = match safe_mcp_core::random::hex(16) {
            Ok(n) => n,
            Err(e) => return Answer::Failed(e.to_string()),
        };
        let options = SealOptions::new().associated_data(ad).ttl(request.timeout);
        let state = match self.codec.seal_json_with(&Sealed { nonce }, &options) {
            Ok(s) => s,
            Err(e) => return Answer::Failed(format!("sealing the request state: {e}")),
        };
        let schema = match ElicitationSchema::from_type::<ApproveForm>() {
            Ok(s) => s,
            Err(e) => return Answer::Failed(format!("the approval form: {e}")),
        };
        let form = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: request.message(),
            requested_schema: schema,
        });
        let mut requests = InputRequests::new();
        requests.insert(KEY.to_owned(), InputRequest::Elicitation(form));
        let input = InputRequiredResult::new(Some(requests), Some(state));
        if let Ok(mut asked) = round.asked.lock() {
            *asked = Some(input);
        }
        Answer::InputRequired
    }
}
