//! `[terminal] protected_paths`: which files in the jail configure programs *outside* it.
//!
//! The jail is writable, and some files in it tell other programs what to run later,
//! unconfined, as the operator: git's `.git/config` and `.git/hooks/*`, the agent clients'
//! project configuration (`.mcp.json`, `.claude/`, `.vscode/tasks.json`, …). This module owns
//! the list (the defaults, the operator's and the project's additions, the operator's named
//! removals), the glob match (`*` within one component, `**` across them for confirm paths)
//! and the one sentence every tool refuses a write through one with. How the entries are
//! held in the private view (bound, made, watched) is `safe_mcp_core::protected`, which
//! touches the disk.

use std::path::Path;

use serde::Serialize;

/// What a protected entry is, when it does not exist yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A directory: made empty when missing, then bound read-only.
    Dir,
    /// A file with a body that configures nothing: written when missing, then bound.
    Placeholder(&'static str),
    /// A file with no harmless body: watched when missing, moved aside if a command makes it.
    Watched,
}

/// Who named an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The built-in list.
    Default,
    /// The operator's `protected_paths`.
    Operator,
    /// The project's `.safe-mcp.toml`.
    Project,
    /// `[terminal.files] confirm_paths`: the file tools write there after a person's
    /// approval; commands may not write there at all.
    Confirm,
}

/// One protected path, relative to the jail (`*` matches within one component).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The path, as written.
    pub path: String,
    /// What it is when missing.
    pub kind: Kind,
    /// Who named it.
    pub source: Source,
}

/// The built-in list: git's own configuration and hooks, and the agent clients' project
/// configuration.
pub const DEFAULT: &[(&str, Kind)] = &[
    (".git/config", Kind::Watched),
    (".git/config.worktree", Kind::Watched),
    (".git/commondir", Kind::Watched),
    (".git/hooks", Kind::Dir),
    (".git/info", Kind::Dir),
    (".mcp.json", Kind::Placeholder("{\"mcpServers\": {}}\n")),
    (".claude", Kind::Dir),
    (".cursor", Kind::Dir),
    (".vscode", Kind::Dir),
    (".gemini", Kind::Dir),
    (".codex", Kind::Dir),
    (".idea", Kind::Dir),
];

/// The protected paths of one terminal policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProtectedPaths {
    /// In force.
    pub entries: Vec<Entry>,
    /// Default entries the operator removed (`unprotected_paths`): a named choice.
    pub removed: Vec<String>,
}

/// Why a protected-paths key is not valid.
pub fn check_entry(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() {
        return Err(format!("{path:?}: give a path relative to the jail"));
    }
    if p.components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(format!("{path:?}: no `.`, `..` or empty components"));
    }
    if path.contains(['?', '[', '{']) || path.contains("**") {
        return Err(format!(
            "{path:?}: only `*` within one component is a pattern"
        ));
    }
    Ok(())
}

impl ProtectedPaths {
    /// The defaults, plus `added` by `source`, minus `removed` (each must be a default).
    pub fn build(
        added: &[String],
        source: Source,
        removed: &[String],
    ) -> Result<ProtectedPaths, String> {
        for r in removed {
            if !DEFAULT.iter().any(|(d, _)| d == r) {
                return Err(format!(
                    "{r:?} is not a default protected path; the defaults are {}",
                    DEFAULT
                        .iter()
                        .map(|(d, _)| *d)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let mut out = ProtectedPaths {
            entries: DEFAULT
                .iter()
                .filter(|(d, _)| !removed.iter().any(|r| r == d))
                .map(|(d, kind)| Entry {
                    path: (*d).to_owned(),
                    kind: *kind,
                    source: Source::Default,
                })
                .collect(),
            removed: removed.to_vec(),
        };
        out.add(added, source)?;
        Ok(out)
    }

    /// Adds `paths` (a trailing `/` names a directory).
    pub fn add(&mut self, paths: &[String], source: Source) -> Result<(), String> {
        for p in paths {
            let (path, kind) = match p.strip_suffix('/') {
                Some(dir) => (dir, Kind::Dir),
                None => (p.as_str(), Kind::Watched),
            };
            check_entry(path)?;
            if !self.entries.iter().any(|e| e.path == path) {
                self.entries.push(Entry {
                    path: path.to_owned(),
                    kind,
                    source,
                });
            }
        }
        Ok(())
    }

    /// Adds `[terminal.files] confirm_paths` (`**` spans components here): held from
    /// commands as every entry is, written by the file tools after a person's approval.
    pub fn add_confirm(&mut self, paths: &[String]) -> Result<(), String> {
        for p in paths {
            check_entry(&p.replace("**", "x"))?;
            if !self.entries.iter().any(|e| e.path == *p) {
                self.entries.push(Entry {
                    path: p.clone(),
                    kind: Kind::Watched,
                    source: Source::Confirm,
                });
            }
        }
        Ok(())
    }

    /// The entry that `path` (absolute, inside `jail`, as the kernel would resolve it) is or
    /// lies beneath.
    pub fn covering(&self, jail: &Path, path: &Path) -> Option<&Entry> {
        let rel = path.strip_prefix(jail).ok()?;
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        self.entries.iter().find(|e| {
            let pattern: Vec<&str> = e.path.split('/').collect();
            let here = if pattern.contains(&"**") {
                (0..=parts.len()).any(|k| path_glob(&pattern, &parts[..k]))
            } else {
                pattern.len() <= parts.len()
                    && pattern.iter().zip(&parts).all(|(p, n)| glob_match(p, n))
            };
            // `.git/<name>` names the same file in every git directory: a nested
            // repository's, a submodule's under `.git/modules/**`, a worktree's entry.
            here || match pattern.as_slice() {
                [".git", name] => parts
                    .iter()
                    .position(|p| p == ".git")
                    .is_some_and(|i| parts[i + 1..].iter().any(|p| glob_match(name, p))),
                _ => false,
            }
        })
    }
}

/// Why a path is refused for being protected, in every tool that refuses one (commands by
/// argument, the file tools, the files server): the entry, why, what to do instead.
pub fn reason(entry: &str) -> String {
    format!(
        "`{entry}` is a protected path ([terminal] protected_paths): it configures programs that run outside the sandbox (the operator's git, editor or agent client), so nothing here may write, create or move it; read it, or ask the operator to change it"
    )
}

/// Whether `rel` (relative to a root, `/`-separated) is or lies beneath one of the default
/// protected paths: for the files server, which has no terminal policy of its own.
pub fn default_covering(rel: &str) -> Option<&'static str> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    DEFAULT.iter().map(|(d, _)| *d).find(|d| {
        let pattern: Vec<&str> = d.split('/').collect();
        pattern.len() <= parts.len() && pattern.iter().zip(&parts).all(|(p, n)| glob_match(p, n))
    })
}

/// Whether the components `name` match `pattern`: `**` any number of components, `*`
/// within one.
pub fn path_glob(pattern: &[&str], name: &[String]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((&"**", rest)) => (0..=name.len()).any(|skip| path_glob(rest, &name[skip..])),
        Some((first, rest)) => name
            .split_first()
            .is_some_and(|(n, more)| glob_match(first, n) && path_glob(rest, more)),
    }
}

/// `*` matches any run of characters (within one component); everything else itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.len() >= head.len()
                && name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| {
                    name.is_char_boundary(head.len() + i)
                        && glob_match(tail, &name[head.len() + i..])
                })
        }
    }
}
