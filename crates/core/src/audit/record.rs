//! The records a call leaves in the trail, as types: one [`Attempt`] and one [`Outcome`] per
//! call of an acting tool, refusals included.
//!
//! Owns the field names and which fields a record may carry. Both servers build these
//! values and nothing else, so a record cannot drift between them; the writer adds `time`,
//! `seq`, `kind`, `prev`, `alg` and `hash`. A record must never hold command output: only
//! the redacted command, its verdict and byte counts. Wave-2 fields (`sub`, `approval`,
//! `network`) are optional and left out when empty, so older trails read the same.

use serde::Serialize;
use serde_json::Value;

use crate::envelope::{OperationResult, ResultCode};

/// Pairs a call's records: `<server pid>-<n>` for the terminal, `<pid>-f<n>` for files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct CallId(String);

impl CallId {
    /// A call id from its parts; [`super::Gate::begin`] is the usual source.
    pub fn new(id: impl Into<String>) -> CallId {
        CallId(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who made the call, once a transport can say (HTTP with OAuth); stdio calls have none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// The token's subject.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// The OAuth client (`client_id` or `azp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// The attempt record: what was asked and the verdict, written before anything acts.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The call this record belongs to.
    pub call: CallId,
    /// The tool called.
    pub tool: &'static str,
    /// A readable, redacted rendering of the request (`audit tail` shows it).
    pub command: String,
    /// The cwd as asked (terminal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Each stage's argv, redacted (terminal, once parsed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<Vec<String>>>,
    /// The tool's arguments as given (files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// The rule that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// OK when the call may act; otherwise the refusal's code.
    pub verdict: ResultCode,
    /// Why it was refused (redacted); absent when it may act.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The confinement that applies (terminal runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confinement: Option<Value>,
    /// Who asked.
    #[serde(flatten)]
    pub caller: Caller,
    /// How a person approved the call (approvals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Value>,
    /// A nested call: the call whose command started it (through the server's shim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A gateway call: the downstream server and its tool (`{"server", "tool"}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Value>,
}

impl Attempt {
    /// An attempt of `tool` under `call`, verdict OK until [`Attempt::refused`] says otherwise.
    pub fn new(call: &CallId, tool: &'static str, command: impl Into<String>) -> Attempt {
        Attempt {
            call: call.clone(),
            tool,
            command: command.into(),
            cwd: None,
            argv: None,
            args: None,
            rule: None,
            verdict: ResultCode::Ok,
            reason: None,
            confinement: None,
            caller: Caller::default(),
            approval: None,
            parent: None,
            gateway: None,
        }
    }

    /// The same attempt, marked with the refusal in `result` (its reason already redacted).
    pub fn refused(mut self, result: &OperationResult) -> Attempt {
        self.verdict = result.code;
        self.reason = Some(result.reason.clone());
        self
    }
}

/// The outcome record: how the call ended. Never output, only its size.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The call this record belongs to.
    pub call: CallId,
    /// The tool called.
    pub tool: String,
    /// The result code the client got.
    pub code: ResultCode,
    /// Wall-clock time of the whole call.
    pub duration_ms: u64,
    /// The reason the client got, when the call did not act (files) or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The command's exit status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Output sizes and whether each stream was cut (commands that ran).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputCounts>,
    /// The client cancelled the call and its work was stopped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// For the start of a process session, written when the session ends: how (`exit`,
    /// `stop`, `idle`, `timeout`, `server-exit`, `failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_end: Option<EndedBy>,
    /// The file tools: the written file's SHA-256 and size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<Value>,
    /// `[terminal.audit] exec_log`: what the command's tree executed (`programs`: pid in
    /// its namespace, path, `argv[0]`; `dropped`: how many more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed: Option<Value>,
    /// A gateway call: the server, its tool, its pid, the result's size and whether the
    /// server called it an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Value>,
    /// Who asked.
    #[serde(flatten)]
    pub caller: Caller,
}

impl Outcome {
    /// The outcome of `call` as its result says, with no command facts.
    pub fn of(call: &CallId, result: &OperationResult) -> Outcome {
        Outcome {
            call: call.clone(),
            tool: result.action.clone(),
            code: result.code,
            duration_ms: result.duration_ms,
            reason: None,
            exit_code: None,
            output: None,
            cancelled: false,
            session_end: None,
            file: None,
            executed: None,
            gateway: None,
            caller: Caller::default(),
        }
    }
}

/// What a command wrote, counted, never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutputCounts {
    /// stdout bytes produced.
    pub stdout_bytes: u64,
    /// stderr bytes produced.
    pub stderr_bytes: u64,
    /// stdout was cut at the cap.
    pub stdout_truncated: bool,
    /// stderr was cut at the cap.
    pub stderr_truncated: bool,
}

/// What an `approval` record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalEvent {
    /// A person is being asked about a call.
    Asked,
}

/// An `approval` record: a person is being asked about a call (the decision goes into the
/// call's attempt record).
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalAsked {
    /// The call asked about.
    pub call: CallId,
    /// What happened: a person is being asked.
    pub event: ApprovalEvent,
    /// The tool called.
    pub tool: &'static str,
    /// Each stage's argv, redacted, as the person sees it.
    pub argv: Vec<Vec<String>>,
    /// The rules that require approval.
    pub required: Vec<String>,
    /// Who asked.
    #[serde(flatten)]
    pub caller: Caller,
}

/// A `protected` audit record: what a sweep of the jail changed to hold the protected paths
/// and git's trust surface ([`crate::held`]), or why it could not.
#[derive(Debug, Clone, Serialize)]
pub struct ProtectedRecord {
    /// The call after (or before) which it was found; `start` or `exit` for the server's
    /// own sweeps.
    pub call: String,
    /// What happened.
    pub event: ProtectedEvent,
    /// The path in the jail.
    pub path: String,
    /// Where the model's version now is, outside the jail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// For a rewritten configuration, the settings it lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// The rule: `protected-path`.
    pub rule: &'static str,
}

/// What a sweep did to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectedEvent {
    /// Moved out of the jail into the server's quarantine.
    Quarantined,
    /// Removed (too large to copy out across file systems).
    Removed,
    /// Rewritten by the server (a configuration from its inert keys, a todo list without
    /// its `exec` lines); the model's version quarantined.
    Rewritten,
    /// The sweep could not finish: calls are refused until one does.
    Breach,
}

impl ProtectedRecord {
    /// The record of one change.
    pub fn of(call: &CallId, change: &crate::held::Change) -> ProtectedRecord {
        use crate::held::Change;
        let shown = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let (event, path, to, dropped) = match change {
            Change::Quarantined { path, to } => (
                if to.is_some() {
                    ProtectedEvent::Quarantined
                } else {
                    ProtectedEvent::Removed
                },
                path,
                shown(to),
                Vec::new(),
            ),
            Change::Rewritten { path, to, dropped } => {
                (ProtectedEvent::Rewritten, path, shown(to), dropped.clone())
            }
        };
        ProtectedRecord {
            call: call.to_string(),
            event,
            path: path.display().to_string(),
            to,
            dropped,
            rule: "protected-path",
        }
    }

    /// The record of a sweep that could not finish.
    pub fn breach(call: &CallId, why: &str) -> ProtectedRecord {
        ProtectedRecord {
            call: call.to_string(),
            event: ProtectedEvent::Breach,
            path: why.to_owned(),
            to: None,
            dropped: Vec::new(),
            rule: "protected-path",
        }
    }
}

/// What a `network` record says happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkEvent {
    /// The proxy refused it (the default: a record says what was allowed explicitly).
    #[default]
    Refused,
    /// Allowed, before any byte flows.
    Open,
    /// An allowed connection closed, with its byte counts.
    Close,
    /// A request the proxy saw on a credential host.
    Request,
    /// A connection from the host to a session's exposed port.
    Ingress,
    /// A session's port exposed (`expose_port`).
    Expose,
}

/// A `network` audit record: one per decision of the proxy (and, for an allowed
/// connection, one more when it closes, with its byte counts).
#[derive(Debug, Clone, Default, Serialize)]
pub struct NetworkRecord {
    /// The call whose command asked.
    pub call: String,
    /// What happened.
    pub event: NetworkEvent,
    /// `CONNECT`, or the plain-HTTP method.
    pub method: String,
    /// The host as asked (normalised when it could be).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// The allow or deny entry, or the check, that decided.
    pub rule: String,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The address connected to (allowed connections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Bytes from the command to the host (on `close`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_up: Option<u64>,
    /// Bytes from the host to the command (on `close`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_down: Option<u64>,
    /// The request's path, on a host whose requests the proxy sees (a credential host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The credential the proxy added (its variable's name, never its value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

impl NetworkRecord {
    /// A record of an exposed port (`expose_port`): the port exposed (`Expose`, `host` the
    /// listening address) or a connection to it (`Ingress`, `host` the peer), at `address`,
    /// for the sandbox's `port`.
    pub fn exposure(
        call: String,
        event: NetworkEvent,
        host: std::net::IpAddr,
        port: u16,
        address: std::net::SocketAddr,
    ) -> NetworkRecord {
        NetworkRecord {
            call,
            event,
            method: "TCP".into(),
            host: host.to_string(),
            port,
            rule: "expose_port".into(),
            address: Some(address.to_string()),
            ..Default::default()
        }
    }
}

/// Why the transport refused a request (an `http` record's `event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpRefused {
    /// One of the caller's limits (429).
    Limit,
    /// Another caller's MCP session (403).
    Session,
}

/// An `http` audit record: a request of an authenticated caller that the transport refused
/// before any tool saw it (one of the caller's limits, or another caller's MCP session).
/// Requests without a valid token are not recorded: anyone could fill the trail with them.
#[derive(Debug, Clone, Serialize)]
pub struct HttpRefusal {
    /// Which check refused it.
    pub event: HttpRefused,
    /// The HTTP status answered.
    pub status: u16,
    #[serde(flatten)]
    pub caller: Caller,
    /// The sentence the caller got.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_fields_are_left_out_and_wave_two_fields_appear_when_set() {
        let call = CallId::new("7-1");
        let a = Attempt::new(&call, "move_file", "move_file a b");
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"call": "7-1", "tool": "move_file", "command": "move_file a b", "verdict": "OK"})
        );
        let mut o = Outcome::of(
            &call,
            &OperationResult::new("run_command", ResultCode::Ok, "ran"),
        );
        o.caller.sub = Some("alice".into());
        o.cancelled = true;
        o.output = Some(OutputCounts {
            stdout_bytes: 3,
            stderr_bytes: 0,
            stdout_truncated: false,
            stderr_truncated: false,
        });
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["sub"], "alice");
        assert_eq!(v["cancelled"], true);
        assert_eq!(v["stdout_bytes"], 3);
        assert!(v.get("exit_code").is_none() && v.get("client_id").is_none());
    }
}

/// How a process session ended, as its start call's outcome record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndedBy {
    /// The process ended on its own.
    Exit,
    /// `stop_process`.
    Stop,
    /// No read or write for `idle_timeout_seconds`.
    Idle,
    /// It ran past `max_seconds`.
    Timeout,
    /// The server exited.
    ServerExit,
    /// It never started.
    Failed,
}
