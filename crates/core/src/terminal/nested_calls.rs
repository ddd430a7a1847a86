//! Nested calls (issue 35, item 2): a call whose commands may reach the ruled programs
//! through the server gets a token, which the shim hands back with the argv; the token names
//! the call that asked, so the nested call is judged, approved and recorded as that call's
//! caller would be, and names its parent in the trail.
//!
//! A token lives as long as the call (a run) or the session (start_process) that got it:
//! the [`Route`] that registered it removes it when it drops. It is 128 random bits in the
//! commands' environment only; in the private view no command sees another call's.

use std::sync::Arc;

use safe_mcp_contract::GivenStdio;

use super::service::{CommandInput, NestedCaller, Route, RunRequest, TerminalService};
use crate::audit::CallId;

/// What a nested call asks for, as the shim sends it.
#[derive(Debug)]
pub struct NestedAsk {
    /// The token of the call whose command asks.
    pub token: String,
    /// The argv, `argv[0]` the bare name the command started.
    pub argv: Vec<String>,
    /// The command's working directory, which must be inside the jail.
    pub cwd: String,
    /// The command's standard input, output and error.
    pub stdio: GivenStdio,
}

impl TerminalService {
    /// Registers a token for `call`'s nested calls, when this server has shims; `None`
    /// otherwise (nothing then reaches a ruled program from inside a command).
    pub(super) fn nested_route(&self, call: &CallId, req: &RunRequest) -> Option<Route> {
        self.nested.as_ref()?;
        let token = crate::random::hex(16).ok()?;
        let caller = NestedCaller {
            parent: call.to_string(),
            caller: req.caller.clone(),
            session: req.session.clone(),
            // A call's rounds answer that call alone; a nested call is then refused with
            // the reason, as where the client cannot be asked.
            approver: req.approver.clone().filter(|a| !a.0.asks_in_rounds()),
        };
        let calls = Arc::clone(&self.nested_calls.0);
        calls.lock().ok()?.insert(token.clone(), caller);
        Some(Route { calls, token })
    }

    /// The request a nested call makes: the argv as one simple command (no shell), from the
    /// command's cwd, for the caller of the call that asked, approved only through that
    /// call's client. `None` for a token no running call holds.
    pub fn nested_request(&self, ask: NestedAsk) -> Option<RunRequest> {
        let known = self.nested_calls.0.lock().ok()?.get(&ask.token).cloned()?;
        Some(RunRequest {
            command: CommandInput::Argv(ask.argv),
            cwd: Some(ask.cwd),
            stdin: None,
            timeout_seconds: None,
            observer: None,
            approver: known.approver,
            caller: known.caller,
            session: known.session,
            approval_ticket: None,
            parent: Some((known.parent, ask.stdio)),
        })
    }
}
