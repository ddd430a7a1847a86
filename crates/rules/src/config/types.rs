//! The public policy types: what a loaded, validated policy is.
//!
//! Owns the shapes both servers are configured with. It must never validate or read
//! anything (that is `load.rs`, with `checks.rs` and `sections.rs`), and imports only the
//! settings types beside it and the floor-0 leaves whose types it holds (`egress`,
//! `protected` and `credentials`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::settings::{
    ApprovalSettings, CacheDir, Capacity, FileToolSettings, ProfileReport, ProjectReport,
    ShipSettings,
};

/// Environment variable naming the policy file (the `--config` flag wins).
pub const ENV_POLICY_FILE: &str = "SAFE_MCP_POLICY_FILE";
/// The older single-server variable, honoured after [`ENV_POLICY_FILE`].
pub const ENV_LEGACY_POLICY_FILE: &str = "HTMCP_POLICY_FILE";

/// Which server is starting: each needs only its own section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `safe-mcp terminal`, `explain`.
    Terminal,
    /// `safe-mcp files`.
    Files,
    /// `policy check`: validate whatever sections are present, require none.
    Any,
}

/// What the audit trail does when the attempt record cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditFailMode {
    /// Nothing runs (AUDIT_UNAVAILABLE). The default.
    Closed,
    /// The command runs and the server warns on stderr.
    Open,
}

pub use safe_mcp_contract::{NamespaceMode, SandboxMode};

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The file it came from (canonical).
    pub source: PathBuf,
    /// Audit settings.
    pub audit: AuditSettings,
    /// `[http]`: the Streamable HTTP transport (`--http`).
    pub http: HttpSettings,
    /// Redaction settings.
    pub redaction: RedactionSettings,
    /// The terminal section, when present.
    pub terminal: Option<TerminalPolicy>,
    /// The files section, when present.
    pub files: Option<FilesPolicy>,
    /// `[[gateway.servers]]`: the MCP servers the terminal server runs confined and serves
    /// the tools of.
    pub gateway: Vec<GatewayServer>,
}

/// One `[[gateway.servers]]` entry, validated.
#[derive(Debug, Clone)]
pub struct GatewayServer {
    /// Its name, the prefix of its tools' names before the client.
    pub name: String,
    /// Its argv: the program (a bare name on PATH or an absolute path) and its arguments.
    pub command: Vec<String>,
    /// Which of its tools the model may call, and how.
    pub tools: crate::gateway::ToolPolicy,
    /// The largest result forwarded to the client, in bytes of text and data; past it the
    /// text is cut and the rest counted.
    pub max_result_bytes: usize,
    /// How long one call may wait for the server's answer.
    pub call_timeout_seconds: u64,
    /// Forward the server's sampling requests (`sampling/createMessage`) to the client.
    pub allow_sampling: bool,
    /// Forward the server's elicitation requests to the client.
    pub allow_elicitation: bool,
    /// Pass its resources and prompts through.
    pub resources: bool,
    /// The policy its process runs under: this file's, with its `[terminal]` section
    /// narrowed to the entry (the program, its profiles and `exec`, its write and read
    /// paths, its network and credentials, its environment), built and checked by the same
    /// loader as the terminal's own.
    pub policy: Box<Policy>,
}

/// `[http]`.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `Origin` values accepted (with scheme, host and port); any other present Origin is
    /// refused with 403. Empty: every request carrying an Origin is refused.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted beyond the loopback names.
    pub allowed_hosts: Vec<String>,
    /// The largest request body (413 above it).
    pub max_body_bytes: usize,
    /// `[http.auth] mode = "oauth"`: callers authenticate with bearer tokens.
    pub oauth: Option<OAuthSettings>,
    /// How much of the server callers may take at once.
    pub limits: HttpLimits,
}

/// `[http] max_mcp_sessions`, `max_requests` and their `_per_caller` forms (429 beyond).
/// Per caller needs a caller: without `[http.auth]` only the totals apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// MCP sessions open at once, in all.
    pub max_mcp_sessions: usize,
    /// MCP sessions open at once for one caller.
    pub max_mcp_sessions_per_caller: usize,
    /// Requests being answered at once (a tool call counts until its result), in all.
    pub max_requests: usize,
    /// Requests being answered at once for one caller.
    pub max_requests_per_caller: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_mcp_sessions: 64,
            max_mcp_sessions_per_caller: 16,
            max_requests: 64,
            max_requests_per_caller: 16,
        }
    }
}

/// `[http.auth]` with `mode = "oauth"`: the server is an OAuth 2.1 resource server.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// The authorization server; tokens must carry it as `iss`.
    pub issuer: String,
    /// This resource's URI; tokens must name it, exactly, in `aud`.
    pub audience: String,
    /// Where the issuer's public keys (a JWKS document) come from.
    pub jwks: JwksSource,
    /// Scopes every token must carry.
    pub required_scopes: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway_seconds: u64,
}

/// `jwks_file` or `jwks_url` (exactly one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A file the operator keeps current.
    File(PathBuf),
    /// An `https://` URL, checked against Mozilla's roots, or only `ca_file`'s
    /// (`jwks_ca_file`, PEM) when set.
    Url {
        url: String,
        ca_file: Option<PathBuf>,
    },
}

/// `audit_log`, `audit_fail_mode`, rotation and the HMAC key.
#[derive(Clone)]
pub struct AuditSettings {
    /// Where the JSON Lines trail goes; `None` only when no server section needs it.
    pub log: Option<PathBuf>,
    /// Closed (default) or open.
    pub fail_mode: AuditFailMode,
    /// Rotate past this size (0: never). Default 64 MiB.
    pub max_bytes: u64,
    /// Rotated files kept. Default 5.
    pub keep: usize,
    /// The HMAC key read from `audit_hmac_key_file`.
    pub hmac_key: Option<Vec<u8>>,
    /// Where the key came from.
    pub hmac_key_file: Option<PathBuf>,
    /// `[audit.ship]`.
    pub ship: Option<ShipSettings>,
    /// This server's name in a fleet (`SAFE_MCP_SERVER_ID`, else `server_id`): what its
    /// trail's records carry as `server`, so one receiver can tell replicas' chains apart.
    /// `None`: the trail's own, else one made at start.
    pub server_id: Option<String>,
}

impl fmt::Debug for AuditSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key.
        f.debug_struct("AuditSettings")
            .field("log", &self.log)
            .field("fail_mode", &self.fail_mode)
            .field("max_bytes", &self.max_bytes)
            .field("keep", &self.keep)
            .field("hmac_key_file", &self.hmac_key_file)
            .finish()
    }
}

pub use crate::redact::{ExtraPattern, RedactionSettings};

/// `[terminal]`.
#[derive(Debug, Clone)]
pub struct TerminalPolicy {
    /// The jail root, canonical.
    pub jail_root: PathBuf,
    /// `[terminal.audit] exec_log`: each call's outcome record lists the programs its
    /// commands executed.
    pub exec_log: bool,
    /// `[terminal.limits]`.
    pub limits: Limits,
    /// Allowlisted program names.
    pub allow: BTreeSet<String>,
    /// Denylisted program names (always win).
    pub deny: BTreeSet<String>,
    /// `[[terminal.rules]]`.
    pub rules: Vec<ArgRule>,
    /// `[terminal.sandbox]`.
    pub sandbox: SandboxSettings,
    /// `[terminal] write_paths`: writable directories outside the jail, canonical (the
    /// profiles' caches among them).
    pub write_paths: Vec<PathBuf>,
    /// `protected_paths`: what in the jail configures programs outside it.
    pub protected: crate::protected::ProtectedPaths,
    /// `drop_profile_rules`: programs whose profile rules the operator removed (a named
    /// choice; without it, the profiles' rules stay beside the operator's).
    pub dropped_profile_rules: Vec<String>,
    /// The profiles' caches, which a starting server makes (`safe_mcp_core::config::make_caches`).
    pub caches: Vec<CacheDir>,
    /// `[terminal.files]`: the file tools (read_file, write_file, edit_file).
    pub files: FileToolSettings,
    /// What each of `[terminal] profiles` added.
    pub profiles: Vec<ProfileReport>,
    /// What the jail's project file (`.safe-mcp.toml`) narrowed, when there is one.
    pub project: Option<ProjectReport>,
    /// `[terminal.sessions]`.
    pub sessions: SessionSettings,
    /// `[terminal.network]` (egress); `sandbox.network` is true exactly in mode open.
    pub network: crate::egress::NetworkPolicy,
    /// `[[terminal.credentials]]` and the method and path rules on their hosts.
    pub credentials: crate::credentials::Credentials,
    /// `[terminal.approvals]`.
    pub approvals: ApprovalSettings,
    /// The scrubbed PATH programs resolve through (absolute, outside the jail).
    pub path: Vec<PathBuf>,
    /// `[[terminal.examples]]`.
    pub examples: Vec<PolicyExamples>,
    /// `[terminal.env]`.
    pub env: EnvSettings,
}

/// `[terminal.env]`: what a command's environment holds beyond the server's own variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvSettings {
    /// Names copied from the server's environment, when set there.
    pub pass: Vec<String>,
    /// Fixed values, in name order.
    pub set: Vec<(String, String)>,
    /// Names a `NAME=value cmd` prefix may set beyond the defaults
    /// ([`crate::env_prefix::DEFAULT_ALLOWED`]).
    pub prefix_allow: Vec<String>,
}

/// `[terminal.limits]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock limit for one call.
    pub timeout_seconds: u64,
    /// Cap on stdout and on stderr, each, after redaction; `read_file`'s page too.
    pub max_output_bytes: usize,
    /// Output a command may print in all (stdout and stderr) before it is stopped as a
    /// flood (`yes`, `cat /dev/urandom`): far above any real build log. 0: no bound.
    pub max_output_total_bytes: u64,
    /// RLIMIT_CPU of each command.
    pub cpu_seconds: u64,
    /// RLIMIT_AS of each command.
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE of each command.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE of each command.
    pub open_files: u64,
    /// RLIMIT_NPROC of each command (per user, see docs/THREAT_MODEL.md's ceilings).
    pub processes: u64,
    /// What the jail and the write paths may hold in all, in bytes (0: no bound). Checked
    /// after each call (`safe_mcp_core::usage`).
    pub jail_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_seconds: 30,
            // ~5k tokens of a build log (benches/large_outputs.py): the start, the end and
            // the cut lines that look like errors fit a client's ~8k-token share of a turn.
            max_output_bytes: 12 * 1024,
            max_output_total_bytes: 64 << 20,
            cpu_seconds: 60,
            memory_bytes: 4 << 30,
            file_size_bytes: 256 << 20,
            open_files: 1024,
            processes: 4096,
            jail_bytes: 0,
        }
    }
}

/// One `[[terminal.rules]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgRule {
    /// The program this rule applies to.
    pub command: String,
    /// Token patterns; any one that matches denies.
    #[serde(default)]
    pub deny_args: Vec<String>,
    /// Token patterns (matched as `deny_args` are); an otherwise allowed command that
    /// matches one runs only with a person's approval, per call (DESIGN §10).
    #[serde(default)]
    pub confirm_args: Vec<String>,
    /// Why, shown to the model.
    #[serde(default)]
    pub reason: Option<String>,
    /// Escapes of the built-in tool knowledge the operator opts in, by name (`-exec`,
    /// `--pre`, `config`, ...). Each is linted by `safe-mcp policy check`.
    #[serde(default)]
    pub allow_escapes: Vec<String>,
    /// Lets an interpreter, shell or trampoline run (refused by default).
    #[serde(default)]
    pub allow_interpreter: bool,
    /// Commands this policy must allow; checked at startup.
    #[serde(default)]
    pub should_allow: Vec<String>,
    /// Commands this policy must refuse; checked at startup.
    #[serde(default)]
    pub should_deny: Vec<String>,
    /// The built-in profile that added this rule (never set by a policy file): its
    /// findings are the profile's, noted under it, not warnings for the operator.
    #[serde(skip)]
    pub profile: Option<String>,
}

/// A top-level `[[terminal.examples]]` entry: commands the policy must allow or refuse.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyExamples {
    /// Commands that must be allowed.
    #[serde(default)]
    pub should_allow: Vec<String>,
    /// Commands that must be refused.
    #[serde(default)]
    pub should_deny: Vec<String>,
}

/// `[terminal.sessions]`: process sessions (start_process and the rest).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionSettings {
    /// Sessions running at once, in all; one more is POLICY_DENIED.
    pub max_sessions: usize,
    /// Sessions running at once for one authenticated caller (`--http` with OAuth); unset,
    /// `max_sessions`.
    pub max_sessions_per_caller: Option<usize>,
    /// No read or write for this long: the tree is killed.
    pub idle_timeout_seconds: u64,
    /// Wall clock of one session.
    pub max_seconds: u64,
    /// Unread output kept per stream; older output is dropped and counted.
    pub buffer_bytes: usize,
    /// Where `expose_port` listens on the host: loopback unless the operator names another
    /// address (`policy check` warns).
    pub expose_bind: std::net::IpAddr,
    /// The host ports `expose_port` takes one from, inclusive; unset, the kernel picks.
    pub expose_ports: Option<[u16; 2]>,
    /// Ports exposed at once by the whole server; one more is POLICY_DENIED.
    pub max_exposed: usize,
}

impl SessionSettings {
    /// The limits as the session table counts them.
    pub fn capacity(&self) -> Capacity {
        Capacity {
            total: self.max_sessions,
            per_caller: self.max_sessions_per_caller.unwrap_or(self.max_sessions),
        }
    }
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            max_sessions: 4,
            max_sessions_per_caller: None,
            idle_timeout_seconds: 600,
            max_seconds: 3600,
            buffer_bytes: 1 << 20,
            expose_bind: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            expose_ports: None,
            max_exposed: 4,
        }
    }
}

/// `[terminal.sandbox]`.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// Enforce (default), best-effort, off.
    pub mode: SandboxMode,
    /// Whether commands may open non-unix sockets and TCP.
    pub network: bool,
    /// Read+execute paths outside the jail.
    pub read_paths: Vec<PathBuf>,
    /// Whether files inside the jail may be executed (default false: a program the model
    /// writes into the jail cannot be run, even by an allowlisted tool).
    pub exec_in_jail: bool,
    /// Whether commands may create unix sockets (default true). Landlock does not restrict
    /// connecting to a named socket, so `false` is what keeps a command off daemon sockets
    /// such as Docker's.
    pub unix_sockets: bool,
    /// Whether each command gets its own view of the machine (mount, ipc, uts and network
    /// namespaces): `auto` (default) where the server can make them, `required`, or `off`.
    pub namespaces: NamespaceMode,
    /// Files inside the write paths that commands may read but never write (the profile
    /// caches' tool configuration placeholders): bound read-only in the private view.
    pub read_only_files: Vec<PathBuf>,
    /// `[terminal] shared_cache`: whether the profile caches are shared with every other
    /// project that names the same `cache_dir` (default false: per jail).
    pub shared_cache: bool,
    /// What commands, and everything they start, may execute.
    pub exec: ExecSettings,
}

/// The exec allowlist (`[terminal.sandbox] exec_allowlist`, default true): Landlock grants
/// execute only on the allowlisted programs, these helpers, what those need to start (a
/// script's interpreter, the loader) and, under `exec_in_jail`, the jail; the read paths
/// are then read only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecSettings {
    /// Whether the allowlist binds (false: anything beneath a read path may be executed).
    pub enabled: bool,
    /// `[terminal.allowlist] helpers`: program names (found on the PATH) or absolute paths
    /// every command may execute without being allowlisted itself: what allowlisted
    /// programs start.
    pub helpers: Vec<String>,
    /// The profiles' helpers, by command: what only that command's stages may execute
    /// (cargo's linker, git's exec-path, npm's script shell).
    pub by_command: Vec<(String, Vec<String>)>,
}

impl ArgRule {
    /// Whether it judges arguments (`deny_args` or `confirm_args`): what makes a program
    /// "ruled", reached from inside a command only through the server.
    pub fn binds_arguments(&self) -> bool {
        !self.deny_args.is_empty() || !self.confirm_args.is_empty()
    }
}

impl TerminalPolicy {
    /// The allowlisted, undenied programs with argument rules, sorted, each once.
    pub fn ruled_commands(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.binds_arguments())
            .map(|r| r.command.clone())
            .filter(|c| self.allow.contains(c) && !self.deny.contains(c))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The read paths a command may be given as arguments: those the operator or a profile
    /// added. The default ones (the loader, libraries, `/etc/passwd`) are what every program
    /// needs, not what a model names.
    pub fn nameable_read_paths(&self) -> Vec<PathBuf> {
        self.sandbox
            .read_paths
            .iter()
            .filter(|p| !DEFAULT_READ_PATHS.iter().any(|d| *p == Path::new(d)))
            .cloned()
            .collect()
    }
}

/// The read+execute paths a default command needs: the loader, libraries, locale, /dev/null.
pub const DEFAULT_READ_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/alternatives",
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
];

/// The default scrubbed PATH.
pub const DEFAULT_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// `[files]`.
#[derive(Debug, Clone)]
pub struct FilesPolicy {
    /// The workspace root, canonical.
    pub workspace_root: PathBuf,
    /// The journal path (outside the workspace).
    pub journal: Option<PathBuf>,
    /// Largest plan.
    pub max_plan_moves: usize,
    /// Category name → extensions (lower case, with the dot).
    pub categories: BTreeMap<String, Vec<String>>,
    /// Skip rules, each with its layer.
    pub skip: Vec<SkipRule>,
}

/// A condition a `[[files.skip]]` rule may name, spelt in the file as in kebab case
/// (`unsafe-name`, `partial-download`, ...).
///
/// An enum, not a string, so that a misspelt condition is a load error naming it, and so that
/// the organizer's `match` on it is exhaustive: a condition cannot silently never hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipCondition {
    /// The name has control characters or is not valid UTF-8.
    UnsafeName,
    /// The name starts with `.`.
    Dotfile,
    /// An installer or package by extension (`.exe`, `.dmg`, `.deb`, ...).
    Installer,
    /// A regular file with an execute bit, or a script by extension.
    Executable,
    /// A directory named `*.app`.
    AppBundle,
    /// Operating-system bookkeeping (`desktop.ini`, `.DS_Store`, `Thumbs.db`, ...).
    SystemFile,
    /// A directory.
    Directory,
    /// Credentials and repository metadata (`.git`, `.ssh`, `.env*`, keys, ...).
    Sensitive,
    /// A file a tool reads as configuration on its own (`.gitconfig`, `.bashrc`, `.envrc`,
    /// `.vscode/`, ...): creating or moving one configures the next program that runs.
    ToolConfig,
    /// Modified within the organizer's "recent" window.
    Recent,
    /// A partial download by extension (`.part`, `.crdownload`, ...).
    PartialDownload,
    /// A regular file with more than one hard link.
    Hardlink,
    /// A regular file whose extension no category lists.
    Uncategorized,
}

impl SkipCondition {
    /// Every condition, in the order the error message lists them.
    pub const ALL: [SkipCondition; 13] = [
        SkipCondition::UnsafeName,
        SkipCondition::Dotfile,
        SkipCondition::Installer,
        SkipCondition::Executable,
        SkipCondition::AppBundle,
        SkipCondition::SystemFile,
        SkipCondition::Directory,
        SkipCondition::Sensitive,
        SkipCondition::ToolConfig,
        SkipCondition::Recent,
        SkipCondition::PartialDownload,
        SkipCondition::Hardlink,
        SkipCondition::Uncategorized,
    ];

    /// The policy-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipCondition::UnsafeName => "unsafe-name",
            SkipCondition::Dotfile => "dotfile",
            SkipCondition::Installer => "installer",
            SkipCondition::Executable => "executable",
            SkipCondition::AppBundle => "app-bundle",
            SkipCondition::SystemFile => "system-file",
            SkipCondition::Directory => "directory",
            SkipCondition::Sensitive => "sensitive",
            SkipCondition::ToolConfig => "tool-config",
            SkipCondition::Recent => "recent",
            SkipCondition::PartialDownload => "partial-download",
            SkipCondition::Hardlink => "hardlink",
            SkipCondition::Uncategorized => "uncategorized",
        }
    }
}

impl fmt::Display for SkipCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition name that is not a [`SkipCondition`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSkipCondition(pub String);

impl fmt::Display for UnknownSkipCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = SkipCondition::ALL.iter().map(|c| c.as_str()).collect();
        write!(
            f,
            "unknown condition {:?}; known: {}",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownSkipCondition {}

impl std::str::FromStr for SkipCondition {
    type Err = UnknownSkipCondition;

    /// Parses the policy-file spelling through the same serde names the file is read with.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use serde::de::IntoDeserializer;
        use serde::de::value::{Error, StrDeserializer};
        let de: StrDeserializer<'_, Error> = s.into_deserializer();
        SkipCondition::deserialize(de).map_err(|_| UnknownSkipCondition(s.to_owned()))
    }
}

/// The two skip layers of the files server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkipLayer {
    /// Every tool, no override.
    Protection,
    /// plan_organize only.
    Restraint,
}

/// One `[[files.skip]]` rule.
#[derive(Debug, Clone)]
pub struct SkipRule {
    /// Its layer (required in the file).
    pub layer: SkipLayer,
    /// Conditions: the rule holds when any one does.
    pub when: Vec<SkipCondition>,
    /// Why.
    pub reason: String,
}
