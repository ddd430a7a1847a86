//! `[terminal]` into a [`TerminalPolicy`], one part at a time, in the order the parts
//! depend on each other: the jail, the profiles, the limits, the programs and their rules
//! (the repository's own file last, which may only narrow them), the PATH, the helpers, the
//! paths commands read and write, the sessions. Each part's checks sit with it; the rules
//! they apply are `load.rs`'s (the module docs there).

use std::path::{Path, PathBuf};

use super::checks::{existing_root, program_names, union};
use super::error::ConfigError;
use super::load::Builder;
use super::profiles::{self, Expansion};
use super::project;
use super::raw::{RawSandbox, RawTerminal};
use super::sections::{approval_settings, environment, network_policy};
use crate::egress::NetworkMode;
use crate::protected::{ProtectedPaths, Source};
use safe_mcp_rules::config::settings::ProjectReport;
use safe_mcp_rules::config::types::{
    ArgRule, DEFAULT_PATH, DEFAULT_READ_PATHS, ExecSettings, Limits, NamespaceMode, SandboxMode,
    SandboxSettings, SessionSettings, TerminalPolicy,
};

/// What runs, and under which rules: the programs allowed and refused, their argument
/// rules, the helpers, what is protected, and the repository's narrowing of them.
struct Programs {
    allow: std::collections::BTreeSet<String>,
    deny: std::collections::BTreeSet<String>,
    rules: Vec<ArgRule>,
    helpers: Vec<String>,
    dropped_profile_rules: Vec<String>,
    protected: ProtectedPaths,
    project: Option<ProjectReport>,
    limits: Limits,
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

impl Builder<'_> {
    pub(super) fn terminal(&self, mut raw: RawTerminal) -> Result<TerminalPolicy, ConfigError> {
        let root = self
            .env_path("SAFE_MCP_JAIL_ROOT")
            .or_else(|| self.env_path("HTMCP_JAIL_ROOT"))
            .or_else(|| raw.jail_root.take().map(|p| self.file_path(p)))
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
        let limits = limits(raw.limits.take().unwrap_or_default())?;
        let mut programs = self.programs(&mut raw, &mut expansion, &jail_root, limits)?;
        let path = command_path(raw.path.take(), &mut expansion, &jail_root)?;
        git_exec_path(&programs, &mut expansion, &path, &jail_root)?;
        let sb = raw.sandbox.take().unwrap_or_default();
        let network = network_policy(raw.network.take().unwrap_or_default(), sb.network)?;
        let read_paths = self.read_paths(sb.read_paths.clone(), &mut expansion, &jail_root)?;
        let write_paths =
            self.write_paths(raw.write_paths.take(), &expansion, &jail_root, &path)?;
        let files = raw.files.take().unwrap_or_default();
        // Confirm paths are held from commands as protected paths are; the file tools write
        // them after a person's approval.
        programs
            .protected
            .add_confirm(&files.confirm_paths)
            .map_err(|message| invalid("terminal.files.confirm_paths", message))?;
        if files.max_file_bytes == 0 || files.max_file_bytes > 64 << 20 {
            return Err(invalid(
                "terminal.files.max_file_bytes",
                "must be between 1 and 67108864",
            ));
        }
        let offline = network.mode == NetworkMode::Off;
        let env = {
            let mut env = raw.env.take().unwrap_or_default();
            let offline = if offline {
                std::mem::take(&mut expansion.env_offline)
            } else {
                Vec::new()
            };
            for (name, value) in std::mem::take(&mut expansion.env_set)
                .into_iter()
                .chain(offline)
            {
                env.set.entry(name).or_insert(value);
            }
            environment(env)?
        };
        let shared_cache = raw.shared_cache.unwrap_or(false);
        let sandbox = sandbox_settings(
            sb,
            (programs.helpers, shared_cache),
            &mut expansion,
            read_paths,
            network.mode,
        );
        Ok(TerminalPolicy {
            exec_log: raw.audit.and_then(|a| a.exec_log).unwrap_or(false),
            jail_root,
            write_paths,
            protected: programs.protected,
            dropped_profile_rules: programs.dropped_profile_rules,
            files,
            caches: std::mem::take(&mut expansion.caches),
            profiles: expansion.reports,
            project: programs.project,
            sessions: sessions(raw.sessions.unwrap_or_default())?,
            network,
            credentials: Default::default(),
            approvals: approval_settings(raw.approvals.unwrap_or_default())?,
            limits: programs.limits,
            allow: programs.allow,
            deny: programs.deny,
            rules: programs.rules,
            examples: raw.examples.unwrap_or_default(),
            sandbox,
            path,
            env,
        })
    }

    /// The paths commands may write besides the jail: the operator's, and the profiles'
    /// caches (which may not exist yet: a starting server makes them; a refusal of one
    /// names the key that moves it).
    fn write_paths(
        &self,
        own: Option<Vec<PathBuf>>,
        expansion: &Expansion,
        jail_root: &Path,
        path: &[PathBuf],
    ) -> Result<Vec<PathBuf>, ConfigError> {
        let home = self.env.var("HOME").map(PathBuf::from);
        let own = super::writable::resolve(
            super::writable::WRITE_PATHS,
            own.unwrap_or_default()
                .into_iter()
                .map(|p| self.file_path(p))
                .collect(),
            jail_root,
            path,
            home.as_deref(),
            super::writable::Made::Already,
        )?;
        // A refusal of a profile's cache names the key that moves it. Caches may not exist
        // yet: a starting server makes them.
        let caches = super::writable::resolve(
            "terminal.cache_dir",
            expansion.write_paths.clone(),
            jail_root,
            path,
            home.as_deref(),
            super::writable::Made::AtStart,
        )?;
        Ok(union(own, caches))
    }

    /// The programs and their rules: the operator's, the profiles', then the repository's
    /// narrowing (which may also lower `limits`).
    fn programs(
        &self,
        raw: &mut RawTerminal,
        expansion: &mut Expansion,
        jail_root: &Path,
        mut limits: Limits,
    ) -> Result<Programs, ConfigError> {
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
        let helpers = raw.allowlist.take().map_or(Vec::new(), |a| a.helpers);
        allow_names.extend(expansion.commands.iter().cloned());
        let allow = program_names("terminal.allowlist.commands", allow_names)?;
        let mut deny_names = raw.denylist.take().unwrap_or_default().commands;
        let dropped_profile_rules = raw.drop_profile_rules.take().unwrap_or_default();
        let mut rules = combined_rules(
            raw.rules.take().unwrap_or_default(),
            &expansion.rules,
            &dropped_profile_rules,
        )?;
        let mut protected = ProtectedPaths::build(
            raw.protected_paths.as_deref().unwrap_or_default(),
            Source::Operator,
            raw.unprotected_paths.as_deref().unwrap_or_default(),
        )
        .map_err(|message| invalid("terminal.protected_paths", message))?;
        // Last, the repository's own file, which may only narrow all of the above.
        let project = match project::read(jail_root, &limits)? {
            Some(narrowing) => {
                limits = narrowing.limits;
                deny_names.extend(narrowing.removed);
                rules.extend(narrowing.rules);
                protected
                    .add(&narrowing.protected, Source::Project)
                    .map_err(|message| {
                        invalid(
                            format!("{}: terminal.protected_paths", project::FILE_NAME),
                            message,
                        )
                    })?;
                Some(narrowing.report)
            }
            None => None,
        };
        let deny = program_names("terminal.denylist.commands", deny_names)?;
        helpers_of(&helpers, &rules, &allow, &deny, expansion, jail_root)?;
        check_rules(&rules)?;
        Ok(Programs {
            allow,
            deny,
            rules,
            helpers,
            dropped_profile_rules,
            protected,
            project,
            limits,
        })
    }

    /// The paths commands may read: the operator's (or the defaults), and what the profiles
    /// found that none of those holds already; none in the jail, none showing the machine.
    fn read_paths(
        &self,
        own: Option<Vec<PathBuf>>,
        expansion: &mut Expansion,
        jail_root: &Path,
    ) -> Result<Vec<PathBuf>, ConfigError> {
        let read_paths: Vec<PathBuf> = match own {
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
            if real.starts_with(jail_root) {
                return Err(ConfigError::InsideRoot {
                    key: "terminal.sandbox.read_paths",
                    path: p.clone(),
                    root: jail_root.to_path_buf(),
                });
            }
            if real == Path::new("/") || real.starts_with("/proc") {
                return Err(invalid(
                    "terminal.sandbox.read_paths",
                    format!(
                        "{} would show commands the whole machine; name the directories they need",
                        p.display()
                    ),
                ));
            }
        }
        Ok(read_paths)
    }
}

/// `[terminal.limits]`, each within its bounds.
fn limits(limits: Limits) -> Result<Limits, ConfigError> {
    if limits.timeout_seconds == 0 || limits.timeout_seconds > 24 * 3600 {
        return Err(invalid(
            "terminal.limits.timeout_seconds",
            "must be between 1 and 86400",
        ));
    }
    if limits.max_output_bytes == 0 || limits.max_output_bytes > 64 << 20 {
        return Err(invalid(
            "terminal.limits.max_output_bytes",
            "must be between 1 and 67108864",
        ));
    }
    if limits.max_output_total_bytes != 0
        && limits.max_output_total_bytes < limits.max_output_bytes as u64
    {
        return Err(invalid(
            "terminal.limits.max_output_total_bytes",
            format!(
                "must be 0 (no bound) or at least max_output_bytes ({})",
                limits.max_output_bytes
            ),
        ));
    }
    Ok(limits)
}

/// Rules combine: the profiles' rules for a program stay beside the operator's (every
/// deny_args holds; the strictest wins), unless the operator drops them by name.
fn combined_rules(
    mut rules: Vec<ArgRule>,
    profiles: &[ArgRule],
    dropped: &[String],
) -> Result<Vec<ArgRule>, ConfigError> {
    if let Some(name) = dropped
        .iter()
        .find(|name| !profiles.iter().any(|r| &r.command == *name))
    {
        let named = profiles
            .iter()
            .map(|r| r.command.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(invalid(
            "terminal.drop_profile_rules",
            format!(
                "no profile in force has a rule for {name:?}; the profiles' rules are for {named}"
            ),
        ));
    }
    rules.extend(
        profiles
            .iter()
            .filter(|r| !dropped.contains(&r.command))
            .cloned(),
    );
    Ok(rules)
}

/// The operator's helpers and the profiles', checked: a program with argument rules is
/// never a helper (it would run without them), and a profile's helper the operator's
/// denylist names is left out (the operator's word wins; the tool that needed it says so).
fn helpers_of(
    helpers: &[String],
    rules: &[ArgRule],
    allow: &std::collections::BTreeSet<String>,
    deny: &std::collections::BTreeSet<String>,
    expansion: &mut Expansion,
    jail_root: &Path,
) -> Result<(), ConfigError> {
    super::checks::helper_entries("terminal.allowlist.helpers", helpers, jail_root, deny)?;
    for (command, known) in profiles::KNOWN_HELPERS {
        if allow.contains(*command) {
            let known = known.iter().map(|h| (*h).to_owned()).collect();
            expansion.helpers.push(((*command).to_owned(), known));
        }
    }
    let ruled: Vec<&str> = rules
        .iter()
        .filter(|r| r.binds_arguments())
        .map(|r| r.command.as_str())
        .collect();
    if let Some(h) = helpers.iter().find(|h| ruled.contains(&h.as_str())) {
        return Err(invalid(
            "terminal.allowlist.helpers",
            format!(
                "{h:?} has argument rules, which a helper would run without; it is reached through the server when a command starts it"
            ),
        ));
    }
    for (command, own) in &mut expansion.helpers {
        own.retain(|h| !deny.contains(h) && !ruled.contains(&h.as_str()));
        super::checks::helper_entries(
            &format!("terminal.profiles ({command} helpers)"),
            own,
            jail_root,
            deny,
        )?;
    }
    Ok(())
}

/// Each rule names a bare program, and no pattern is empty.
fn check_rules(rules: &[ArgRule]) -> Result<(), ConfigError> {
    for rule in rules {
        program_names("terminal.rules.command", vec![rule.command.clone()])?;
        for (key, patterns) in [
            ("deny_args", &rule.deny_args),
            ("confirm_args", &rule.confirm_args),
        ] {
            if patterns
                .iter()
                .any(|p| p.split_whitespace().next().is_none())
            {
                return Err(invalid(
                    format!("terminal.rules ({}).{key}", rule.command),
                    "an empty pattern would match nothing",
                ));
            }
        }
    }
    Ok(())
}

/// The commands' PATH: the operator's own first; without one, the profiles' toolchains
/// before the system's. Every entry absolute and outside the jail (an entry inside would
/// let a command plant the next `ls`).
fn command_path(
    own: Option<Vec<PathBuf>>,
    expansion: &mut Expansion,
    jail_root: &Path,
) -> Result<Vec<PathBuf>, ConfigError> {
    let own_path = own.is_some();
    let base_path: Vec<PathBuf> =
        own.unwrap_or_else(|| DEFAULT_PATH.iter().map(PathBuf::from).collect());
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
            return Err(invalid(
                "terminal.path",
                format!("{} is not absolute", dir.display()),
            ));
        }
        let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        if real.starts_with(jail_root) {
            return Err(ConfigError::InsideRoot {
                key: "terminal.path",
                path: dir.clone(),
                root: jail_root.to_path_buf(),
            });
        }
    }
    Ok(path)
}

/// git starts its own helpers from its exec-path (a local remote, HTTPS): allowlisted with
/// or without the git profile, git's stages may execute them. The git profile's discovery
/// has asked already when it found the directory; it is not asked twice.
fn git_exec_path(
    programs: &Programs,
    expansion: &mut Expansion,
    path: &[PathBuf],
    jail_root: &Path,
) -> Result<(), ConfigError> {
    let discovered = expansion
        .helpers
        .iter()
        .any(|(c, h)| c == "git" && h.iter().any(|d| d.starts_with('/')));
    if !programs.allow.contains("git") || programs.deny.contains("git") || discovered {
        return Ok(());
    }
    let git = crate::programs::find_on(path.iter().map(PathBuf::as_path), "git");
    if let Some(dir) = git.and_then(|g| super::discover::git_exec_path(&g).ok()) {
        let dir = dir.to_string_lossy().into_owned();
        super::checks::helper_entries(
            "git's exec-path",
            std::slice::from_ref(&dir),
            jail_root,
            &programs.deny,
        )?;
        expansion.helpers.push(("git".to_owned(), vec![dir]));
    }
    Ok(())
}

/// `[terminal.sandbox]` with what the profiles add.
fn sandbox_settings(
    sb: RawSandbox,
    (helpers, shared_cache): (Vec<String>, bool),
    expansion: &mut Expansion,
    read_paths: Vec<PathBuf>,
    network: NetworkMode,
) -> SandboxSettings {
    SandboxSettings {
        mode: sb.mode.unwrap_or(SandboxMode::Enforce),
        network: network == NetworkMode::Open,
        read_paths,
        exec_in_jail: sb.exec_in_jail.unwrap_or(expansion.exec_in_jail),
        unix_sockets: sb.unix_sockets.unwrap_or(true),
        namespaces: sb.namespaces.unwrap_or(NamespaceMode::Auto),
        read_only_files: std::mem::take(&mut expansion.read_only_files),
        shared_cache,
        exec: ExecSettings {
            enabled: sb.exec_allowlist.unwrap_or(true),
            helpers,
            by_command: std::mem::take(&mut expansion.helpers),
        },
    }
}

/// `[terminal.sessions]`, each within its bounds.
fn sessions(s: SessionSettings) -> Result<SessionSettings, ConfigError> {
    let bad = |key: &str, message: &str| invalid(format!("terminal.sessions.{key}"), message);
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
    Ok(s)
}
