//! Turning the raw file into a validated [`Policy`]: paths, roots, environment overrides and
//! the older flat layout.
//!
//! Owns every check of what the file says about itself: relative paths resolve against the
//! policy file's directory (an environment value against the cwd), roots must be existing
//! directories other than `/`, the audit log, the journal and the HMAC key must lie outside
//! every root, program names are bare, operator regexes compile, every skip rule names its
//! layer and known conditions. It must never run a command or a policy example (that is
//! [`crate::load`], above), never import `policy`, `audit`, `jail`, `terminal` or `tools`, and
//! never guess a path the policy and environment did not give.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::raw::{RawFiles, RawPolicy, RawRedaction, RawTerminal};
use super::{
    AuditFailMode, AuditSettings, ConfigError, DEFAULT_PATH, DEFAULT_READ_PATHS,
    ENV_LEGACY_POLICY_FILE, ENV_POLICY_FILE, EnvSettings, FilesPolicy, NamespaceMode, Policy,
    RedactionSettings, SandboxMode, SandboxSettings, Section, SkipCondition, SkipRule,
    TerminalPolicy,
};
use super::{profiles, project};
use crate::egress::{DomainRule, NetworkMode, NetworkPolicy};
use crate::paths::lexical_normalize;

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
                env: None,
                write_paths: None,
                profiles: None,
                cache_dir: None,
                shared_cache: None,
                protected_paths: None,
                unprotected_paths: None,
                files: None,
                sessions: None,
                network: None,
                approvals: None,
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
                let key = hmac_key(&p, &roots, &read_paths)?;
                if let Some(t) = &terminal {
                    super::writable::keep_out(&t.write_paths, &[("HMAC key", &p)], &[])?;
                }
                (Some(key), Some(p))
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
                ship,
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

        let mut allow_names: Vec<String> = match self.env.var("SAFE_MCP_ALLOW_COMMANDS") {
            Some(v) => v
                .to_string_lossy()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            None => raw.allowlist.unwrap_or_default().commands,
        };
        allow_names.extend(expansion.commands.iter().cloned());
        let allow = program_names("terminal.allowlist.commands", allow_names)?;
        let mut deny_names = raw.denylist.unwrap_or_default().commands;
        let mut rules = raw.rules.unwrap_or_default();
        for rule in &expansion.rules {
            if !rules.iter().any(|own| own.command == rule.command) {
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
        for p in &files.confirm_paths {
            crate::protected::check_entry(&p.replace("**", "x")).map_err(|message| {
                ConfigError::Invalid {
                    key: "terminal.files.confirm_paths".into(),
                    message,
                }
            })?;
        }
        if files.max_file_bytes == 0 || files.max_file_bytes > 64 << 20 {
            return Err(ConfigError::Invalid {
                key: "terminal.files.max_file_bytes".into(),
                message: "must be between 1 and 67108864".into(),
            });
        }
        Ok(TerminalPolicy {
            jail_root,
            write_paths,
            protected,
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
                s
            },
            network,
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

/// Variables a command's environment keeps whatever `[terminal.env]` says: the server sets
/// them (or pins them) and an override would undo a protection.
const FIXED_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
];

/// `first`, then what of `more` is not in it yet, in order.
fn union(mut first: Vec<PathBuf>, more: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    for p in more {
        if !first.contains(&p) {
            first.push(p);
        }
    }
    first
}

/// `[terminal.env]`: valid names, none of the fixed ones.
fn environment(raw: super::raw::RawEnv) -> Result<EnvSettings, ConfigError> {
    let valid = |name: &str| {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for name in raw.pass.iter().chain(raw.set.keys()) {
        if !valid(name) {
            return Err(ConfigError::Invalid {
                key: "terminal.env".into(),
                message: format!("{name:?} is not a variable name"),
            });
        }
        if FIXED_VARIABLES.contains(&name.as_str()) || name.starts_with("LD_") {
            return Err(ConfigError::Invalid {
                key: "terminal.env".into(),
                message: format!(
                    "{name} is set by the server for every command and cannot be passed or set"
                ),
            });
        }
    }
    if let Some(v) = raw.set.values().find(|v| v.contains('\0')) {
        return Err(ConfigError::Invalid {
            key: "terminal.env.set".into(),
            message: format!("a value contains a NUL byte: {v:?}"),
        });
    }
    for name in &raw.prefix_allow {
        if !valid(name) {
            return Err(ConfigError::Invalid {
                key: "terminal.env.prefix_allow".into(),
                message: format!("{name:?} is not a variable name"),
            });
        }
        if let Some(why) = crate::env_prefix::dangerous(name) {
            return Err(ConfigError::Invalid {
                key: "terminal.env.prefix_allow".into(),
                message: format!(
                    "{name} {why}: a command may never set it (set it yourself in [terminal.env] set)"
                ),
            });
        }
    }
    Ok(EnvSettings {
        pass: raw.pass,
        set: raw.set.into_iter().collect(),
        prefix_allow: raw.prefix_allow,
    })
}

/// `[terminal.network]`, with the older `[terminal.sandbox] network = true|false` (which
/// means mode open or off) folded in; the two may not disagree.
fn network_policy(
    raw: super::raw::RawNetwork,
    sandbox_network: Option<bool>,
) -> Result<NetworkPolicy, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: format!("terminal.network.{key}"),
        message,
    };
    let mode = match (raw.mode, sandbox_network) {
        (Some(mode), None) => mode,
        (None, Some(true)) => NetworkMode::Open,
        (None, Some(false) | None) => NetworkMode::Off,
        (Some(mode), Some(open)) if (mode == NetworkMode::Open) == open => mode,
        (Some(mode), Some(open)) => {
            return Err(bad(
                "mode",
                format!(
                    "mode = \"{}\" contradicts [terminal.sandbox] network = {open}; keep one of the two",
                    mode.as_str()
                ),
            ));
        }
    };
    let rules = |key: &str, list: Option<Vec<String>>| {
        list.unwrap_or_default()
            .iter()
            .map(|r| DomainRule::parse(r).map_err(|m| bad(key, m)))
            .collect::<Result<Vec<_>, _>>()
    };
    let allow = rules("allow_domains", raw.allow_domains)?;
    let deny = rules("deny_domains", raw.deny_domains)?;
    let mut hosts = std::collections::BTreeMap::new();
    for (name, addresses) in raw.hosts.unwrap_or_default() {
        let host = crate::egress::normalize(&name).map_err(|r| bad("hosts", r.reason))?;
        let parsed = addresses
            .iter()
            .map(|a| {
                a.parse::<std::net::IpAddr>()
                    .map_err(|_| bad("hosts", format!("{name}: {a:?} is not an IP address")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if parsed.is_empty() {
            return Err(bad("hosts", format!("{name}: give at least one address")));
        }
        hosts.insert(host, parsed);
    }
    if mode != NetworkMode::Allowlist
        && (!allow.is_empty() || !deny.is_empty() || !hosts.is_empty())
    {
        return Err(bad(
            "allow_domains",
            format!(
                "the domain lists and hosts apply only to mode = \"allowlist\" (mode is \"{}\")",
                mode.as_str()
            ),
        ));
    }
    Ok(NetworkPolicy {
        mode,
        allow,
        deny,
        allow_private: raw.allow_private.unwrap_or(false),
        hosts,
    })
}

/// `[terminal.approvals]`: `url_base` must be an `http://` URL on a loopback address with a
/// port (the page is served there, by this process, for people on this machine).
fn approval_settings(
    raw: super::raw::RawApprovals,
) -> Result<crate::approval::ApprovalSettings, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: format!("terminal.approvals.{key}"),
        message,
    };
    let timeout = raw.timeout_seconds.unwrap_or(120);
    if timeout == 0 || timeout > 3600 {
        return Err(bad("timeout_seconds", "must be between 1 and 3600".into()));
    }
    let url_base = match raw.url_base.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(url) => {
            let base = url.trim_end_matches('/');
            let authority = base.strip_prefix("http://").ok_or_else(|| {
                bad(
                    "url_base",
                    format!("{url:?}: give http://127.0.0.1:PORT (a loopback address and port)"),
                )
            })?;
            let (host, port) = authority
                .rsplit_once(':')
                .ok_or_else(|| bad("url_base", format!("{url:?} names no port")))?;
            let port: u16 = port
                .parse()
                .map_err(|_| bad("url_base", format!("{url:?}: the port is not a number")))?;
            let ip: std::net::IpAddr = match host {
                "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
                h => h
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| {
                        bad(
                            "url_base",
                            format!("{url:?}: the host must be a loopback address"),
                        )
                    })?,
            };
            if !ip.is_loopback() || port == 0 {
                return Err(bad(
                    "url_base",
                    format!(
                        "{url:?}: the approval page is served on loopback only, on a fixed port"
                    ),
                ));
            }
            Some((base.to_owned(), std::net::SocketAddr::new(ip, port)))
        }
    };
    Ok(crate::approval::ApprovalSettings {
        mode: raw.mode.unwrap_or_default(),
        url_base,
        timeout: std::time::Duration::from_secs(timeout),
    })
}

/// `[audit.ship]`: sink addresses that parse, and a spool directory outside every root (a
/// command must not be able to edit what waits to be shipped).
fn ship_settings(
    spool_dir: Option<PathBuf>,
    raw: super::raw::RawShip,
    roots: &[PathBuf],
) -> Result<crate::audit::ship::ShipSettings, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: format!("audit.ship.{key}"),
        message,
    };
    let host_port = |key: &str, value: &str| -> Result<String, ConfigError> {
        let (host, port) = value
            .rsplit_once(':')
            .ok_or_else(|| bad(key, format!("{value:?} names no port (host:port)")))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad(key, format!("{value:?}: the port is not a port number")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
        if !name_ok {
            return Err(bad(key, format!("{value:?}: not a host name or address")));
        }
        Ok(if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        })
    };
    let otlp_http = match raw.otlp_http.as_deref() {
        None => None,
        Some(url) => {
            let rest = url.strip_prefix("http://").ok_or_else(|| {
                bad(
                    "otlp_http",
                    format!("{url:?}: give http://HOST:PORT/v1/logs (a local collector forwards with TLS)"),
                )
            })?;
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/v1/logs"),
            };
            Some((host_port("otlp_http", authority)?, path.to_owned()))
        }
    };
    let syslog_tcp = match raw.syslog_tcp.as_deref() {
        None => None,
        Some(a) => Some(host_port("syslog_tcp", a)?),
    };
    if otlp_http.is_none() && syslog_tcp.is_none() {
        return Err(bad(
            "otlp_http",
            "[audit.ship] names no sink: set otlp_http, syslog_tcp or both".into(),
        ));
    }
    let spool_dir = spool_dir.ok_or_else(|| {
        bad(
            "spool_dir",
            "set a directory for records that wait for a sink (outside every root)".into(),
        )
    })?;
    let real = std::fs::canonicalize(&spool_dir).unwrap_or_else(|_| lexical_normalize(&spool_dir));
    if let Some(root) = roots
        .iter()
        .find(|r| real.starts_with(r) || r.starts_with(&real))
    {
        return Err(ConfigError::InsideRoot {
            key: "audit.ship.spool_dir",
            path: spool_dir.clone(),
            root: root.clone(),
        });
    }
    let checkpoint_seconds = raw.checkpoint_seconds.unwrap_or(60);
    if checkpoint_seconds > 86400 {
        return Err(bad("checkpoint_seconds", "must be at most 86400".into()));
    }
    Ok(crate::audit::ship::ShipSettings {
        otlp_http,
        syslog_tcp,
        on_failure: raw.on_failure.unwrap_or_default(),
        spool_dir,
        checkpoint_seconds,
    })
}

/// `[http.auth]`: `mode = "none"` (the default: loopback and unix sockets only) or
/// `"oauth"` with every key a resource server needs.
fn oauth_settings(
    raw: super::raw::RawHttpAuth,
    path: impl Fn(PathBuf) -> PathBuf,
) -> Result<Option<super::OAuthSettings>, ConfigError> {
    let bad = |key: &str, message: &str| ConfigError::Invalid {
        key: format!("http.auth.{key}"),
        message: message.to_owned(),
    };
    match raw.mode.as_deref() {
        None | Some("none") => return Ok(None),
        Some("oauth") => {}
        Some(other) => {
            return Err(bad(
                "mode",
                &format!("{other:?}: give \"oauth\" or \"none\""),
            ));
        }
    }
    let issuer = raw
        .issuer
        .filter(|i| i.starts_with("https://") || i.starts_with("http://"))
        .ok_or_else(|| {
            bad(
                "issuer",
                "the authorization server's URL (iss of its tokens)",
            )
        })?;
    let audience = raw
        .audience
        .filter(|a| a.starts_with("https://") || a.starts_with("http://"))
        .ok_or_else(|| {
            bad(
                "audience",
                "this server's resource URI, exactly as tokens name it in aud",
            )
        })?;
    let jwks = match (raw.jwks_file, raw.jwks_url) {
        (Some(file), None) => {
            if raw.jwks_ca_file.is_some() {
                return Err(bad("jwks_ca_file", "goes with jwks_url, not jwks_file"));
            }
            super::JwksSource::File(path(file))
        }
        (None, Some(url)) => {
            // Keys fetched in the clear could be swapped by anyone on the path, and with
            // them every token: https only.
            let authority = url
                .strip_prefix("https://")
                .and_then(|rest| rest.split(['/', '?', '#']).next())
                .unwrap_or_default();
            if authority.is_empty()
                || authority.contains('@')
                || url.contains(|c: char| c.is_whitespace() || c.is_control())
            {
                return Err(bad(
                    "jwks_url",
                    &format!("{url:?}: give the issuer's https:// JWKS URL"),
                ));
            }
            super::JwksSource::Url {
                url,
                ca_file: raw.jwks_ca_file.map(path),
            }
        }
        (Some(_), Some(_)) => {
            return Err(bad("jwks_url", "give jwks_file or jwks_url, not both"));
        }
        (None, None) => {
            return Err(bad(
                "jwks_file",
                "the issuer's public keys: a JWKS file (jwks_file) or its https:// URL (jwks_url)",
            ));
        }
    };
    let leeway_seconds = raw.leeway_seconds.unwrap_or(30);
    if leeway_seconds > 300 {
        return Err(bad("leeway_seconds", "must be at most 300"));
    }
    Ok(Some(super::OAuthSettings {
        issuer,
        audience,
        jwks,
        required_scopes: raw.required_scopes.unwrap_or_default(),
        leeway_seconds,
    }))
}

/// `[http]`: origins that name their scheme, a sane body cap, and `[http.auth]`.
fn http_settings(
    raw: super::raw::RawHttp,
    path: impl Fn(PathBuf) -> PathBuf,
) -> Result<super::HttpSettings, ConfigError> {
    let limits = http_limits(&raw)?;
    let origins = raw.allowed_origins.unwrap_or_default();
    if let Some(bad) = origins
        .iter()
        .find(|o| !(o.starts_with("http://") || o.starts_with("https://") || *o == "null"))
    {
        return Err(ConfigError::Invalid {
            key: "http.allowed_origins".into(),
            message: format!("{bad:?}: an origin names its scheme (https://app.example.com:443)"),
        });
    }
    let max_body_bytes = raw.max_body_bytes.unwrap_or(1 << 20);
    if !(1024..=64 << 20).contains(&max_body_bytes) {
        return Err(ConfigError::Invalid {
            key: "http.max_body_bytes".into(),
            message: "must be between 1024 and 67108864".into(),
        });
    }
    let oauth = match raw.auth {
        None => None,
        Some(auth) => oauth_settings(auth, path)?,
    };
    Ok(super::HttpSettings {
        allowed_origins: origins,
        allowed_hosts: raw.allowed_hosts.unwrap_or_default(),
        max_body_bytes,
        oauth,
        limits,
    })
}

/// `[http]`'s limits: each at least 1, a caller's at most the total.
fn http_limits(raw: &super::raw::RawHttp) -> Result<super::HttpLimits, ConfigError> {
    let default = super::HttpLimits::default();
    let pair = |total: Option<usize>, per: Option<usize>, name: &str, d: (usize, usize)| {
        let total = total.unwrap_or(d.0);
        // An unset per-caller limit follows a lowered total.
        let per = per.unwrap_or(d.1.min(total));
        if total == 0 || total > 4096 {
            return Err(ConfigError::Invalid {
                key: format!("http.{name}"),
                message: "must be between 1 and 4096".into(),
            });
        }
        if per == 0 || per > total {
            return Err(ConfigError::Invalid {
                key: format!("http.{name}_per_caller"),
                message: format!("must be at least 1 and at most {name} ({total})"),
            });
        }
        Ok((total, per))
    };
    let (max_mcp_sessions, max_mcp_sessions_per_caller) = pair(
        raw.max_mcp_sessions,
        raw.max_mcp_sessions_per_caller,
        "max_mcp_sessions",
        (
            default.max_mcp_sessions,
            default.max_mcp_sessions_per_caller,
        ),
    )?;
    let (max_requests, max_requests_per_caller) = pair(
        raw.max_requests,
        raw.max_requests_per_caller,
        "max_requests",
        (default.max_requests, default.max_requests_per_caller),
    )?;
    Ok(super::HttpLimits {
        max_mcp_sessions,
        max_mcp_sessions_per_caller,
        max_requests,
        max_requests_per_caller,
    })
}
