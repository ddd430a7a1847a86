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

use super::checks::{existing_root, outside_roots, program_names, secret_key, union};
use super::env::Env;
use super::error::ConfigError;
use super::raw::{RawFiles, RawPolicy, RawRedaction, RawTerminal};
use super::sections::{
    approval_settings, environment, http_settings, network_policy, ship_settings,
};
use super::types::{
    AuditFailMode, AuditSettings, DEFAULT_PATH, DEFAULT_READ_PATHS, ENV_LEGACY_POLICY_FILE,
    ENV_POLICY_FILE, FilesPolicy, NamespaceMode, Policy, RedactionSettings, SandboxMode,
    SandboxSettings, Section, SkipCondition, SkipRule, TerminalPolicy,
};
use super::{profiles, project};
use crate::egress::NetworkMode;
use crate::paths::lexical_normalize;

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
                env: None,
                write_paths: None,
                profiles: None,
                cache_dir: None,
                shared_cache: None,
                protected_paths: None,
                unprotected_paths: None,
                drop_profile_rules: None,
                files: None,
                audit: None,
                sessions: None,
                network: None,
                approvals: None,
                credentials: None,
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

        let raw_state_key = raw
            .terminal
            .as_ref()
            .and_then(|t| t.approvals.as_ref())
            .and_then(|a| a.state_key_file.clone());
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

        // What commands may read must not hold the trail, its spool or the journal.
        if let Some(t) = &terminal {
            let kept = log
                .iter()
                .map(|l| ("audit_log", l))
                .chain(spool.iter().map(|s| ("audit.ship.spool_dir", s)))
                .chain(
                    files
                        .iter()
                        .filter_map(|f| f.journal.as_ref().map(|j| ("files.journal", j))),
                );
            for (what, path) in kept {
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
        }

        // What commands may write must not hold the trail, the journal, the policy, or
        // another server's root. (The HMAC key is checked below, once it is read.)
        if let Some(t) = &terminal {
            let mut kept: Vec<(&str, &Path)> = vec![("policy file", source)];
            kept.extend(log.iter().map(|l| ("audit_log", l.as_path())));
            kept.extend(spool.iter().map(|s| ("audit.ship.spool_dir", s.as_path())));
            kept.extend(
                files
                    .iter()
                    .filter_map(|f| f.journal.as_deref().map(|j| ("files.journal", j))),
            );
            let roots: Vec<(&str, &Path)> = files
                .iter()
                .map(|f| ("files.workspace_root", f.workspace_root.as_path()))
                .collect();
            super::writable::keep_out(&t.write_paths, &kept, &roots)?;
        }

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
                let key = secret_key("audit_hmac_key_file", &p, &roots, &read_paths)?;
                if let Some(t) = &terminal {
                    super::writable::keep_out(&t.write_paths, &[("HMAC key", &p)], &[])?;
                }
                (Some(key), Some(p))
            }
            None => (None, None),
        };
        // The approvals' sealing key, shared by a fleet's servers: read as the HMAC key is.
        if let Some(t) = terminal.as_mut()
            && let Some(p) = raw_state_key.map(|p| self.file_path(p))
        {
            let key = "terminal.approvals.state_key_file";
            let bytes = secret_key(key, &p, &roots, &t.sandbox.read_paths)?;
            super::writable::keep_out(&t.write_paths, &[("approval state key", &p)], &[])?;
            t.approvals.state_key = Some(super::settings::StateKey { bytes, file: p });
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
        // The profiles first: what they add then meets the same checks as the operator's own
        // keys, and the operator's own keys win wherever both say something.
        let cache_dir = raw
            .cache_dir
            .clone()
            .map(|p| self.file_path(p))
            .or_else(|| profiles::default_cache_dir(self.env));
        let mut expansion = profiles::expand(
            raw.profiles.as_deref().unwrap_or_default(),
            self.env,
            profiles::CacheScope {
                cache_dir: cache_dir.as_deref(),
                jail_root: &jail_root,
                shared: raw.shared_cache.unwrap_or(false),
            },
        )?;

        let mut limits = raw.limits.unwrap_or_default();
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
        if limits.max_output_total_bytes != 0
            && limits.max_output_total_bytes < limits.max_output_bytes as u64
        {
            return Err(ConfigError::Invalid {
                key: "terminal.limits.max_output_total_bytes".into(),
                message: format!(
                    "must be 0 (no bound) or at least max_output_bytes ({})",
                    limits.max_output_bytes
                ),
            });
        }

        let mut allow_names: Vec<String> = match self.env.var("SAFE_MCP_ALLOW_COMMANDS") {
            Some(v) => v
                .to_string_lossy()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            None => raw
                .allowlist
                .as_ref()
                .map_or(Vec::new(), |a| a.commands.clone()),
        };
        let helpers = raw.allowlist.map_or(Vec::new(), |a| a.helpers);
        allow_names.extend(expansion.commands.iter().cloned());
        let allow = program_names("terminal.allowlist.commands", allow_names)?;
        let mut deny_names = raw.denylist.unwrap_or_default().commands;
        // Rules combine: the profiles' rules for a program stay beside the operator's (every
        // deny_args holds; the strictest wins), unless the operator drops them by name.
        let mut rules = raw.rules.unwrap_or_default();
        let dropped_profile_rules = raw.drop_profile_rules.unwrap_or_default();
        for name in &dropped_profile_rules {
            if !expansion.rules.iter().any(|r| &r.command == name) {
                return Err(ConfigError::Invalid {
                    key: "terminal.drop_profile_rules".into(),
                    message: format!(
                        "no profile in force has a rule for {name:?}; the profiles' rules are for {}",
                        expansion
                            .rules
                            .iter()
                            .map(|r| r.command.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        for rule in &expansion.rules {
            if !dropped_profile_rules.contains(&rule.command) {
                rules.push(rule.clone());
            }
        }
        let mut protected = crate::protected::ProtectedPaths::build(
            raw.protected_paths.as_deref().unwrap_or_default(),
            crate::protected::Source::Operator,
            raw.unprotected_paths.as_deref().unwrap_or_default(),
        )
        .map_err(|message| ConfigError::Invalid {
            key: "terminal.protected_paths".into(),
            message,
        })?;
        // Last, the repository's own file, which may only narrow all of the above.
        let project = match project::read(&jail_root, &limits)? {
            Some(narrowing) => {
                limits = narrowing.limits;
                deny_names.extend(narrowing.removed);
                rules.extend(narrowing.rules);
                protected
                    .add(&narrowing.protected, crate::protected::Source::Project)
                    .map_err(|message| ConfigError::Invalid {
                        key: format!("{}: terminal.protected_paths", project::FILE_NAME),
                        message,
                    })?;
                Some(narrowing.report)
            }
            None => None,
        };
        let deny = program_names("terminal.denylist.commands", deny_names)?;
        super::checks::helper_entries("terminal.allowlist.helpers", &helpers, &jail_root, &deny)?;
        for (command, known) in super::profiles::KNOWN_HELPERS {
            if allow.contains(*command) {
                let known = known.iter().map(|h| (*h).to_owned()).collect();
                expansion.helpers.push(((*command).to_owned(), known));
            }
        }
        // A helper runs without argument rules: a program that has some (git with deny_args)
        // is never one. The operator's is a load error; a profile's is left out.
        let ruled: Vec<&str> = rules
            .iter()
            .filter(|r| r.binds_arguments())
            .map(|r| r.command.as_str())
            .collect();
        if let Some(h) = helpers.iter().find(|h| ruled.contains(&h.as_str())) {
            return Err(ConfigError::Invalid {
                key: "terminal.allowlist.helpers".into(),
                message: format!(
                    "{h:?} has argument rules, which a helper would run without; it is reached through the server when a command starts it"
                ),
            });
        }
        // A profile's helper the operator's denylist names is left out, not a load error:
        // the operator's word wins, and the tool that needed it says so when it fails.
        for (command, own) in &mut expansion.helpers {
            own.retain(|h| !deny.contains(h) && !ruled.contains(&h.as_str()));
            super::checks::helper_entries(
                &format!("terminal.profiles ({command} helpers)"),
                own,
                &jail_root,
                &deny,
            )?;
        }
        for rule in &rules {
            program_names("terminal.rules.command", vec![rule.command.clone()])?;
            for (key, patterns) in [
                ("deny_args", &rule.deny_args),
                ("confirm_args", &rule.confirm_args),
            ] {
                if patterns
                    .iter()
                    .any(|p| p.split_whitespace().next().is_none())
                {
                    return Err(ConfigError::Invalid {
                        key: format!("terminal.rules ({}).{key}", rule.command),
                        message: "an empty pattern would match nothing".into(),
                    });
                }
            }
        }

        // The operator's own `path` comes first; without one, the profiles' toolchains come
        // before the system's.
        let own_path = raw.path.is_some();
        let base_path: Vec<PathBuf> = raw
            .path
            .unwrap_or_else(|| DEFAULT_PATH.iter().map(PathBuf::from).collect());
        // A discovered directory the PATH already has stays where it is.
        for report in &mut expansion.reports {
            report.path.retain(|p| !base_path.contains(p));
        }
        let discovered = expansion
            .reports
            .iter()
            .flat_map(|r| r.path.iter().cloned());
        let path = if own_path {
            union(base_path, discovered)
        } else {
            union(discovered.collect(), base_path)
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

        // git starts its own helpers from its exec-path (a local remote, HTTPS): allowlisted
        // with or without the git profile, git's stages may execute them. The git profile's
        // discovery has asked already when it found the directory; it is not asked twice.
        let discovered = expansion
            .helpers
            .iter()
            .any(|(c, h)| c == "git" && h.iter().any(|d| d.starts_with('/')));
        if allow.contains("git") && !deny.contains("git") && !discovered {
            let git = crate::programs::find_on(path.iter().map(PathBuf::as_path), "git");
            if let Some(dir) = git.and_then(|g| super::discover::git_exec_path(&g).ok()) {
                let dir = dir.to_string_lossy().into_owned();
                super::checks::helper_entries(
                    "git's exec-path",
                    std::slice::from_ref(&dir),
                    &jail_root,
                    &deny,
                )?;
                expansion.helpers.push(("git".to_owned(), vec![dir]));
            }
        }
        let sb = raw.sandbox.unwrap_or_default();
        let network = network_policy(raw.network.unwrap_or_default(), sb.network)?;
        let offline = network.mode == crate::egress::NetworkMode::Off;
        let open = network.mode == NetworkMode::Open;
        let read_paths: Vec<PathBuf> = match sb.read_paths {
            Some(paths) => paths.into_iter().map(|p| self.file_path(p)).collect(),
            None => DEFAULT_READ_PATHS.iter().map(PathBuf::from).collect(),
        };
        // A discovered read path beneath one the policy has already is not added again.
        for report in &mut expansion.reports {
            report
                .read_paths
                .retain(|p| !read_paths.iter().any(|r| p.starts_with(r)));
        }
        let discovered = expansion
            .reports
            .iter()
            .flat_map(|r| r.read_paths.iter().cloned())
            .collect::<Vec<_>>();
        let read_paths = union(read_paths, discovered);
        // A read path in the jail is a path the model can replace with a symlink to anything
        // (and it would be executable there); `/` or `/proc` would show the whole machine.
        for p in &read_paths {
            let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if real.starts_with(&jail_root) {
                return Err(ConfigError::InsideRoot {
                    key: "terminal.sandbox.read_paths",
                    path: p.clone(),
                    root: jail_root.clone(),
                });
            }
            if real == Path::new("/") || real.starts_with("/proc") {
                return Err(ConfigError::Invalid {
                    key: "terminal.sandbox.read_paths".into(),
                    message: format!(
                        "{} would show commands the whole machine; name the directories they need",
                        p.display()
                    ),
                });
            }
        }
        let home = self.env.var("HOME").map(PathBuf::from);
        let own = super::writable::resolve(
            super::writable::WRITE_PATHS,
            raw.write_paths
                .unwrap_or_default()
                .into_iter()
                .map(|p| self.file_path(p))
                .collect(),
            &jail_root,
            &path,
            home.as_deref(),
            super::writable::Made::Already,
        )?;
        // A refusal of a profile's cache names the key that moves it. Caches may not exist
        // yet: a starting server makes them.
        let caches = super::writable::resolve(
            "terminal.cache_dir",
            expansion.write_paths.clone(),
            &jail_root,
            &path,
            home.as_deref(),
            super::writable::Made::AtStart,
        )?;
        let write_paths = union(own, caches);
        let files = raw.files.unwrap_or_default();
        // Confirm paths are held from commands as protected paths are; the file tools write
        // them after a person's approval.
        protected
            .add_confirm(&files.confirm_paths)
            .map_err(|message| ConfigError::Invalid {
                key: "terminal.files.confirm_paths".into(),
                message,
            })?;
        if files.max_file_bytes == 0 || files.max_file_bytes > 64 << 20 {
            return Err(ConfigError::Invalid {
                key: "terminal.files.max_file_bytes".into(),
                message: "must be between 1 and 67108864".into(),
            });
        }
        Ok(TerminalPolicy {
            exec_log: raw.audit.and_then(|a| a.exec_log).unwrap_or(false),
            jail_root,
            write_paths,
            protected,
            dropped_profile_rules,
            files,
            caches: std::mem::take(&mut expansion.caches),
            profiles: expansion.reports,
            project,
            sessions: {
                let s = raw.sessions.unwrap_or_default();
                let bad = |key: &str, message: &str| ConfigError::Invalid {
                    key: format!("terminal.sessions.{key}"),
                    message: message.to_owned(),
                };
                if s.max_sessions > 64 {
                    return Err(bad("max_sessions", "must be at most 64"));
                }
                if s.max_sessions_per_caller
                    .is_some_and(|n| n == 0 || n > s.max_sessions)
                {
                    return Err(bad(
                        "max_sessions_per_caller",
                        "must be at least 1 and at most max_sessions",
                    ));
                }
                if s.idle_timeout_seconds == 0 || s.max_seconds == 0 || s.max_seconds > 7 * 86400 {
                    return Err(bad(
                        "max_seconds",
                        "idle_timeout_seconds and max_seconds must be positive, max_seconds at most a week",
                    ));
                }
                if s.buffer_bytes < 4096 || s.buffer_bytes > 64 << 20 {
                    return Err(bad("buffer_bytes", "must be between 4096 and 67108864"));
                }
                if s.expose_ports
                    .is_some_and(|[first, last]| first == 0 || first > last)
                {
                    return Err(bad(
                        "expose_ports",
                        "must be [first, last] with 0 < first <= last",
                    ));
                }
                if s.max_exposed > 64 {
                    return Err(bad("max_exposed", "must be at most 64"));
                }
                s
            },
            network,
            credentials: Default::default(),
            approvals: approval_settings(raw.approvals.unwrap_or_default())?,
            limits,
            allow,
            deny,
            rules,
            examples: raw.examples.unwrap_or_default(),
            sandbox: SandboxSettings {
                mode: sb.mode.unwrap_or(SandboxMode::Enforce),
                network: open,
                read_paths,
                exec_in_jail: sb.exec_in_jail.unwrap_or(expansion.exec_in_jail),
                unix_sockets: sb.unix_sockets.unwrap_or(true),
                namespaces: sb.namespaces.unwrap_or(NamespaceMode::Auto),
                read_only_files: expansion.read_only_files,
                shared_cache: raw.shared_cache.unwrap_or(false),
                exec: super::types::ExecSettings {
                    enabled: sb.exec_allowlist.unwrap_or(true),
                    helpers,
                    by_command: std::mem::take(&mut expansion.helpers),
                },
            },
            path,
            env: environment({
                let mut env = raw.env.unwrap_or_default();
                let offline = if offline {
                    expansion.env_offline
                } else {
                    Vec::new()
                };
                for (name, value) in expansion.env_set.into_iter().chain(offline) {
                    env.set.entry(name).or_insert(value);
                }
                env
            })?,
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
