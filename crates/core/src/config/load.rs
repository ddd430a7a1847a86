//! Turning the raw file into a validated [`Policy`]: paths, roots, environment overrides and
//! the older flat layout.
//!
//! Owns every check of what the file says about itself, applying those of `checks.rs`
//! (single values) and `sections.rs` (one section each): relative paths resolve against the
//! policy file's directory (an environment value against the cwd), roots must be existing
//! directories other than `/`, the audit log, the journal and the HMAC key must lie outside
//! every root, program names are bare, operator regexes compile, every skip rule names its
//! layer and known conditions. It must never run a command or a policy example (that is
//! [`crate::load`], above), never import a module above config's floor (`policy`, `audit`,
//! `terminal`, …), and never guess a path the policy and environment did not give.

use std::path::{Path, PathBuf};

use super::checks::{existing_root, outside_roots, secret_key};
use super::env::Env;
use super::error::ConfigError;
use super::raw::{RawFiles, RawPolicy, RawRedaction, RawTerminal};
use super::sections::{http_settings, ship_settings};
use crate::paths::lexical_normalize;
use safe_mcp_rules::config::types::{
    AuditFailMode, AuditSettings, ENV_LEGACY_POLICY_FILE, ENV_POLICY_FILE, FilesPolicy, Policy,
    RedactionSettings, Section, SkipCondition, SkipRule, TerminalPolicy,
};

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
    let builder = Builder { base, env };
    let has_gateway = raw.gateway.is_some();
    let mut policy = builder.rebuild(raw, source, section)?;
    if has_gateway && section != Section::Files {
        // Read again as a table: each server's policy is this document with its
        // `[terminal]` narrowed to the server's entry.
        let doc: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: source.to_path_buf(),
            message: e.to_string(),
        })?;
        let build = |raw| builder.rebuild(raw, source, Section::Terminal);
        policy.gateway = super::gateway::servers(&doc, &build)?;
        super::gateway::against_terminal(&policy, &policy.gateway)?;
    }
    Ok(policy)
}

pub(super) struct Builder<'a> {
    base: PathBuf,
    pub(super) env: &'a dyn Env,
}

impl Builder<'_> {
    /// Builds `raw` as this builder would, leaving the builder for another document (a
    /// gateway server's, [`super::gateway`]).
    pub(super) fn rebuild(
        &self,
        raw: RawPolicy,
        source: &Path,
        section: Section,
    ) -> Result<Policy, ConfigError> {
        Builder {
            base: self.base.clone(),
            env: self.env,
        }
        .build(raw, source, section)
    }

    pub(super) fn file_path(&self, p: PathBuf) -> PathBuf {
        if p.is_absolute() {
            p
        } else {
            self.base.join(p)
        }
    }

    /// An env value names a path relative to the process's cwd, as any shell user expects.
    pub(super) fn env_path(&self, name: &str) -> Option<PathBuf> {
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
        unflatten(&mut raw)?;
        let redaction = self.redaction(raw.redaction.unwrap_or_default())?;
        let fail_mode = self.fail_mode(raw.audit_fail_mode)?;
        let audit_log = self
            .env_path("SAFE_MCP_AUDIT_LOG")
            .or_else(|| raw.audit_log.map(|p| self.file_path(p)));
        let raw_state_key = raw
            .terminal
            .as_ref()
            .and_then(|t| t.approvals.as_ref())
            .and_then(|a| a.state_key_file.clone());
        let raw_scopes_file = raw
            .terminal
            .as_ref()
            .and_then(|t| t.approvals.as_ref())
            .and_then(|a| a.scopes_file.clone());
        let raw_credentials = raw.terminal.as_mut().map(super::credentials::take);
        let mut terminal = match (raw.terminal, section) {
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

        let ship = match raw.audit.and_then(|a| a.ship) {
            Some(ship) => Some(ship_settings(
                ship.spool_dir.clone().map(|p| self.file_path(p)),
                ship,
                &roots,
            )?),
            None => None,
        };
        // Records waiting to be shipped are the trail too: held to the same places.
        let spool = ship.as_ref().map(|s| {
            std::fs::canonicalize(&s.spool_dir).unwrap_or_else(|_| lexical_normalize(&s.spool_dir))
        });

        if let Some(t) = &terminal {
            let journal = files.as_ref().and_then(|f| f.journal.as_deref());
            let trail = Trail {
                log: log.as_deref(),
                spool: spool.as_deref(),
                journal,
            };
            keep_trail_from_commands(t, &trail, source, files.as_ref())?;
        }

        let (keep, max_bytes) = rotation(raw.audit_keep, raw.audit_max_bytes)?;
        let (hmac_key, hmac_key_file) = self.secret_keys(
            raw.audit_hmac_key_file,
            raw_state_key,
            terminal.as_mut(),
            &roots,
        )?;
        if let Some(t) = terminal.as_mut() {
            t.approvals.scopes_file = Some(self.scopes_file(raw_scopes_file, source, t, &roots)?);
        }
        if let (Some(t), Some(c)) = (terminal.as_mut(), raw_credentials) {
            let var = |name: &str| self.env.var(name);
            t.credentials = super::credentials::read(c, t, &roots, var, |p| self.file_path(p))?;
        }
        Ok(Policy {
            source: source.to_path_buf(),
            audit: AuditSettings {
                log,
                fail_mode,
                max_bytes,
                keep,
                hmac_key,
                hmac_key_file,
                ship,
                server_id: super::checks::server_id(
                    self.env.var("SAFE_MCP_SERVER_ID"),
                    raw.server_id,
                )?,
            },
            http: http_settings(raw.http.unwrap_or_default(), |p| self.file_path(p))?,
            redaction,
            terminal,
            files,
            gateway: Vec::new(),
        })
    }

    /// The trail's HMAC key and the approvals' sealing key (shared by a fleet's servers),
    /// each read from a file out of every root and out of the commands' reach: the HMAC
    /// key and its file; the sealing key goes into the terminal's approval settings.
    fn secret_keys(
        &self,
        hmac_key_file: Option<PathBuf>,
        state_key_file: Option<PathBuf>,
        mut terminal: Option<&mut TerminalPolicy>,
        roots: &[PathBuf],
    ) -> Result<(Option<Vec<u8>>, Option<PathBuf>), ConfigError> {
        let hmac = match hmac_key_file {
            Some(p) => {
                let p = self.file_path(p);
                let read_paths: Vec<PathBuf> = terminal
                    .as_ref()
                    .map(|t| t.sandbox.read_paths.clone())
                    .unwrap_or_default();
                let key = secret_key("audit_hmac_key_file", &p, roots, &read_paths)?;
                if let Some(t) = &terminal {
                    super::writable::keep_out(&t.write_paths, &[("HMAC key", &p)], &[])?;
                }
                (Some(key), Some(p))
            }
            None => (None, None),
        };
        if let Some(t) = terminal.as_mut()
            && let Some(p) = state_key_file.map(|p| self.file_path(p))
        {
            let key = "terminal.approvals.state_key_file";
            let bytes = secret_key(key, &p, roots, &t.sandbox.read_paths)?;
            super::writable::keep_out(&t.write_paths, &[("approval state key", &p)], &[])?;
            t.approvals.state_key =
                Some(safe_mcp_rules::config::settings::StateKey { bytes, file: p });
        }
        Ok(hmac)
    }

    /// Where the rules a person granted are kept (`[terminal.approvals] scopes_file`):
    /// beside the policy unless set, and never where a command or a file tool could write.
    fn scopes_file(
        &self,
        raw: Option<PathBuf>,
        source: &Path,
        terminal: &TerminalPolicy,
        roots: &[PathBuf],
    ) -> Result<PathBuf, ConfigError> {
        let file = match raw {
            Some(p) => self.file_path(p),
            None => {
                let mut beside = source.as_os_str().to_owned();
                beside.push(".scopes.json");
                PathBuf::from(beside)
            }
        };
        let file = outside_roots("terminal.approvals.scopes_file", &file, roots)?;
        super::writable::keep_out(&terminal.write_paths, &[("approvals file", &file)], &[])?;
        Ok(file)
    }

    /// `SAFE_MCP_AUDIT_FAIL_MODE` over the policy's `audit_fail_mode`; closed by default.
    fn fail_mode(&self, own: Option<AuditFailMode>) -> Result<AuditFailMode, ConfigError> {
        match self.env.var("SAFE_MCP_AUDIT_FAIL_MODE") {
            Some(v) => match v.to_str() {
                Some("closed") => Ok(AuditFailMode::Closed),
                Some("open") => Ok(AuditFailMode::Open),
                _ => Err(ConfigError::Invalid {
                    key: "SAFE_MCP_AUDIT_FAIL_MODE".into(),
                    message: "must be \"closed\" or \"open\"".into(),
                }),
            },
            None => Ok(own.unwrap_or(AuditFailMode::Closed)),
        }
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
            let when = s
                .when
                .iter()
                .map(|w| w.parse::<SkipCondition>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| ConfigError::UnknownCondition {
                    key: format!("files.skip[{i}].when"),
                    error,
                })?;
            skip.push(SkipRule {
                layer,
                when,
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

/// The older flat layout (top-level `jail_root`, `[allowlist]`, …) moved into `[terminal]`;
/// a policy may not mix the two.
fn unflatten(raw: &mut RawPolicy) -> Result<(), ConfigError> {
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
            ..RawTerminal::default()
        });
    }
    Ok(())
}

/// Where the trail lives: the log, the spool of records waiting to be shipped, the files
/// server's journal.
struct Trail<'a> {
    log: Option<&'a Path>,
    spool: Option<&'a Path>,
    journal: Option<&'a Path>,
}

/// What commands may read must not hold the trail; what they may write must not hold the
/// trail, the policy, or the files server's root. (The HMAC key is checked once it is read.)
fn keep_trail_from_commands(
    t: &TerminalPolicy,
    trail: &Trail<'_>,
    source: &Path,
    files: Option<&FilesPolicy>,
) -> Result<(), ConfigError> {
    let kept: Vec<(&str, &Path)> = [
        ("audit_log", trail.log),
        ("audit.ship.spool_dir", trail.spool),
        ("files.journal", trail.journal),
    ]
    .into_iter()
    .filter_map(|(what, path)| path.map(|p| (what, p)))
    .collect();
    for (what, path) in &kept {
        let readable = t.sandbox.read_paths.iter().find(|rp| {
            let real = std::fs::canonicalize(rp).unwrap_or_else(|_| (*rp).clone());
            path.starts_with(real)
        });
        if let Some(rp) = readable {
            return Err(ConfigError::Invalid {
                key: "terminal.sandbox.read_paths".into(),
                message: format!(
                    "{} lets commands read the {what} {}; keep it outside every read path",
                    rp.display(),
                    path.display()
                ),
            });
        }
    }
    let mut unwritable = vec![("policy file", source)];
    unwritable.extend(kept);
    let roots: Vec<(&str, &Path)> = files
        .iter()
        .map(|f| ("files.workspace_root", f.workspace_root.as_path()))
        .collect();
    super::writable::keep_out(&t.write_paths, &unwritable, &roots)
}

/// `audit_keep` (1 to 1000, 5 by default) and `audit_max_bytes` (0, or at least 4096).
fn rotation(keep: Option<usize>, max_bytes: Option<u64>) -> Result<(usize, u64), ConfigError> {
    let keep = keep.unwrap_or(5);
    if keep == 0 || keep > 1000 {
        return Err(ConfigError::Invalid {
            key: "audit_keep".into(),
            message: "must be between 1 and 1000".into(),
        });
    }
    let max_bytes = max_bytes.unwrap_or(64 << 20);
    if max_bytes != 0 && max_bytes < 4096 {
        return Err(ConfigError::Invalid {
            key: "audit_max_bytes".into(),
            message: "must be 0 (never rotate) or at least 4096".into(),
        });
    }
    Ok((keep, max_bytes))
}
