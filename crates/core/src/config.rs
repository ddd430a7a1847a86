//! The policy file (DESIGN §4): loading, environment overrides, validation.
//!
//! Owns the one TOML file both servers read. It fails closed: unknown keys, missing roots, an
//! audit log inside a root, a bad operator regex, an unlabelled skip rule: each is a
//! [`ConfigError`], and the binary prints `fatal: <reason>` and exits. It must never guess a
//! default location for the policy or a root: no policy path means no server.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::paths::lexical_normalize;

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

/// How strictly kernel confinement is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// A ruleset that is not fully enforced means nothing runs. The default.
    Enforce,
    /// Run with what the kernel gives, and say so.
    BestEffort,
    /// Path checks only.
    Off,
}

impl SandboxMode {
    /// The policy-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Enforce => "enforce",
            SandboxMode::BestEffort => "best-effort",
            SandboxMode::Off => "off",
        }
    }
}

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The file it came from (canonical).
    pub source: PathBuf,
    /// Audit settings.
    pub audit: AuditSettings,
    /// Redaction settings.
    pub redaction: RedactionSettings,
    /// The terminal section, when present.
    pub terminal: Option<TerminalPolicy>,
    /// The files section, when present.
    pub files: Option<FilesPolicy>,
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

/// `[redaction]`.
#[derive(Debug, Clone)]
pub struct RedactionSettings {
    /// Redaction on (default true).
    pub enabled: bool,
    /// High-entropy fallback (default false).
    pub entropy_fallback: bool,
    /// Operator patterns, already checked to compile.
    pub extra_patterns: Vec<ExtraPattern>,
}

/// One `extra_patterns` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraPattern {
    /// The `<kind>` in `[REDACTED:<kind>]`.
    pub name: String,
    /// A `regex` crate pattern.
    pub regex: String,
}

/// `[terminal]`.
#[derive(Debug, Clone)]
pub struct TerminalPolicy {
    /// The jail root, canonical.
    pub jail_root: PathBuf,
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
    /// The scrubbed PATH programs resolve through (absolute, outside the jail).
    pub path: Vec<PathBuf>,
    /// `[[terminal.examples]]`.
    pub examples: Vec<PolicyExamples>,
}

/// `[terminal.limits]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock limit for one call.
    pub timeout_seconds: u64,
    /// Cap on stdout and on stderr, each, after redaction.
    pub max_output_bytes: usize,
    /// RLIMIT_CPU of each command.
    pub cpu_seconds: u64,
    /// RLIMIT_AS of each command.
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE of each command.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE of each command.
    pub open_files: u64,
    /// RLIMIT_NPROC of each command (per user, see the README's ceilings).
    pub processes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_seconds: 30,
            max_output_bytes: 64 * 1024,
            cpu_seconds: 60,
            memory_bytes: 4 << 30,
            file_size_bytes: 256 << 20,
            open_files: 1024,
            processes: 4096,
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

/// The conditions a `[[files.skip]]` rule may name.
pub const SKIP_CONDITIONS: &[&str] = &[
    "unsafe-name",
    "dotfile",
    "installer",
    "executable",
    "app-bundle",
    "system-file",
    "directory",
    "sensitive",
    "recent",
    "partial-download",
    "hardlink",
    "uncategorized",
];

/// The two skip layers of the files server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
    /// Conditions.
    pub when: Vec<String>,
    /// Why.
    pub reason: String,
}

/// Why a policy could not be loaded. Each is fatal at startup.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither `--config` nor `SAFE_MCP_POLICY_FILE`.
    NoPolicyPath,
    /// The file could not be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Invalid TOML or an unknown key.
    Parse { path: PathBuf, message: String },
    /// A section the server needs is absent.
    MissingSection(&'static str),
    /// A value is out of range or malformed.
    Invalid { key: String, message: String },
    /// A root is unset.
    RootUnset {
        key: &'static str,
        env: &'static str,
    },
    /// A root is not an existing directory.
    RootNotDirectory { key: &'static str, path: PathBuf },
    /// The audit log or journal lies inside a root.
    InsideRoot {
        key: &'static str,
        path: PathBuf,
        root: PathBuf,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoPolicyPath => write!(
                f,
                "no policy file: pass --config PATH or set {ENV_POLICY_FILE} (there is no default location)"
            ),
            ConfigError::Read { path, source } => {
                write!(f, "cannot read policy file {}: {source}", path.display())
            }
            ConfigError::Parse { path, message } => {
                write!(
                    f,
                    "invalid policy file {}: {}",
                    path.display(),
                    message.trim_end()
                )
            }
            ConfigError::MissingSection(s) => write!(f, "the policy has no [{s}] section"),
            ConfigError::Invalid { key, message } => write!(f, "invalid `{key}`: {message}"),
            ConfigError::RootUnset { key, env } => {
                write!(f, "`{key}` is not set (set it in the policy or via {env})")
            }
            ConfigError::RootNotDirectory { key, path } => {
                write!(
                    f,
                    "`{key}` = {} is not an existing directory",
                    path.display()
                )
            }
            ConfigError::InsideRoot { key, path, root } => write!(
                f,
                "`{key}` = {} lies inside {}; it must be outside every root, out of a command's reach",
                path.display(),
                root.display()
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

// ----- raw file shapes -------------------------------------------------------------------

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    audit_log: Option<PathBuf>,
    audit_fail_mode: Option<AuditFailMode>,
    audit_max_bytes: Option<u64>,
    audit_keep: Option<usize>,
    audit_hmac_key_file: Option<PathBuf>,
    redaction: Option<RawRedaction>,
    terminal: Option<RawTerminal>,
    files: Option<RawFiles>,
    // The older flat layout: the terminal section's keys at top level.
    jail_root: Option<PathBuf>,
    limits: Option<Limits>,
    allowlist: Option<RawNames>,
    denylist: Option<RawNames>,
    rules: Option<Vec<ArgRule>>,
    sandbox: Option<RawSandbox>,
    path: Option<Vec<PathBuf>>,
    examples: Option<Vec<PolicyExamples>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawRedaction {
    enabled: Option<bool>,
    entropy_fallback: Option<bool>,
    extra_patterns: Vec<ExtraPattern>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTerminal {
    examples: Option<Vec<PolicyExamples>>,
    jail_root: Option<PathBuf>,
    limits: Option<Limits>,
    allowlist: Option<RawNames>,
    denylist: Option<RawNames>,
    rules: Option<Vec<ArgRule>>,
    sandbox: Option<RawSandbox>,
    path: Option<Vec<PathBuf>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNames {
    #[serde(default)]
    commands: Vec<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<SandboxMode>,
    network: Option<bool>,
    read_paths: Option<Vec<PathBuf>>,
    exec_in_jail: Option<bool>,
    unix_sockets: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFiles {
    workspace_root: Option<PathBuf>,
    journal: Option<PathBuf>,
    max_plan_moves: Option<usize>,
    categories: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    skip: Vec<RawSkip>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSkip {
    layer: Option<SkipLayer>,
    #[serde(default)]
    when: Vec<String>,
    #[serde(default)]
    reason: String,
}

// ----- loading ------------------------------------------------------------------------------

/// Reads environment variables; injectable so tests need not touch the process environment.
pub trait Env {
    /// The variable's value, if set and non-empty.
    fn var(&self, name: &str) -> Option<OsString>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name).filter(|v| !v.is_empty())
    }
}

impl<F: Fn(&str) -> Option<OsString>> Env for F {
    fn var(&self, name: &str) -> Option<OsString> {
        self(name).filter(|v| !v.is_empty())
    }
}

/// Finds the policy path (`flag` wins over the environment), reads and validates it.
///
/// It does not run the policy's examples: [`crate::load::load_policy`] does, and is the
/// way in from outside the crate.
pub(crate) fn read(
    flag: Option<&Path>,
    env: &dyn Env,
    section: Section,
) -> Result<Policy, ConfigError> {
    let path = match flag {
        Some(p) => p.to_path_buf(),
        None => env
            .var(ENV_POLICY_FILE)
            .or_else(|| env.var(ENV_LEGACY_POLICY_FILE))
            .map(PathBuf::from)
            .ok_or(ConfigError::NoPolicyPath)?,
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    let source = std::fs::canonicalize(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    from_toml(&text, &source, env, section)
}

/// Validates policy text; relative paths resolve against `source`'s directory. Like
/// [`read`], it does not run the policy's examples.
pub(crate) fn from_toml(
    text: &str,
    source: &Path,
    env: &dyn Env,
    section: Section,
) -> Result<Policy, ConfigError> {
    let raw: RawPolicy = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: source.to_path_buf(),
        message: e.to_string(),
    })?;
    let base = source.parent().unwrap_or(Path::new("/")).to_path_buf();
    Builder { base, env }.build(raw, source, section)
}

struct Builder<'a> {
    base: PathBuf,
    env: &'a dyn Env,
}

impl Builder<'_> {
    fn file_path(&self, p: PathBuf) -> PathBuf {
        if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        }
    }

    /// An env value names a path relative to the process's cwd, as any shell user expects.
    fn env_path(&self, name: &str) -> Option<PathBuf> {
        self.env.var(name).map(PathBuf::from).map(|p| {
            if p.is_absolute() {
                p
            } else {
                std::env::current_dir()
                    .unwrap_or_else(|_| PathBuf::from("/"))
                    .join(p)
            }
        })
    }

    fn build(
        self,
        mut raw: RawPolicy,
        source: &Path,
        section: Section,
    ) -> Result<Policy, ConfigError> {
        let flat = raw.jail_root.is_some()
            || raw.limits.is_some()
            || raw.allowlist.is_some()
            || raw.denylist.is_some()
            || raw.rules.is_some()
            || raw.sandbox.is_some()
            || raw.path.is_some()
            || raw.examples.is_some();
        if flat && raw.terminal.is_some() {
            return Err(ConfigError::Invalid {
                key: "terminal".into(),
                message: "the policy mixes the flat layout (top-level jail_root, [allowlist], ...) with a [terminal] section; use one".into(),
            });
        }
        if flat {
            raw.terminal = Some(RawTerminal {
                jail_root: raw.jail_root.take(),
                limits: raw.limits.take(),
                allowlist: raw.allowlist.take(),
                denylist: raw.denylist.take(),
                rules: raw.rules.take(),
                sandbox: raw.sandbox.take(),
                path: raw.path.take(),
                examples: raw.examples.take(),
            });
        }

        let redaction = self.redaction(raw.redaction.unwrap_or_default())?;
        let fail_mode = match self.env.var("SAFE_MCP_AUDIT_FAIL_MODE") {
            Some(v) => match v.to_str() {
                Some("closed") => AuditFailMode::Closed,
                Some("open") => AuditFailMode::Open,
                _ => {
                    return Err(ConfigError::Invalid {
                        key: "SAFE_MCP_AUDIT_FAIL_MODE".into(),
                        message: "must be \"closed\" or \"open\"".into(),
                    });
                }
            },
            None => raw.audit_fail_mode.unwrap_or(AuditFailMode::Closed),
        };
        let audit_log = self
            .env_path("SAFE_MCP_AUDIT_LOG")
            .or_else(|| raw.audit_log.map(|p| self.file_path(p)));

        let terminal = match (raw.terminal, section) {
            (Some(t), Section::Terminal | Section::Any) => Some(self.terminal(t)?),
            (None, Section::Terminal) => return Err(ConfigError::MissingSection("terminal")),
            _ => None,
        };
        let files = match (raw.files, section) {
            (Some(f), Section::Files | Section::Any) => Some(self.files(f)?),
            (None, Section::Files) => return Err(ConfigError::MissingSection("files")),
            _ => None,
        };

        let mut roots: Vec<PathBuf> = Vec::new();
        if let Some(t) = &terminal {
            roots.push(t.jail_root.clone());
        }
        if let Some(f) = &files {
            roots.push(f.workspace_root.clone());
        }
        let log = match audit_log {
            Some(p) => Some(outside_roots("audit_log", &p, &roots)?),
            None if section != Section::Any => {
                return Err(ConfigError::Invalid {
                    key: "audit_log".into(),
                    message: "not set (set it in the policy or via SAFE_MCP_AUDIT_LOG): every attempt is audited".into(),
                });
            }
            None => None,
        };
        let files = match files {
            Some(mut f) => {
                if let Some(j) = f.journal.take() {
                    f.journal = Some(outside_roots("files.journal", &j, &roots)?);
                }
                Some(f)
            }
            None => None,
        };

        let keep = raw.audit_keep.unwrap_or(5);
        if keep == 0 || keep > 1000 {
            return Err(ConfigError::Invalid {
                key: "audit_keep".into(),
                message: "must be between 1 and 1000".into(),
            });
        }
        let max_bytes = raw.audit_max_bytes.unwrap_or(64 << 20);
        if max_bytes != 0 && max_bytes < 4096 {
            return Err(ConfigError::Invalid {
                key: "audit_max_bytes".into(),
                message: "must be 0 (never rotate) or at least 4096".into(),
            });
        }
        let (hmac_key, hmac_key_file) = match raw.audit_hmac_key_file {
            Some(p) => {
                let p = self.file_path(p);
                let read_paths: Vec<PathBuf> = terminal
                    .as_ref()
                    .map(|t| t.sandbox.read_paths.clone())
                    .unwrap_or_default();
                (Some(hmac_key(&p, &roots, &read_paths)?), Some(p))
            }
            None => (None, None),
        };

        Ok(Policy {
            source: source.to_path_buf(),
            audit: AuditSettings {
                log,
                fail_mode,
                max_bytes,
                keep,
                hmac_key,
                hmac_key_file,
            },
            redaction,
            terminal,
            files,
        })
    }

    fn redaction(&self, raw: RawRedaction) -> Result<RedactionSettings, ConfigError> {
        for p in &raw.extra_patterns {
            if p.name.is_empty()
                || !p
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(ConfigError::Invalid {
                    key: "redaction.extra_patterns.name".into(),
                    message: format!("{:?} must be non-empty letters, digits, `_` or `-`", p.name),
                });
            }
            regex::Regex::new(&p.regex).map_err(|e| ConfigError::Invalid {
                key: format!("redaction.extra_patterns ({})", p.name),
                message: format!("not a valid regex: {e}"),
            })?;
        }
        Ok(RedactionSettings {
            enabled: raw.enabled.unwrap_or(true),
            entropy_fallback: raw.entropy_fallback.unwrap_or(false),
            extra_patterns: raw.extra_patterns,
        })
    }

    fn terminal(&self, raw: RawTerminal) -> Result<TerminalPolicy, ConfigError> {
        let root = self
            .env_path("SAFE_MCP_JAIL_ROOT")
            .or_else(|| self.env_path("HTMCP_JAIL_ROOT"))
            .or_else(|| raw.jail_root.map(|p| self.file_path(p)))
            .ok_or(ConfigError::RootUnset {
                key: "terminal.jail_root",
                env: "SAFE_MCP_JAIL_ROOT",
            })?;
        let jail_root = existing_root("terminal.jail_root", &root)?;

        let limits = raw.limits.unwrap_or_default();
        if limits.timeout_seconds == 0 || limits.timeout_seconds > 24 * 3600 {
            return Err(ConfigError::Invalid {
                key: "terminal.limits.timeout_seconds".into(),
                message: "must be between 1 and 86400".into(),
            });
        }
        if limits.max_output_bytes == 0 || limits.max_output_bytes > 64 << 20 {
            return Err(ConfigError::Invalid {
                key: "terminal.limits.max_output_bytes".into(),
                message: "must be between 1 and 67108864".into(),
            });
        }

        let allow_names = match self.env.var("SAFE_MCP_ALLOW_COMMANDS") {
            Some(v) => v
                .to_string_lossy()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            None => raw.allowlist.unwrap_or_default().commands,
        };
        let allow = program_names("terminal.allowlist.commands", allow_names)?;
        let deny = program_names(
            "terminal.denylist.commands",
            raw.denylist.unwrap_or_default().commands,
        )?;
        let rules = raw.rules.unwrap_or_default();
        for rule in &rules {
            program_names("terminal.rules.command", vec![rule.command.clone()])?;
            if rule
                .deny_args
                .iter()
                .any(|p| p.split_whitespace().next().is_none())
            {
                return Err(ConfigError::Invalid {
                    key: format!("terminal.rules ({}).deny_args", rule.command),
                    message: "an empty pattern would match nothing".into(),
                });
            }
        }

        let path: Vec<PathBuf> = match raw.path {
            Some(p) => p,
            None => DEFAULT_PATH.iter().map(PathBuf::from).collect(),
        };
        for dir in &path {
            if !dir.is_absolute() {
                return Err(ConfigError::Invalid {
                    key: "terminal.path".into(),
                    message: format!("{} is not absolute", dir.display()),
                });
            }
            // A PATH entry inside the jail would let a command plant the next `ls`.
            let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            if real.starts_with(&jail_root) {
                return Err(ConfigError::InsideRoot {
                    key: "terminal.path",
                    path: dir.clone(),
                    root: jail_root.clone(),
                });
            }
        }

        let sb = raw.sandbox.unwrap_or_default();
        let read_paths = match sb.read_paths {
            Some(paths) => paths.into_iter().map(|p| self.file_path(p)).collect(),
            None => DEFAULT_READ_PATHS.iter().map(PathBuf::from).collect(),
        };
        Ok(TerminalPolicy {
            jail_root,
            limits,
            allow,
            deny,
            rules,
            examples: raw.examples.unwrap_or_default(),
            sandbox: SandboxSettings {
                mode: sb.mode.unwrap_or(SandboxMode::Enforce),
                network: sb.network.unwrap_or(false),
                read_paths,
                exec_in_jail: sb.exec_in_jail.unwrap_or(false),
                unix_sockets: sb.unix_sockets.unwrap_or(true),
            },
            path,
        })
    }

    fn files(&self, raw: RawFiles) -> Result<FilesPolicy, ConfigError> {
        let root = self
            .env_path("SAFE_MCP_WORKSPACE_ROOT")
            .or_else(|| raw.workspace_root.map(|p| self.file_path(p)))
            .ok_or(ConfigError::RootUnset {
                key: "files.workspace_root",
                env: "SAFE_MCP_WORKSPACE_ROOT",
            })?;
        let workspace_root = existing_root("files.workspace_root", &root)?;
        let mut skip = Vec::new();
        for (i, s) in raw.skip.into_iter().enumerate() {
            let layer = s.layer.ok_or_else(|| ConfigError::Invalid {
                key: format!("files.skip[{i}].layer"),
                message: "every skip rule must declare layer = \"protection\" or \"restraint\""
                    .into(),
            })?;
            if s.when.is_empty() {
                return Err(ConfigError::Invalid {
                    key: format!("files.skip[{i}].when"),
                    message: "a skip rule needs at least one condition".into(),
                });
            }
            if let Some(bad) = s
                .when
                .iter()
                .find(|w| !SKIP_CONDITIONS.contains(&w.as_str()))
            {
                return Err(ConfigError::Invalid {
                    key: format!("files.skip[{i}].when"),
                    message: format!(
                        "unknown condition {bad:?}; known: {}",
                        SKIP_CONDITIONS.join(", ")
                    ),
                });
            }
            skip.push(SkipRule {
                layer,
                when: s.when,
                reason: s.reason,
            });
        }
        let categories = raw.categories.unwrap_or_default();
        for (name, exts) in &categories {
            if name.is_empty()
                || name.contains('/')
                || name.starts_with('.')
                || name.chars().any(char::is_control)
            {
                return Err(ConfigError::Invalid {
                    key: format!("files.categories.{name}"),
                    message: "a category is a plain folder name".into(),
                });
            }
            if let Some(bad) = exts
                .iter()
                .find(|e| !e.starts_with('.') || e.len() < 2 || e.contains('/'))
            {
                return Err(ConfigError::Invalid {
                    key: format!("files.categories.{name}"),
                    message: format!("{bad:?} is not an extension like \".pdf\""),
                });
            }
        }
        let journal = raw.journal.map(|p| self.file_path(p)).ok_or_else(|| ConfigError::Invalid {
            key: "files.journal".into(),
            message: "not set: the organizer writes ahead to a journal outside the workspace, so it can always undo".into(),
        })?;
        Ok(FilesPolicy {
            workspace_root,
            journal: Some(journal),
            max_plan_moves: raw.max_plan_moves.unwrap_or(500),
            categories,
            skip,
        })
    }
}

/// Reads the HMAC key: mode 0600, at least 16 bytes, outside every root and every path a
/// command may read, so that no command can learn it.
fn hmac_key(
    path: &Path,
    roots: &[PathBuf],
    read_paths: &[PathBuf],
) -> Result<Vec<u8>, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let key = "audit_hmac_key_file";
    let invalid = |message: String| ConfigError::Invalid {
        key: key.to_owned(),
        message,
    };
    let real =
        std::fs::canonicalize(path).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    let meta = std::fs::metadata(&real).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return Err(invalid(format!(
            "{} must be a regular file with mode 0600",
            path.display()
        )));
    }
    for root in roots {
        if real.starts_with(root) {
            return Err(ConfigError::InsideRoot {
                key,
                path: path.to_path_buf(),
                root: root.clone(),
            });
        }
    }
    for readable in read_paths {
        let readable = std::fs::canonicalize(readable).unwrap_or_else(|_| readable.clone());
        if real.starts_with(&readable) {
            return Err(invalid(format!(
                "{} lies under the sandbox read path {}, where commands could read it",
                path.display(),
                readable.display()
            )));
        }
    }
    let bytes = std::fs::read(&real).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    if bytes.len() < 16 {
        return Err(invalid("the key must hold at least 16 bytes".into()));
    }
    Ok(bytes)
}

fn program_names(key: &str, names: Vec<String>) -> Result<BTreeSet<String>, ConfigError> {
    let mut set = BTreeSet::new();
    for name in names {
        if name.is_empty()
            || name.contains('/')
            || name.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ConfigError::Invalid {
                key: key.to_owned(),
                message: format!("{name:?} is not a bare program name"),
            });
        }
        set.insert(name);
    }
    Ok(set)
}

fn existing_root(key: &'static str, path: &Path) -> Result<PathBuf, ConfigError> {
    let real = std::fs::canonicalize(path)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| ConfigError::RootNotDirectory {
            key,
            path: path.to_path_buf(),
        })?;
    if real == Path::new("/") {
        return Err(ConfigError::Invalid {
            key: key.to_owned(),
            message: "the filesystem root cannot be a jail".into(),
        });
    }
    Ok(real)
}

/// Resolves `path` (whose parent must exist) and refuses it inside any root.
fn outside_roots(
    key: &'static str,
    path: &Path,
    roots: &[PathBuf],
) -> Result<PathBuf, ConfigError> {
    let normal = lexical_normalize(path);
    let (parent, name) = match (normal.parent(), normal.file_name()) {
        (Some(parent), Some(name)) => (parent, name),
        _ => {
            return Err(ConfigError::Invalid {
                key: key.to_owned(),
                message: format!("{} is not a file path", path.display()),
            });
        }
    };
    let parent = std::fs::canonicalize(parent).map_err(|e| ConfigError::Invalid {
        key: key.to_owned(),
        message: format!("directory {} is not usable: {e}", parent.display()),
    })?;
    let mut real = parent.join(name);
    if let Ok(target) = std::fs::canonicalize(&real) {
        real = target; // an existing symlink is judged by where it points
    }
    for root in roots {
        if real.starts_with(root) {
            return Err(ConfigError::InsideRoot {
                key,
                path: path.to_path_buf(),
                root: root.clone(),
            });
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("jail")).unwrap();
            std::fs::create_dir(dir.path().join("inbox")).unwrap();
            Fixture { dir }
        }
        fn load(&self, text: &str, section: Section) -> Result<Policy, ConfigError> {
            self.load_env(text, section, &no_env)
        }
        fn load_env(
            &self,
            text: &str,
            section: Section,
            env: &dyn Env,
        ) -> Result<Policy, ConfigError> {
            let path = self.dir.path().join("policy.toml");
            std::fs::write(&path, text).unwrap();
            read(Some(&path), env, section)
        }
    }

    const SECTIONED: &str = r#"
audit_log = "audit.jsonl"
[terminal]
jail_root = "jail"
[terminal.allowlist]
commands = ["ls", "git"]
[terminal.denylist]
commands = ["rm"]
[[terminal.rules]]
command = "git"
deny_args = ["push --force"]
reason = "history"
"#;

    #[test]
    fn sectioned_layout_resolves_relative_to_the_file() {
        let f = Fixture::new();
        let p = f.load(SECTIONED, Section::Terminal).unwrap();
        let t = p.terminal.unwrap();
        let base = std::fs::canonicalize(f.dir.path()).unwrap();
        assert_eq!(t.jail_root, base.join("jail"));
        assert_eq!(p.audit.log.unwrap(), base.join("audit.jsonl"));
        assert!(t.allow.contains("git") && t.deny.contains("rm"));
        assert_eq!(t.rules[0].deny_args, ["push --force"]);
        assert_eq!(t.sandbox.mode, SandboxMode::Enforce);
        assert_eq!(p.audit.fail_mode, AuditFailMode::Closed);
    }

    #[test]
    fn flat_layout_loads_as_the_terminal_section() {
        let f = Fixture::new();
        let text = "audit_log = \"a.jsonl\"\njail_root = \"jail\"\n[allowlist]\ncommands = [\"ls\"]\n[denylist]\ncommands = [\"rm\"]\n[[rules]]\ncommand = \"ls\"\ndeny_args = [\"-R\"]\n";
        let t = f.load(text, Section::Terminal).unwrap().terminal.unwrap();
        assert!(t.allow.contains("ls") && t.deny.contains("rm"));
        assert_eq!(t.rules.len(), 1);
        let mixed = format!("{text}[terminal]\njail_root = \"jail\"\n");
        assert!(matches!(
            f.load(&mixed, Section::Terminal),
            Err(ConfigError::Invalid { .. })
        ));
    }

    #[test]
    fn env_overrides() {
        let f = Fixture::new();
        let other = f.dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let other_s = other.clone().into_os_string();
        let env = move |k: &str| match k {
            "SAFE_MCP_JAIL_ROOT" => Some(other_s.clone()),
            "SAFE_MCP_ALLOW_COMMANDS" => Some("echo, cat,,".into()),
            "SAFE_MCP_AUDIT_FAIL_MODE" => Some("open".into()),
            _ => None,
        };
        let p = f.load_env(SECTIONED, Section::Terminal, &env).unwrap();
        let t = p.terminal.unwrap();
        assert_eq!(t.jail_root, std::fs::canonicalize(other).unwrap());
        assert_eq!(t.allow.iter().cloned().collect::<Vec<_>>(), ["cat", "echo"]);
        assert_eq!(p.audit.fail_mode, AuditFailMode::Open);
    }

    #[test]
    fn startup_failures() {
        let f = Fixture::new();
        assert!(matches!(
            read(None, &no_env, Section::Terminal),
            Err(ConfigError::NoPolicyPath)
        ));
        let missing = f.dir.path().join("nope.toml");
        assert!(matches!(
            read(Some(&missing), &no_env, Section::Terminal),
            Err(ConfigError::Read { .. })
        ));
        assert!(matches!(
            f.load("[terminal", Section::Terminal),
            Err(ConfigError::Parse { .. })
        ));
        let unknown =
            SECTIONED.replace("[terminal.allowlist]", "[terminal.allowlist]\ncomands = []");
        let err = f.load(&unknown, Section::Terminal).unwrap_err().to_string();
        assert!(err.contains("comands"), "{err}");
        let no_root = SECTIONED.replace("jail_root = \"jail\"", "");
        assert!(matches!(
            f.load(&no_root, Section::Terminal),
            Err(ConfigError::RootUnset { .. })
        ));
        let file_root = SECTIONED.replace("jail_root = \"jail\"", "jail_root = \"policy.toml\"");
        assert!(matches!(
            f.load(&file_root, Section::Terminal),
            Err(ConfigError::RootNotDirectory { .. })
        ));
        let inside = SECTIONED.replace("audit.jsonl", "jail/audit.jsonl");
        assert!(matches!(
            f.load(&inside, Section::Terminal),
            Err(ConfigError::InsideRoot { .. })
        ));
        let regex = format!(
            "{SECTIONED}[redaction]\nextra_patterns = [{{ name = \"x\", regex = \"(\" }}]\n"
        );
        assert!(
            f.load(&regex, Section::Terminal)
                .unwrap_err()
                .to_string()
                .contains("regex")
        );
        let unlabelled = format!(
            "{SECTIONED}[files]\nworkspace_root = \"inbox\"\n[[files.skip]]\nwhen = [\"dotfile\"]\nreason = \"x\"\n"
        );
        assert!(
            f.load(&unlabelled, Section::Files)
                .unwrap_err()
                .to_string()
                .contains("layer")
        );
        assert!(matches!(
            f.load(SECTIONED, Section::Files),
            Err(ConfigError::MissingSection("files"))
        ));
        let no_audit = SECTIONED.replace("audit_log = \"audit.jsonl\"", "");
        assert!(
            f.load(&no_audit, Section::Terminal)
                .unwrap_err()
                .to_string()
                .contains("audit_log")
        );
        let slash = SECTIONED.replace("\"ls\", \"git\"", "\"/bin/ls\"");
        assert!(
            f.load(&slash, Section::Terminal)
                .unwrap_err()
                .to_string()
                .contains("bare program")
        );
        let jail_path = SECTIONED.replace(
            "[terminal.allowlist]",
            "path = [\"jail\"]\n[terminal.allowlist]",
        );
        assert!(f.load(&jail_path, Section::Terminal).is_err());
    }

    #[test]
    fn files_starts_without_terminal() {
        let f = Fixture::new();
        let text =
            "audit_log = \"a.jsonl\"\n[files]\nworkspace_root = \"inbox\"\njournal = \"j.json\"\n";
        let p = f.load(text, Section::Files).unwrap();
        assert!(p.terminal.is_none());
        assert!(p.files.unwrap().journal.is_some());
        let bad = text.replace("\"j.json\"", "\"inbox/j.json\"");
        assert!(matches!(
            f.load(&bad, Section::Files),
            Err(ConfigError::InsideRoot { .. })
        ));
    }
}
