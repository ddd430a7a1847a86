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
    ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, RequestStateCodec, RequestStateError, SealOptions,
};
use safe_mcp_core::approval::{Answer, ApprovalRequest, Choice};
use serde::{Deserialize, Serialize};

/// The key of the one input request an approval makes.
const KEY: &str = "approval";

/// The server's sealing key and the nonces spent, shared by every connection.
pub struct Mrtr {
    codec: RequestStateCodec,
    spent: Spent,
}

/// Where spent nonces are kept: in this process, or, with a fleet's shared key, in a file
/// beside it (`<state_key_file>.spent`, 0600, under `flock`), so that a state spent at one
/// server of the fleet is spent at every server on this machine.
enum Spent {
    Memory(Mutex<HashMap<String, Instant>>),
    File(std::path::PathBuf),
}

impl Spent {
    /// Spends `nonce` (valid for `ttl`); false when it was spent already.
    fn spend(&self, nonce: &str, ttl: Duration) -> Result<bool, String> {
        match self {
            Spent::Memory(spent) => {
                let mut spent = spent.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                spent.retain(|_, until| *until > now);
                Ok(spent.insert(nonce.to_owned(), now + ttl).is_none())
            }
            Spent::File(path) => spend_in_file(path, nonce, ttl),
        }
    }
}

/// The file form of [`Spent::spend`]: lines `NONCE EXPIRY` (seconds since the epoch),
/// rewritten under an exclusive lock with the expired ones left out.
fn spend_in_file(path: &std::path::Path, nonce: &str, ttl: Duration) -> Result<bool, String> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(fail)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| fail(e.into()))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(fail)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept: Vec<(&str, u64)> = text
        .lines()
        .filter_map(|l| {
            let (n, until) = l.split_once(' ')?;
            Some((n, until.parse().ok()?))
        })
        .filter(|(_, until)| *until > now)
        .collect();
    if kept.iter().any(|(n, _)| *n == nonce) {
        return Ok(false);
    }
    kept.push((nonce, now + ttl.as_secs() + 1));
    let out: String = kept.iter().map(|(n, u)| format!("{n} {u}\n")).collect();
    file.set_len(0).map_err(fail)?;
    file.rewind().map_err(fail)?;
    file.write_all(out.as_bytes()).map_err(fail)?;
    file.sync_data().map_err(fail)?;
    Ok(true)
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

/// The associated data: the caller, the exact command, and why the policy wants an
/// approval for it (a state sealed under other rules does not open under these).
fn bound_to(caller: &str, request: &ApprovalRequest) -> Vec<u8> {
    let mut ad = Vec::with_capacity(caller.len() + 64);
    ad.extend_from_slice(caller.as_bytes());
    ad.push(0);
    ad.extend_from_slice(&request.digest);
    for reason in &request.reasons {
        ad.extend_from_slice(&(reason.len() as u64).to_le_bytes());
        ad.extend_from_slice(reason.as_bytes());
    }
    ad
}

impl Mrtr {
    /// With `shared` (`[terminal.approvals] state_key_file`), a fleet's key and spent
    /// nonces; otherwise a key of 32 random bytes, new at every start.
    pub fn new(shared: Option<&safe_mcp_core::config::StateKey>) -> Result<Mrtr, String> {
        let (key, spent) = match shared {
            Some(k) => {
                let mut file = k.file.clone().into_os_string();
                file.push(".spent");
                (k.bytes.clone(), Spent::File(file.into()))
            }
            None => (
                safe_mcp_core::random::hex(32)
                    .map_err(|e| e.to_string())?
                    .into_bytes(),
                Spent::Memory(Mutex::new(HashMap::new())),
            ),
        };
        let codec = RequestStateCodec::try_new(key).map_err(|e| e.to_string())?;
        Ok(Mrtr { codec, spent })
    }

    /// The answer for `request` in this `round`: the person's, from a retry whose state
    /// opens for this caller and command; or [`Answer::InputRequired`], with the form and a
    /// fresh state left in `round.asked` for the caller's `tools/call` to return.
    pub fn ask(
        &self,
        round: &Round,
        request: &ApprovalRequest,
        caller: &str,
    ) -> (Answer, Option<Choice>) {
        let ad = bound_to(caller, request);
        let Some(state) = &round.state else {
            return (self.input_required(round, request, &ad), None);
        };
        match self.open_state(state, &ad, request) {
            Ok(()) => answered(round),
            Err(answer) => (answer, None),
        }
    }

    /// Opens the state of a retry for this call and caller and spends its nonce: `Err` is
    /// why it approves nothing.
    fn open_state(&self, state: &str, ad: &[u8], request: &ApprovalRequest) -> Result<(), Answer> {
        let sealed: Sealed = match self.codec.open_json_with(state, ad) {
            Ok(s) => s,
            Err(RequestStateError::Expired) => {
                return Err(Answer::Failed(format!(
                    "the approval's requestState expired (it lives {} s); repeat the call without it to be asked again",
                    request.timeout.as_secs()
                )));
            }
            Err(_) => {
                return Err(Answer::Failed(
                    "the requestState does not open for this exact call and caller (altered, forged, or another call's)".into(),
                ));
            }
        };
        match self.spent.spend(&sealed.nonce, request.timeout) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Answer::Failed(
                "this requestState was used already: an approval runs its call once".into(),
            )),
            Err(e) => Err(Answer::Failed(format!(
                "the spent approvals cannot be checked: {e}"
            ))),
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
        let schema = match crate::mcp::approval_form::schema(request) {
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

/// The person's answer that a retry carried (its state already opened and spent).
fn answered(round: &Round) -> (Answer, Option<Choice>) {
    let Some(reply) = round.responses.as_ref().and_then(|r| r.get(KEY)) else {
        let why = "the retry carried no answer to the approval request";
        return (Answer::Failed(why.into()), None);
    };
    match reply["action"].as_str() {
        Some("accept") => crate::mcp::approval_form::read(reply.get("content")),
        Some("decline") => (Answer::Declined, None),
        Some("cancel") => (Answer::Cancelled, None),
        _ => {
            let why = "the answer to the approval request has no action";
            (Answer::Failed(why.into()), None)
        }
    }
}
