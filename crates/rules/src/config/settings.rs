//! Settings types other modules are configured with (sessions, shipping, approvals, the
//! file tools) and the reports of what profiles and the project file added. They live here,
//! on config's floor (floor 1, below the modules that use them), so that `config` names them
//! without importing those modules; each of them re-exports its own.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How many sessions may run at once: in all, and for one caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Sessions running at once, for all callers.
    pub total: usize,
    /// Sessions running at once for one caller.
    pub per_caller: usize,
}

/// What to do while a sink is down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShipFailure {
    /// Keep the records in the spool and replay them when the sink is back.
    #[default]
    Spool,
    /// The same, and refuse new calls meanwhile.
    Deny,
}

/// `[audit.ship]`, resolved.
#[derive(Debug, Clone)]
pub struct ShipSettings {
    /// OTLP/HTTP logs endpoint: `host:port` and path.
    pub otlp_http: Option<(String, String)>,
    /// Syslog receiver: `host:port`.
    pub syslog_tcp: Option<String>,
    /// Spool or deny.
    pub on_failure: ShipFailure,
    /// Where undelivered records wait.
    pub spool_dir: PathBuf,
    /// At most this often, a `checkpoint` record names the chain's head.
    pub checkpoint_seconds: u64,
    /// What each record is sent as.
    pub format: ShipFormat,
}

/// `[audit.ship] format`: the record's line as it is, or an OCSF event that keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShipFormat {
    /// The trail's JSON line. The default.
    #[default]
    Raw,
    /// An OCSF event (`safe_mcp_core::audit::ocsf`) with the line in `unmapped.original`.
    Ocsf,
}

/// `[terminal.approvals] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Ask through the client where it can be asked (or the page, with `url_base`), and
    /// give a ticket where it cannot (`safe-mcp approvals`). The default.
    #[default]
    Auto,
    /// Ask through the client (or the page) only: a client that cannot be asked is refused.
    Elicit,
    /// Never ask the client: every approval is a ticket.
    Ticket,
    /// Never ask: a command needing approval is refused.
    Deny,
}

/// `[terminal.approvals]`, resolved.
#[derive(Debug, Clone)]
pub struct ApprovalSettings {
    /// Elicit or deny.
    pub mode: ApprovalMode,
    /// Out-of-band approval: the page's base URL (`http://127.0.0.1:PORT`), and the
    /// loopback address the server listens on for it.
    pub url_base: Option<(String, std::net::SocketAddr)>,
    /// How long a call waits for the answer.
    pub timeout: Duration,
    /// How long a ticket can be approved and then used.
    pub ticket_ttl: Duration,
    /// The key that seals approvals' MRTR state, shared by a fleet's servers; unset, each
    /// server makes its own at start.
    pub state_key: Option<StateKey>,
    /// Where the approval rules a person granted are kept (`scopes_file`; by default
    /// beside the policy file): outside the jail and every write path.
    pub scopes_file: Option<PathBuf>,
    /// The most a session scope lasts, in seconds.
    pub session_scope_seconds: u64,
    /// The most a rule lasts, in seconds.
    pub rule_scope_seconds: u64,
}

/// `[terminal.approvals] state_key_file`, read at load (its bytes never printed).
#[derive(Clone)]
pub struct StateKey {
    /// The key.
    pub bytes: Vec<u8>,
    /// Where it was read from; the spent nonces live beside it (`<file>.spent`).
    pub file: PathBuf,
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKey({})", self.file.display())
    }
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            mode: ApprovalMode::Auto,
            url_base: None,
            timeout: Duration::from_secs(120),
            ticket_ttl: Duration::from_secs(600),
            state_key: None,
            scopes_file: None,
            session_scope_seconds: 8 * 3600,
            rule_scope_seconds: 30 * 86_400,
        }
    }
}

/// `[terminal.files]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileToolSettings {
    /// Whether the three file tools (`read_file`, `write_file`, `edit_file`) answer at all
    /// (default true).
    pub enabled: bool,
    /// Whether only `read_file` does (default false).
    pub read_only: bool,
    /// The largest file the tools read or write (default 4 MiB).
    pub max_file_bytes: u64,
    /// Paths (relative to the jail; `*` within a component, `**` any depth) that a write
    /// of `write_file` or `edit_file` changes only with a person's approval, through the
    /// approval machinery commands use (`[terminal.approvals]`).
    pub confirm_paths: Vec<String>,
}

impl Default for FileToolSettings {
    fn default() -> Self {
        FileToolSettings {
            enabled: true,
            read_only: false,
            max_file_bytes: 4 << 20,
            confirm_paths: Vec::new(),
        }
    }
}

/// What one profile added, for `describe_policy` and `policy check`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProfileReport {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Allowlist entries it added.
    pub commands: Vec<String>,
    /// Commands it added an argument rule for (the operator's own rule wins).
    pub rules: Vec<String>,
    /// Read paths it added.
    pub read_paths: Vec<PathBuf>,
    /// PATH entries it added.
    pub path: Vec<PathBuf>,
    /// Writable caches it added (also in `write_paths`).
    pub write_paths: Vec<PathBuf>,
    /// Variables it set (the operator's own value wins).
    pub env: Vec<String>,
    /// Whether it turned `exec_in_jail` on (unless the operator set it).
    pub exec_in_jail: bool,
    /// What its commands may execute besides the allowlist, as `command: helper`.
    pub helpers: Vec<String>,
    /// What discovery could not find, for a warning.
    pub notes: Vec<String>,
}

/// One profile cache: its directory and the names of its tool configuration files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDir {
    /// The directory (a write path).
    pub dir: PathBuf,
    /// The files in it that configure its tool: read-only placeholders.
    pub config: Vec<String>,
}

/// What the project file changed, for `describe_policy` and `policy check`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProjectReport {
    /// The file.
    pub path: PathBuf,
    /// Commands it removed (denylisted).
    pub removed: Vec<String>,
    /// Commands it added deny rules for.
    pub rules: Vec<String>,
    /// Limits it lowered, as `name = value`.
    pub limits: Vec<String>,
    /// Protected paths it added.
    pub protected_paths: Vec<String>,
}
