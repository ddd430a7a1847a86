//! Built-in profiles (`[terminal] profiles = [...]`): packs of policy for a toolchain, kept as
//! data (`profiles/*.toml`, embedded in the binary) and expanded at load.
//!
//! A profile contributes allowlist entries, argument rules, read paths and PATH entries
//! (fixed ones, and ones discovered from the server's environment: where `rustc`, `python3`,
//! `node` or git's helpers really live, following rustup's proxies and pyenv's shims),
//! writable caches beneath the server's cache directory (never the user's own `~/.cargo` or
//! `~/.npm`), and environment variables.
//!
//! A cache is a write path that changes what runs next: a `$CARGO_HOME/config.toml` with a
//! `rustc-wrapper`, a poisoned wheel or tarball. So caches are per jail by default, beneath
//! `<cache_dir>/jails/<name>-<hash of the jail's canonical path>`, and one project's model
//! cannot reach another project's builds through them; sharing one cache between projects is
//! the operator's named choice (`[terminal] shared_cache = true`). And in every cache the
//! files that configure its tool (`config.toml`, `credentials.toml`, `pip.conf`, `.npmrc`, …,
//! each profile's `cache_config`) are empty placeholders, one read-only inode, which the
//! private view binds read-only: no command, build script or interpreter can write them. Profiles compose by union; wherever the operator's
//! policy sets the same thing (a rule for the same command, the same variable, a `path`,
//! `exec_in_jail`), the operator's key wins. Everything a profile adds then goes through the
//! same checks as the operator's own keys, and [`ProfileReport`] says what it added.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::discover;
use super::env::Env;
use super::error::ConfigError;
use safe_mcp_rules::config::settings::{CacheDir, ProfileReport};
use safe_mcp_rules::config::types::ArgRule;

/// The built-in profiles, by name.
const BUILT_IN: &[(&str, &str)] = &[
    ("git", include_str!("profiles/git.toml")),
    ("rust", include_str!("profiles/rust.toml")),
    ("python", include_str!("profiles/python.toml")),
    ("node", include_str!("profiles/node.toml")),
    ("readonly", include_str!("profiles/readonly.toml")),
];

/// What well-known programs start to do their everyday work, which their stages may execute
/// under the exec allowlist when they are allowlisted (with or without a profile): man's
/// formatters, the shell make runs recipes in. What those start is held to the list again.
pub(super) const KNOWN_HELPERS: &[(&str, &[&str])] = &[
    (
        "man",
        &[
            "preconv", "tbl", "eqn", "pic", "nroff", "groff", "troff", "grotty", "col",
        ],
    ),
    ("make", &["sh"]),
    // The shell git starts a local remote's "git-upload-pack '/path'" through; git's
    // exec-path is asked of git itself at load.
    ("git", &["sh"]),
];

/// The names of the built-in profiles.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|(name, _)| *name)
}

/// One profile file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileData {
    description: String,
    commands: Vec<String>,
    #[serde(default)]
    discover: Option<discover::Discovery>,
    #[serde(default)]
    exec_in_jail: bool,
    #[serde(default)]
    env: ProfileEnv,
    #[serde(default)]
    rules: Vec<ArgRule>,
    /// Names of the files in each of its caches that configure the tool that reads the
    /// cache (`$CARGO_HOME/config.toml`): made empty placeholders that commands cannot write.
    #[serde(default)]
    cache_config: Vec<String>,
    /// What each command starts that is not allowlisted itself (the exec allowlist): program
    /// names found on the PATH, or absolute paths. Discovery adds directories for all the
    /// profile's commands (git's exec-path, the Rust toolchain).
    #[serde(default)]
    helpers: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileEnv {
    /// Fixed values.
    #[serde(default)]
    set: BTreeMap<String, String>,
    /// Variables that name a writable directory beneath the cache directory.
    #[serde(default)]
    cache: BTreeMap<String, String>,
    /// Fixed values set only when commands have no network (`[terminal.network] mode =
    /// "off"`): a package manager told to work offline, which with egress on would refuse
    /// the registry the operator allowed.
    #[serde(default)]
    offline: BTreeMap<String, String>,
}

/// Everything the named profiles add, before the load merges it (read paths and PATH
/// entries are in the reports, which the load trims to what is new).
#[derive(Debug, Default)]
pub(super) struct Expansion {
    pub(super) reports: Vec<ProfileReport>,
    pub(super) commands: Vec<String>,
    pub(super) rules: Vec<ArgRule>,
    pub(super) write_paths: Vec<PathBuf>,
    /// The placeholders of the caches' tool configuration, read-only for commands.
    pub(super) read_only_files: Vec<PathBuf>,
    /// The caches, to be made by a starting server.
    pub(super) caches: Vec<CacheDir>,
    pub(super) env_set: Vec<(String, String)>,
    /// Set only when commands have no network.
    pub(super) env_offline: Vec<(String, String)>,
    pub(super) exec_in_jail: bool,
    /// Helpers by command, for the exec allowlist.
    pub(super) helpers: Vec<(String, Vec<String>)>,
}

fn invalid(message: String) -> ConfigError {
    ConfigError::Invalid {
        key: "terminal.profiles".into(),
        message,
    }
}

/// Where the caches of one jail live: beneath `cache_dir` itself when the operator shares
/// them between projects, else beneath a directory of the jail's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct CacheScope<'a> {
    pub(super) cache_dir: Option<&'a Path>,
    pub(super) jail_root: &'a Path,
    pub(super) shared: bool,
}

impl CacheScope<'_> {
    /// The directory that holds this jail's caches.
    fn base(&self) -> Option<PathBuf> {
        let dir = self.cache_dir?;
        if self.shared {
            return Some(dir.to_path_buf());
        }
        Some(dir.join("jails").join(jail_key(self.jail_root)))
    }
}

/// A directory name for one jail: its last component (for a person reading the cache
/// directory) and the first 16 hex digits of the SHA-256 of its canonical path (so that two
/// jails never share one).
pub(super) fn jail_key(jail_root: &Path) -> String {
    use sha2::Digest;
    use std::os::unix::ffi::OsStrExt;
    let digest = sha2::Sha256::digest(jail_root.as_os_str().as_bytes());
    let name: String = jail_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(32)
        .collect();
    let name = name.trim_start_matches('.');
    let hash = hex::encode(&digest[..8]);
    if name.is_empty() {
        hash
    } else {
        format!("{name}-{hash}")
    }
}

/// Expands `names` in order. A cache directory is made (mode 0700) only when a profile needs
/// a cache; discovery asks the programs on the server's PATH (`env`).
pub(super) fn expand(
    names: &[String],
    env: &dyn Env,
    caches: CacheScope<'_>,
) -> Result<Expansion, ConfigError> {
    let mut out = Expansion::default();
    for name in names {
        let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| n == name) else {
            return Err(invalid(format!(
                "no profile {name:?}; the built-in ones are {}",
                self::names().collect::<Vec<_>>().join(", ")
            )));
        };
        let data: ProfileData = toml::from_str(text)
            .map_err(|e| invalid(format!("the built-in profile {name} is malformed: {e}")))?;
        let mut report = ProfileReport {
            name: name.clone(),
            description: data.description,
            commands: data.commands.clone(),
            rules: data.rules.iter().map(|r| r.command.clone()).collect(),
            exec_in_jail: data.exec_in_jail,
            ..ProfileReport::default()
        };
        let mut helpers = data.helpers;
        if let Some(discovery) = data.discover {
            match discover::run(discovery, env) {
                Ok(found) => {
                    report.read_paths = found.read_paths;
                    report.path = found.path;
                    let dirs = found
                        .helpers
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned());
                    let dirs: Vec<String> = dirs.collect();
                    for command in &data.commands {
                        helpers
                            .entry(command.clone())
                            .or_default()
                            .extend(dirs.iter().cloned());
                    }
                }
                Err(why) => report.notes.push(why),
            }
        }
        for (command, own) in helpers {
            report
                .helpers
                .extend(own.iter().map(|h| format!("{command}: {h}")));
            out.helpers.push((command, own));
        }
        for (variable, sub) in &data.env.cache {
            let Some(base) = caches.base() else {
                return Err(ConfigError::Invalid {
                    key: "terminal.cache_dir".into(),
                    message: format!(
                        "the {name} profile keeps a cache, but there is no cache directory (HOME and XDG_CACHE_HOME are unset): set cache_dir = \"/var/tmp/safe-mcp-cache\" or another directory of the server's own"
                    ),
                });
            };
            let dir = base.join(sub);
            // Made by a starting server ([`make_caches`]), never by a load: `policy check`
            // and `explain` change nothing on disk.
            out.read_only_files
                .extend(data.cache_config.iter().map(|n| dir.join(n)));
            out.caches.push(CacheDir {
                dir: dir.clone(),
                config: data.cache_config.clone(),
            });
            report.write_paths.push(dir.clone());
            out.env_set
                .push((variable.clone(), dir.to_string_lossy().into_owned()));
            report.env.push(variable.clone());
        }
        for (variable, value) in data.env.set {
            report.env.push(variable.clone());
            out.env_set.push((variable, value));
        }
        for (variable, value) in data.env.offline {
            report.env.push(format!("{variable} (without network)"));
            out.env_offline.push((variable, value));
        }
        out.commands.extend(data.commands);
        out.rules.extend(data.rules.into_iter().map(|mut r| {
            r.profile = Some(name.clone());
            r
        }));
        out.write_paths.extend(report.write_paths.iter().cloned());
        out.exec_in_jail |= data.exec_in_jail;
        out.reports.push(report);
    }
    Ok(out)
}

/// The cache directory when the policy names none: `$XDG_CACHE_HOME/safe-mcp`, else
/// `$HOME/.cache/safe-mcp`.
pub(super) fn default_cache_dir(env: &dyn Env) -> Option<PathBuf> {
    let absolute = |name: &str| env.var(name).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".cache")))
        .map(|base| base.join("safe-mcp"))
}

/// The file in a jail's cache directory (`<cache_dir>/jails/<key>/jail`, beside the caches,
/// where commands cannot write) that names the jail it serves.
const JAIL_MARKER: &str = "jail";

/// Makes each cache (mode 0700, with its missing parents) and its placeholders: what a
/// starting server does before its confinement is built. Where caches are per jail, the
/// jail's cache directory names its jail, and the cache directories of jails that are gone
/// (a project deleted, a test's temporary jail) are removed, so they do not pile up in the
/// server user's home; returns those.
pub fn make_caches(caches: &[CacheDir], jail_root: &Path) -> Result<Vec<PathBuf>, String> {
    make_each(caches)?;
    let per_jail: std::collections::BTreeSet<&Path> = caches
        .iter()
        .filter_map(|c| c.dir.parent())
        .filter(|base| base.parent().and_then(Path::file_name) == Some("jails".as_ref()))
        .collect();
    let mut removed = Vec::new();
    for base in per_jail {
        name_the_jail(base, jail_root).map_err(|e| {
            format!(
                "the profile cache {}: {e}; set [terminal] cache_dir to a directory the server may write",
                base.display()
            )
        })?;
        if let Some(jails) = base.parent() {
            removed.extend(remove_gone(jails, base));
        }
    }
    Ok(removed)
}

/// Writes `base/jail`: the jail's path (a marker a command placed there is replaced, never
/// followed).
fn name_the_jail(base: &Path, jail_root: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    let marker = base.join(JAIL_MARKER);
    if let Err(e) = std::fs::remove_file(&marker)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e);
    }
    std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&marker)?
        .write_all(jail_root.as_os_str().as_bytes())
}

/// Removes each directory beneath `jails` but `keep` whose marker names a jail that no
/// longer exists (only a marker this code wrote decides: no marker, no removal). The removal
/// does not follow the symlinks in it.
fn remove_gone(jails: &Path, keep: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(entries) = std::fs::read_dir(jails) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if dir == keep || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let marker = dir.join(JAIL_MARKER);
        let named = match std::fs::symlink_metadata(&marker) {
            Ok(m) if m.is_file() && m.len() <= 4096 => std::fs::read(&marker).ok(),
            _ => None,
        };
        let Some(jail) = named.map(|n| PathBuf::from(std::ffi::OsStr::from_bytes(&n))) else {
            continue;
        };
        let gone = matches!(std::fs::symlink_metadata(&jail),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        if jail.is_absolute() && gone && std::fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

fn make_each(caches: &[CacheDir]) -> Result<(), String> {
    for cache in caches {
        let failed = |e: std::io::Error| {
            format!(
                "the profile cache {}: {e}; set [terminal] cache_dir to a directory the server may write",
                cache.dir.display()
            )
        };
        make_private_dir(&cache.dir).map_err(failed)?;
        placeholders(&cache.dir, &cache.config).map_err(failed)?;
    }
    Ok(())
}

/// Makes each of `names` in the cache `dir` an empty placeholder file, all of them one
/// inode, mode 0444 (cargo takes `config` and `config.toml` for one file when they are one
/// inode, and warns about neither), and returns their paths. A file of that name that is
/// not the placeholder (a command wrote it while the view did not hold it read-only, or the
/// cache predates the placeholders) is moved aside to `<name>.refused`, never read again.
fn placeholders(dir: &Path, names: &[String]) -> std::io::Result<Vec<PathBuf>> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let Some(first) = names.first() else {
        return Ok(Vec::new());
    };
    let anchor = dir.join(first);
    let is_placeholder =
        |m: &std::fs::Metadata| m.is_file() && m.len() == 0 && m.mode() & 0o222 == 0;
    match std::fs::symlink_metadata(&anchor) {
        Ok(m) if is_placeholder(&m) => {}
        Ok(_) => {
            std::fs::rename(&anchor, dir.join(format!("{first}.refused")))?;
            make_placeholder(&anchor)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => make_placeholder(&anchor)?,
        Err(e) => return Err(e),
    }
    let inode = std::fs::metadata(&anchor)?.ino();
    let mut paths = vec![anchor.clone()];
    for name in &names[1..] {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.ino() == inode => {}
            Ok(_) => {
                std::fs::rename(&path, dir.join(format!("{name}.refused")))?;
                std::fs::hard_link(&anchor, &path)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::hard_link(&anchor, &path)?;
            }
            Err(e) => return Err(e),
        }
        paths.push(path);
    }
    return Ok(paths);

    fn make_placeholder(path: &Path) -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o444))
    }
}

/// Makes `dir` and its missing parents, the new ones mode 0700.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses() {
        for (name, text) in BUILT_IN {
            let data: ProfileData = toml::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!data.commands.is_empty(), "{name}");
            for rule in &data.rules {
                assert!(
                    data.commands.contains(&rule.command),
                    "{name}: {}",
                    rule.command
                );
            }
        }
    }
}
