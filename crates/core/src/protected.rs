//! `[terminal] protected_paths`: files in the jail that configure programs *outside* it.
//!
//! The jail is writable, and some files in it tell other programs what to run later,
//! unconfined, as the operator: git's `.git/config` (`core.fsmonitor`, `core.hooksPath`,
//! aliases, filters) and `.git/hooks/*` on the operator's own `git status` or `git commit`;
//! the agent clients' project configuration (`.mcp.json`, `.claude/`, `.vscode/tasks.json`,
//! `.gemini/settings.json`, …) when the operator opens the project. These paths are
//! protected: the default list below, plus the operator's `protected_paths` (and the project
//! file's, which may only add), minus the operator's `unprotected_paths` (a named choice).
//!
//! The list and its glob match are [`safe_mcp_rules::protected`], re-exported here; this
//! module owns what touches the disk: the plan that holds each
//! non-git entry in the private view ([`plan`]): an existing one is bound read-only over
//! itself; a missing directory is made empty first (and removed at exit), and in a
//! repository a missing file with a harmless body (`.mcp.json`: no servers) is written
//! first, and excluded from git, so that it too can be bound; a file with no harmless body
//! (`.mcp.json` outside a repository) is watched instead: if a command makes it, it is moved
//! out of the jail. The `.git/…` entries name the trust files of *every* git directory in
//! the jail, which [`crate::held`] holds. The directories between the jail and each bound
//! path are bound onto themselves, read-write, so that a command cannot rename them away and
//! plant a fresh copy. Argument checks ([`crate::policy`]) and the file tools refuse writes
//! through them too, which is what holds in the host view. It never follows a symlink out
//! of the jail.

pub use safe_mcp_rules::protected::{
    DEFAULT, Entry, Kind, ProtectedPaths, Source, check_entry, default_covering, glob_match,
    path_glob, reason,
};

use std::path::{Path, PathBuf};

/// How the protected paths are held in the private view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Bound read-only over themselves.
    pub read_only: Vec<PathBuf>,
    /// Directories between the jail and a bound path, bound read-write onto themselves so
    /// that they cannot be renamed away.
    pub pinned: Vec<PathBuf>,
    /// Missing files a command must not make: moved aside when one appears.
    pub watched: Vec<PathBuf>,
    /// What [`plan`] made to hold a missing entry (for the reports).
    pub made: Vec<PathBuf>,
    /// Lines added to a `.git/info/exclude` for a placeholder: the file and the line.
    pub excluded: Vec<(PathBuf, String)>,
}

/// The existing paths `entry` names beneath `jail` (its `*` expanded), never through a
/// symlink; or the one path it names when it has no pattern and does not exist.
fn expand(jail: &Path, entry: &Entry) -> Vec<(PathBuf, bool)> {
    if entry.path.contains("**") {
        return Vec::new(); // held by argument only (THREAT_MODEL)
    }
    let mut found = vec![jail.to_path_buf()];
    let parts: Vec<&str> = entry.path.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for dir in &found {
            if part.contains('*') {
                let Ok(list) = std::fs::read_dir(dir) else {
                    continue;
                };
                for e in list.flatten() {
                    if glob_match(part, &e.file_name().to_string_lossy()) {
                        next.push(e.path());
                    }
                }
            } else {
                next.push(dir.join(part));
            }
        }
        // Every component but the last must be a real directory (no symlink out).
        found = next
            .into_iter()
            .filter(|p| last || std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_dir()))
            .collect();
    }
    found
        .into_iter()
        .map(|p| {
            let exists = std::fs::symlink_metadata(&p).is_ok();
            (p, exists)
        })
        .filter(|(_, exists)| *exists || !entry.path.contains('*'))
        .collect()
}

/// Plans how to hold `paths` in `jail`; with `make`, also makes the missing directories and
/// placeholder files (only a starting server does: a plan for a report changes nothing).
pub fn plan(jail: &Path, paths: &ProtectedPaths, make: bool) -> Result<Plan, String> {
    let mut out = Plan::default();
    let repository = std::fs::symlink_metadata(jail.join(".git")).is_ok_and(|m| m.is_dir());
    for entry in &paths.entries {
        if entry.path.split('/').next() == Some(".git") {
            continue; // every git directory's trust surface is held by `crate::held`
        }
        for (path, exists) in expand(jail, entry) {
            let Some(parent) = path.parent() else {
                continue;
            };
            if !std::fs::symlink_metadata(parent).is_ok_and(|m| m.is_dir()) {
                continue; // its parent does not exist (and cannot be made without making it)
            }
            if exists {
                let meta = std::fs::symlink_metadata(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if meta.file_type().is_symlink() {
                    return Err(format!(
                        "the protected path {} is a symlink; replace it with what it points at, or remove it, and start again",
                        path.display()
                    ));
                }
                out.read_only.push(path);
                continue;
            }
            if entry.source == Source::Confirm {
                // A person may approve the file tools' write of a missing one: commands are
                // kept from making it by argument only (THREAT_MODEL).
                continue;
            }
            match entry.kind {
                // A placeholder is hidden from git by the repository's exclude file; in a
                // jail that is no repository it would show as a new file (and be committed
                // once the model runs `git init`), so there it is watched instead.
                Kind::Watched => out.watched.push(path),
                Kind::Placeholder(_) if !repository => out.watched.push(path),
                Kind::Dir | Kind::Placeholder(_) if !make => out.made.push(path),
                Kind::Dir => {
                    std::fs::create_dir(&path)
                        .map_err(|e| format!("cannot make {}: {e}", path.display()))?;
                    out.made.push(path.clone());
                    out.read_only.push(path);
                }
                Kind::Placeholder(body) => {
                    std::fs::write(&path, body)
                        .map_err(|e| format!("cannot make {}: {e}", path.display()))?;
                    if repository && parent == jail {
                        out.excluded.extend(exclude_from_git(jail, &path)?);
                    }
                    out.made.push(path.clone());
                    out.read_only.push(path);
                }
            }
        }
    }
    pin(&mut out, &[jail]);
    Ok(out)
}

/// Sets `plan.pinned` to the directories between each read-only path and the root of
/// `roots` (the jail, the write paths) that holds it.
pub fn pin(plan: &mut Plan, roots: &[&Path]) {
    plan.pinned.clear();
    for path in &plan.read_only {
        let Some(root) = roots.iter().find(|r| path.starts_with(r)) else {
            continue;
        };
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == *root || !d.starts_with(root) {
                break;
            }
            if !plan.pinned.iter().any(|p| p == d) && !plan.read_only.iter().any(|p| p == d) {
                plan.pinned.push(d.to_path_buf());
            }
            dir = d.parent();
        }
    }
}

/// The comment line written above each exclude line the server adds.
const EXCLUDE_COMMENT: &str = "# safe-mcp: a read-only placeholder (protected_paths)";

/// Adds the placeholder `path` to the repository's `.git/info/exclude`, so that it never
/// shows as untracked (nor is committed by a `git add -A`). Returns the file and line when
/// it added one (removed again at exit: [`unexclude`]).
fn exclude_from_git(jail: &Path, path: &Path) -> Result<Option<(PathBuf, String)>, String> {
    use std::io::Write;
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(None);
    };
    let info = jail.join(".git/info");
    if !std::fs::symlink_metadata(&info).is_ok_and(|m| m.is_dir()) {
        std::fs::create_dir(&info).map_err(|e| format!("cannot make {}: {e}", info.display()))?;
    }
    let exclude = info.join("exclude");
    let line = format!("/{name}");
    let known = crate::untrusted::read_small_file(&exclude, 1 << 20)
        .ok()
        .flatten()
        .is_some_and(|text| text.lines().any(|l| l.trim() == line));
    if known {
        return Ok(None);
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&exclude)
        .map_err(|e| format!("{}: {e}", exclude.display()))?;
    writeln!(file, "{EXCLUDE_COMMENT}\n{line}")
        .map_err(|e| format!("{}: {e}", exclude.display()))?;
    Ok(Some((exclude, line)))
}

/// Takes out of `file` the `line` that adding a placeholder wrote, with its comment.
pub fn unexclude(file: &Path, line: &str) {
    let Ok(Some(text)) = crate::untrusted::read_small_file(file, 1 << 20) else {
        return;
    };
    let block = format!("{EXCLUDE_COMMENT}\n{line}\n");
    if text.contains(&block) {
        let _ = std::fs::write(file, text.replacen(&block, "", 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_one_component_and_what_lies_beneath() {
        let p = ProtectedPaths::build(
            &["build/*.sh".into(), "tools/".into()],
            Source::Operator,
            &[".idea".into()],
        )
        .unwrap();
        let jail = Path::new("/j");
        let hit = |rel: &str| p.covering(jail, &jail.join(rel)).map(|e| e.path.clone());
        assert_eq!(hit(".git/hooks/pre-commit").as_deref(), Some(".git/hooks"));
        assert_eq!(hit(".vscode/tasks.json").as_deref(), Some(".vscode"));
        assert_eq!(hit("build/run.sh").as_deref(), Some("build/*.sh"));
        assert_eq!(hit("tools/x").as_deref(), Some("tools"));
        assert_eq!(hit(".idea/workspace.xml"), None, "removed by the operator");
        assert_eq!(hit(".git/objects/ab"), None);
        assert_eq!(hit("src/.vscode"), None, "relative to the jail root only");
        assert!(ProtectedPaths::build(&[], Source::Operator, &["src".into()]).is_err());
        assert!(ProtectedPaths::build(&["../x".into()], Source::Operator, &[]).is_err());
    }

    #[test]
    fn the_plan_binds_what_exists_makes_what_is_missing_and_git_entries_match_at_any_depth() {
        let (_dir, jail) = crate::testing::scratch(&[".git/hooks"]);
        std::fs::write(jail.join(".git/config"), "[core]\n").unwrap();
        let paths = ProtectedPaths::build(&[], Source::Operator, &[]).unwrap();
        let dry = plan(&jail, &paths, false).unwrap();
        assert!(
            !jail.join(".vscode").exists(),
            "a plan without make changes nothing"
        );
        assert!(dry.made.contains(&jail.join(".vscode")));
        let p = plan(&jail, &paths, true).unwrap();
        for bound in [".vscode", ".mcp.json"] {
            assert!(p.read_only.contains(&jail.join(bound)), "{bound}: {p:?}");
        }
        assert!(p.pinned.is_empty(), "{p:?}");
        assert_eq!(
            p.excluded.len(),
            1,
            "the placeholder is hidden from git: {p:?}"
        );
        unexclude(&p.excluded[0].0, &p.excluded[0].1);
        assert_eq!(
            std::fs::read_to_string(jail.join(".git/info/exclude")).unwrap(),
            "",
            "and shown again when the server goes"
        );
        let hit = |rel: &str| {
            paths
                .covering(&jail, &jail.join(rel))
                .map(|e| e.path.clone())
        };
        assert_eq!(hit("sub/.git/config").as_deref(), Some(".git/config"));
        assert_eq!(hit(".git/modules/m/hooks/x").as_deref(), Some(".git/hooks"));
        assert_eq!(
            hit(".git/worktrees/w/commondir").as_deref(),
            Some(".git/commondir")
        );
        assert_eq!(hit("sub/.git/objects/ab"), None);
    }
}
