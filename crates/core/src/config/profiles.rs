//! Built-in profiles (`[terminal] profiles = [...]`): packs of policy for a toolchain, kept as
//! data (`profiles/*.toml`, embedded in the binary) and expanded at load.
//!
//! A profile contributes allowlist entries, argument rules, read paths and PATH entries
//! (fixed ones, and ones discovered from the server's environment: where `rustc`, `python3`,
//! `node` or git's helpers really live, following rustup's proxies and pyenv's shims),
//! writable caches beneath the server's cache directory (never the user's own `~/.cargo` or
//! `~/.npm`), and environment variables. Profiles compose by union; wherever the operator's
//! policy sets the same thing (a rule for the same command, the same variable, a `path`,
//! `exec_in_jail`), the operator's key wins. Everything a profile adds then goes through the
//! same checks as the operator's own keys, and [`ProfileReport`] says what it added.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ArgRule, ConfigError, Env, discover};

/// The built-in profiles, by name.
const BUILT_IN: &[(&str, &str)] = &[
    ("git", include_str!("profiles/git.toml")),
    ("rust", include_str!("profiles/rust.toml")),
    ("python", include_str!("profiles/python.toml")),
    ("node", include_str!("profiles/node.toml")),
    ("readonly", include_str!("profiles/readonly.toml")),
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
    /// What discovery could not find, for a warning.
    pub notes: Vec<String>,
}

/// Everything the named profiles add, before the load merges it (read paths and PATH
/// entries are in the reports, which the load trims to what is new).
#[derive(Debug, Default)]
pub(super) struct Expansion {
    pub(super) reports: Vec<ProfileReport>,
    pub(super) commands: Vec<String>,
    pub(super) rules: Vec<ArgRule>,
    pub(super) write_paths: Vec<PathBuf>,
    pub(super) env_set: Vec<(String, String)>,
    /// Set only when commands have no network.
    pub(super) env_offline: Vec<(String, String)>,
    pub(super) exec_in_jail: bool,
}

fn invalid(message: String) -> ConfigError {
    ConfigError::Invalid {
        key: "terminal.profiles".into(),
        message,
    }
}

/// Expands `names` in order. `cache_dir` is made (mode 0700) only when a profile needs a
/// cache; discovery asks the programs on the server's PATH (`env`).
pub(super) fn expand(
    names: &[String],
    env: &dyn Env,
    cache_dir: Option<&Path>,
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
        if let Some(discovery) = data.discover {
            match discover::run(discovery, env) {
                Ok(found) => {
                    report.read_paths = found.read_paths;
                    report.path = found.path;
                }
                Err(why) => report.notes.push(why),
            }
        }
        for (variable, sub) in &data.env.cache {
            let Some(cache_dir) = cache_dir else {
                return Err(invalid(format!(
                    "the {name} profile keeps a cache, but there is no cache directory: set [terminal] cache_dir (HOME and XDG_CACHE_HOME are unset)"
                )));
            };
            let dir = cache_dir.join(sub);
            make_private_dir(&dir).map_err(|e| {
                invalid(format!("the {name} profile's cache {}: {e}", dir.display()))
            })?;
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
        out.rules.extend(data.rules);
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
