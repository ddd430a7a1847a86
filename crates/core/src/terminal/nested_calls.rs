//! Nested calls (issue 35, item 2): a call whose commands may reach the ruled programs
//! through the server gets a token, which the shim hands back with the argv; the token names
//! the call that asked, so the nested call is judged, approved and recorded as that call's
//! caller would be, and names its parent in the trail.
//!
//! A token lives as long as the call (a run) or the session (start_process) that got it:
//! the [`Route`] that registered it removes it when it drops. It is 128 random bits in the
//! commands' environment only; in the private view no command sees another call's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use safe_mcp_contract::GivenStdio;

use super::request::{CommandInput, NestedParent, NestedSlot, RunRequest};
use crate::audit::CallId;
use crate::config::TerminalPolicy;

/// Nested calls one call's commands may have running at once.
pub(super) const MAX_RUNNING: usize = 8;

/// How deep nested calls go: a nested call's commands may make nested calls, to this depth.
pub(super) const MAX_DEPTH: u8 = 3;

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

/// A server's nested calls: the shims of the programs with argument rules (none when no
/// program is ruled), and the tokens of the calls now running.
#[derive(Debug)]
pub(super) struct Nested {
    shims: Option<crate::nested::NestedShims>,
    calls: NestedCalls,
}

impl Nested {
    /// The shims beneath the server's temporary directory, linking to this binary.
    pub(super) fn new(policy: &TerminalPolicy) -> Result<Nested, crate::nested::ShimError> {
        Ok(Nested {
            shims: shims(policy)?,
            calls: NestedCalls::default(),
        })
    }

    pub(super) fn shims(&self) -> Option<&crate::nested::NestedShims> {
        self.shims.as_ref()
    }

    /// Registers a token for `call`'s nested calls, when this server has shims; `None`
    /// otherwise (nothing then reaches a ruled program from inside a command).
    pub(super) fn route(&self, call: &CallId, req: &RunRequest) -> Option<Route> {
        self.shims.as_ref()?;
        let token = crate::random::hex(16).ok()?;
        let caller = NestedCaller {
            parent: call.to_string(),
            depth: req.parent.as_ref().map_or(0, |p| p.depth),
            running: Arc::new(AtomicUsize::new(0)),
            caller: req.caller.clone(),
            session: req.session.clone(),
            // A call's rounds answer that call alone; a nested call is then refused with
            // the reason, as where the client cannot be asked.
            approver: req.approver.clone().filter(|a| !a.0.asks_in_rounds()),
        };
        let calls = Arc::clone(&self.calls.0);
        calls.lock().ok()?.insert(token.clone(), caller);
        Some(Route { calls, token })
    }

    /// The request a nested call makes: the argv as one simple command (no shell), from the
    /// command's cwd, for the caller of the call that asked, approved only through that
    /// call's client. Refused, with the reason, for a token no running call holds, a name
    /// that is not a shim's, a call already running `MAX_RUNNING` nested ones, or one
    /// `MAX_DEPTH` deep.
    pub(super) fn request(&self, ask: NestedAsk) -> Result<RunRequest, String> {
        let known = self
            .calls
            .0
            .lock()
            .ok()
            .and_then(|calls| calls.get(&ask.token).cloned())
            .ok_or(
                "the token is no running call's (the call that started this command has ended)",
            )?;
        let shimmed = self.shims.as_ref().is_some_and(|shims| {
            ask.argv
                .first()
                .is_some_and(|name| shims.names().iter().any(|n| n == name))
        });
        if !shimmed {
            return Err("only the programs with argument rules are reached through the server; run this one as a call of its own".into());
        }
        if known.depth >= MAX_DEPTH {
            return Err(format!(
                "nested calls go at most {MAX_DEPTH} deep; run it as a call of its own"
            ));
        }
        let before = known.running.fetch_add(1, Ordering::AcqRel);
        let slot = Arc::new(NestedSlot(Arc::clone(&known.running)));
        if before >= MAX_RUNNING {
            return Err(format!(
                "the call that asked has {MAX_RUNNING} nested calls running already; wait for them"
            ));
        }
        Ok(RunRequest {
            command: CommandInput::Argv(ask.argv),
            cwd: Some(ask.cwd),
            stdin: None,
            timeout_seconds: None,
            observer: None,
            approver: known.approver,
            caller: known.caller,
            session: known.session,
            approval_ticket: None,
            parent: Some(NestedParent {
                call: known.parent,
                stdio: ask.stdio,
                depth: known.depth + 1,
                slot,
            }),
        })
    }
}

/// Who a token's nested calls are for: the call whose command asks, and how it was asked.
#[derive(Clone)]
pub(super) struct NestedCaller {
    pub(super) parent: String,
    /// How deep the token's call is (0: a top-level call).
    pub(super) depth: u8,
    /// Its nested calls running now.
    pub(super) running: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) caller: crate::audit::Caller,
    pub(super) session: String,
    pub(super) approver: Option<crate::approval::AskPerson>,
}

/// The tokens of the calls now running.
#[derive(Default)]
pub(super) struct NestedCalls(pub(super) Arc<Mutex<HashMap<String, NestedCaller>>>);

impl std::fmt::Debug for NestedCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NestedCalls")
    }
}

/// A registered token; dropping it ends the route.
pub(super) struct Route {
    pub(super) calls: Arc<Mutex<HashMap<String, NestedCaller>>>,
    pub(super) token: String,
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.remove(&self.token);
        }
    }
}

/// The shims of the programs with argument rules, beneath the server's temporary directory,
/// linking to this binary (`None` when no program is ruled).
fn shims(
    policy: &TerminalPolicy,
) -> Result<Option<crate::nested::NestedShims>, crate::nested::ShimError> {
    let names = super::executables::ruled(policy);
    if names.is_empty() {
        return Ok(None);
    }
    let tmp = std::env::temp_dir();
    let exe = std::env::current_exe().map_err(|e| crate::nested::ShimError {
        parent: tmp.clone(),
        message: format!("this server's own binary: {e}"),
    })?;
    let writable: Vec<&std::path::Path> = std::iter::once(policy.jail_root.as_path())
        .chain(policy.write_paths.iter().map(std::path::PathBuf::as_path))
        .collect();
    crate::nested::NestedShims::create(&tmp, &exe, &names, &writable).map(Some)
}
