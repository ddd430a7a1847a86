//! The serde shapes of the policy file, exactly as written: every key optional, nothing
//! resolved.
//!
//! Owns which keys exist: each struct refuses unknown fields, so a misspelt key is a load
//! error, never silently ignored. The older flat layout (the terminal section's keys at top
//! level) is accepted here and folded into `[terminal]` by [`super::load`]. It must never
//! validate, resolve a path or read the environment: that is [`super::load`]'s job.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use safe_mcp_rules::config::types::{
    ArgRule, AuditFailMode, ExtraPattern, Limits, NamespaceMode, PolicyExamples, SandboxMode,
    SkipLayer,
};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) audit_log: Option<PathBuf>,
    pub(super) audit_fail_mode: Option<AuditFailMode>,
    pub(super) audit_max_bytes: Option<u64>,
    pub(super) audit_keep: Option<usize>,
    pub(super) audit_hmac_key_file: Option<PathBuf>,
    pub(super) server_id: Option<String>,
    pub(super) audit: Option<RawAudit>,
    pub(super) http: Option<RawHttp>,
    pub(super) redaction: Option<RawRedaction>,
    pub(super) terminal: Option<RawTerminal>,
    pub(super) files: Option<RawFiles>,
    /// `[gateway]`, read by [`super::gateway`] from the document itself.
    pub(super) gateway: Option<toml::Value>,
    // The older flat layout: the terminal section's keys at top level.
    pub(super) jail_root: Option<PathBuf>,
    pub(super) limits: Option<Limits>,
    pub(super) allowlist: Option<RawAllowlist>,
    pub(super) denylist: Option<RawNames>,
    pub(super) rules: Option<Vec<ArgRule>>,
    pub(super) sandbox: Option<RawSandbox>,
    pub(super) path: Option<Vec<PathBuf>>,
    pub(super) examples: Option<Vec<PolicyExamples>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    pub(super) allowed_origins: Option<Vec<String>>,
    pub(super) allowed_hosts: Option<Vec<String>>,
    pub(super) max_body_bytes: Option<usize>,
    pub(super) max_mcp_sessions: Option<usize>,
    pub(super) max_mcp_sessions_per_caller: Option<usize>,
    pub(super) max_requests: Option<usize>,
    pub(super) max_requests_per_caller: Option<usize>,
    pub(super) auth: Option<RawHttpAuth>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttpAuth {
    pub(super) mode: Option<String>,
    pub(super) issuer: Option<String>,
    pub(super) audience: Option<String>,
    pub(super) jwks_file: Option<PathBuf>,
    pub(super) jwks_url: Option<String>,
    pub(super) jwks_ca_file: Option<PathBuf>,
    pub(super) required_scopes: Option<Vec<String>>,
    pub(super) leeway_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    pub(super) ship: Option<RawShip>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShip {
    pub(super) otlp_http: Option<String>,
    pub(super) syslog_tcp: Option<String>,
    pub(super) on_failure: Option<safe_mcp_rules::config::settings::ShipFailure>,
    pub(super) spool_dir: Option<PathBuf>,
    pub(super) checkpoint_seconds: Option<u64>,
    pub(super) format: Option<safe_mcp_rules::config::settings::ShipFormat>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawRedaction {
    pub(super) enabled: Option<bool>,
    pub(super) entropy_fallback: Option<bool>,
    pub(super) extra_patterns: Vec<ExtraPattern>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTerminal {
    pub(super) examples: Option<Vec<PolicyExamples>>,
    pub(super) jail_root: Option<PathBuf>,
    pub(super) limits: Option<Limits>,
    pub(super) allowlist: Option<RawAllowlist>,
    pub(super) denylist: Option<RawNames>,
    pub(super) rules: Option<Vec<ArgRule>>,
    pub(super) sandbox: Option<RawSandbox>,
    pub(super) path: Option<Vec<PathBuf>>,
    pub(super) env: Option<RawEnv>,
    pub(super) write_paths: Option<Vec<PathBuf>>,
    pub(super) profiles: Option<Vec<String>>,
    pub(super) cache_dir: Option<PathBuf>,
    pub(super) shared_cache: Option<bool>,
    pub(super) protected_paths: Option<Vec<String>>,
    pub(super) files: Option<safe_mcp_rules::config::settings::FileToolSettings>,
    pub(super) unprotected_paths: Option<Vec<String>>,
    pub(super) drop_profile_rules: Option<Vec<String>>,
    pub(super) sessions: Option<safe_mcp_rules::config::types::SessionSettings>,
    pub(super) network: Option<RawNetwork>,
    pub(super) approvals: Option<RawApprovals>,
    pub(super) audit: Option<RawTerminalAudit>,
    pub(super) credentials: Option<Vec<RawCredential>>,
}

/// `[terminal.audit]`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTerminalAudit {
    pub(super) exec_log: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApprovals {
    pub(super) mode: Option<safe_mcp_rules::config::settings::ApprovalMode>,
    pub(super) url_base: Option<String>,
    pub(super) timeout_seconds: Option<u64>,
    pub(super) ticket_seconds: Option<u64>,
    pub(super) state_key_file: Option<PathBuf>,
    pub(super) scopes_file: Option<PathBuf>,
    pub(super) session_scope_seconds: Option<u64>,
    pub(super) rule_scope_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    pub(super) mode: Option<crate::egress::NetworkMode>,
    pub(super) allow_domains: Option<Vec<String>>,
    pub(super) deny_domains: Option<Vec<String>>,
    pub(super) allow_private: Option<bool>,
    pub(super) hosts: Option<BTreeMap<String, Vec<String>>>,
    pub(super) listen_ports: Option<Vec<u16>>,
    pub(super) rules: Option<Vec<RawHostRule>>,
    pub(super) upstream_ca_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnv {
    #[serde(default)]
    pub(super) pass: Vec<String>,
    #[serde(default)]
    pub(super) set: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) prefix_allow: Vec<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNames {
    #[serde(default)]
    pub(super) commands: Vec<String>,
}

/// `[terminal.allowlist]`: the commands, and the helpers every command may execute.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAllowlist {
    #[serde(default)]
    pub(super) commands: Vec<String>,
    #[serde(default)]
    pub(super) helpers: Vec<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    pub(super) mode: Option<SandboxMode>,
    pub(super) network: Option<bool>,
    pub(super) read_paths: Option<Vec<PathBuf>>,
    pub(super) exec_in_jail: Option<bool>,
    pub(super) unix_sockets: Option<bool>,
    pub(super) namespaces: Option<NamespaceMode>,
    pub(super) exec_allowlist: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFiles {
    pub(super) workspace_root: Option<PathBuf>,
    pub(super) journal: Option<PathBuf>,
    pub(super) max_plan_moves: Option<usize>,
    pub(super) categories: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    pub(super) skip: Vec<RawSkip>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSkip {
    pub(super) layer: Option<SkipLayer>,
    /// Read as text and parsed into [`safe_mcp_rules::config::types::SkipCondition`] by the loader, so that a
    /// misspelt condition is reported with the rule's index and every known name.
    #[serde(default)]
    pub(super) when: Vec<String>,
    #[serde(default)]
    pub(super) reason: String,
}

/// One `[[terminal.credentials]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCredential {
    pub(super) name: String,
    /// `"token"` (the default: a value the proxy adds to requests) or `"ssh"` (a key the
    /// server's own agent holds).
    pub(super) kind: Option<String>,
    pub(super) from: Option<String>,
    #[serde(default)]
    pub(super) hosts: Vec<String>,
    pub(super) inject: Option<RawInject>,
    /// `kind = "ssh"`: the private key's file, and what the agent may sign with it.
    pub(super) key_file: Option<PathBuf>,
    pub(super) passphrase_file: Option<PathBuf>,
    pub(super) sign: Option<bool>,
    pub(super) known_hosts: Option<PathBuf>,
    pub(super) agent: Option<PathBuf>,
    pub(super) fingerprint: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInject {
    pub(super) header: String,
    pub(super) format: String,
}

/// One `[[terminal.network.rules]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHostRule {
    pub(super) host: String,
    pub(super) methods: Vec<String>,
    pub(super) paths: Vec<String>,
}
