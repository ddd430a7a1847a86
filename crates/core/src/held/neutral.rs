//! What the sweep does to a git directory the model made, and to any repository's
//! operation in progress, so that git run by the operator there runs nothing the model
//! wrote.
//!
//! A model-made git directory keeps its objects, refs and index (the model's work), and
//! loses what makes git run something: its configuration is rewritten from the inert keys
//! only ([`super::gitconfig`]), its hooks (all but git's `*.sample` files, which never run)
//! and a `commondir` that leads anywhere but another git directory in the jail go to the
//! quarantine. In every git directory, the operator's included, an operation left in
//! progress loses its `exec` lines and any merge strategy git does not build in: `git
//! rebase --continue` would run them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::area::{Area, AreaError};
use super::gitconfig;

/// One change the sweep made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Moved out of the jail (`to` is `None` when it was too large to keep and removed).
    Quarantined { path: PathBuf, to: Option<PathBuf> },
    /// A configuration rewritten from its inert keys; the model's version is at `to`.
    Rewritten {
        path: PathBuf,
        to: Option<PathBuf>,
        dropped: Vec<String>,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = |to: &Option<PathBuf>| match to {
            Some(to) => format!("the model's version is at {}", to.display()),
            None => "it was too large to keep and was removed".to_owned(),
        };
        match self {
            Change::Quarantined { path, to } => write!(
                f,
                "{} could make git run what the model wrote as the operator: moved out of the jail ({})",
                path.display(),
                kept(to)
            ),
            Change::Rewritten { path, to, dropped } => write!(
                f,
                "{} rewritten without what would make the operator's git run something ({}; {})",
                path.display(),
                dropped.join(", "),
                kept(to)
            ),
        }
    }
}

/// How much of a configuration or a todo list is read; a larger one is quarantined whole.
const MAX_READ: u64 = 1 << 20;

/// The merge strategies git builds in (`git merge -s`): any other name is a program git
/// looks up and runs.
const BUILTIN_STRATEGIES: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

/// Reads `path` when it is a regular file no larger than [`MAX_READ`]: `Ok(None)` when
/// missing, `Err(())` when it is something else (a symlink, a directory, too large).
fn read(path: &Path) -> Result<Option<String>, ()> {
    match crate::untrusted::read_small_file(path, MAX_READ) {
        Ok(Some(text)) => Ok(Some(text)),
        Ok(None) if std::fs::symlink_metadata(path).is_err() => Ok(None),
        _ => Err(()),
    }
}

/// Quarantines `path`.
fn out(area: &Area, jail: &Path, path: &Path) -> Result<Change, AreaError> {
    let to = area.quarantine(jail, path)?;
    Ok(Change::Quarantined {
        path: path.to_path_buf(),
        to,
    })
}

/// Moves the model's `path` out and writes the server's `body` in its place.
fn replace(
    area: &Area,
    jail: &Path,
    path: &Path,
    body: String,
    dropped: Vec<String>,
) -> Result<Change, AreaError> {
    let to = area.quarantine(jail, path)?;
    std::fs::write(path, body).map_err(|source| AreaError {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Change::Rewritten {
        path: path.to_path_buf(),
        to,
        dropped,
    })
}

/// Rewrites the configuration at `path` from its inert keys, when it holds anything else.
/// A remote given as a local path is kept unless it lies in one of `write_paths` outside
/// the jail (where no sweep holds a repository's hooks); relative, it is read from `base`.
pub(super) fn config(
    area: &Area,
    jail: &Path,
    path: &Path,
    base: &Path,
    write_paths: &[PathBuf],
) -> Result<Option<Change>, AreaError> {
    let text = match read(path) {
        Ok(None) => return Ok(None),
        Ok(Some(text)) => text,
        Err(()) => return out(area, jail, path).map(Some),
    };
    let (settings, unread) = gitconfig::parse(&text);
    let local_ok = |p: &str| {
        let target = crate::paths::lexical_normalize(&base.join(p));
        target.starts_with(jail) || !write_paths.iter().any(|w| target.starts_with(w))
    };
    let (kept, mut dropped) = gitconfig::keep_inert(&settings, &local_ok);
    if dropped.is_empty() && unread == 0 {
        return Ok(None);
    }
    if unread > 0 {
        dropped.push(format!("{unread} line(s) git's format was not read from"));
    }
    replace(area, jail, path, gitconfig::render(&kept), dropped).map(Some)
}

/// Neutralizes the model-made git directory `dir`.
pub(super) fn model_made(
    area: &Area,
    jail: &Path,
    dir: &Path,
    git_dirs: &BTreeSet<PathBuf>,
    write_paths: &[PathBuf],
) -> Result<Vec<Change>, AreaError> {
    let mut changes = Vec::new();
    // A `.git` directory's remotes are read from its work tree; a bare one's from itself.
    let base = match dir.file_name() {
        Some(n) if n == ".git" => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    for name in ["config", "config.worktree"] {
        changes.extend(config(area, jail, &dir.join(name), base, write_paths)?);
    }
    let hooks = dir.join("hooks");
    match std::fs::symlink_metadata(&hooks) {
        Ok(m) if m.is_dir() => {
            for entry in std::fs::read_dir(&hooks).into_iter().flatten().flatten() {
                let sample = entry.file_name().to_string_lossy().ends_with(".sample")
                    && entry.file_type().is_ok_and(|t| t.is_file());
                if !sample {
                    changes.push(out(area, jail, &entry.path())?);
                }
            }
        }
        Ok(_) => changes.push(out(area, jail, &hooks)?),
        Err(_) => {}
    }
    let commondir = dir.join("commondir");
    let leads_home = match read(&commondir) {
        Ok(None) => true,
        Ok(Some(text)) => {
            let target = crate::paths::lexical_normalize(&dir.join(text.trim_end_matches('\n')));
            target.starts_with(jail) && git_dirs.contains(&target)
        }
        Err(()) => false,
    };
    if !leads_home {
        changes.push(out(area, jail, &commondir)?);
    }
    Ok(changes)
}

/// A `.git` file or symlink the model made: kept when it leads to a git directory in the
/// jail (which the sweep holds), quarantined when it leads anywhere else.
pub(super) fn pointer(
    area: &Area,
    jail: &Path,
    path: &Path,
    git_dirs: &BTreeSet<PathBuf>,
) -> Result<Option<Change>, AreaError> {
    let parent = path.parent().unwrap_or(jail);
    let target = match std::fs::symlink_metadata(path) {
        Err(_) => return Ok(None),
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::read_link(path).ok().map(|t| parent.join(t))
        }
        Ok(_) => read(path)
            .ok()
            .flatten()
            .and_then(|t| t.strip_prefix("gitdir:").map(|g| parent.join(g.trim()))),
    };
    let home = target
        .map(|t| crate::paths::lexical_normalize(&t))
        .is_some_and(|t| t.starts_with(jail) && git_dirs.contains(&t));
    if home {
        Ok(None)
    } else {
        out(area, jail, path).map(Some)
    }
}

/// An operation left in progress in `dir`: `exec` lines leave its todo lists, and a merge
/// strategy git does not build in leaves with its file.
pub(super) fn in_progress(area: &Area, jail: &Path, dir: &Path) -> Result<Vec<Change>, AreaError> {
    let mut changes = Vec::new();
    for todo in ["rebase-merge/git-rebase-todo", "sequencer/todo"] {
        let path = dir.join(todo);
        let text = match read(&path) {
            Ok(None) => continue,
            Ok(Some(text)) => text,
            Err(()) => {
                changes.push(out(area, jail, &path)?);
                continue;
            }
        };
        let runs = |line: &&str| matches!(line.split_whitespace().next(), Some("x" | "exec"));
        if !text.lines().any(|l| runs(&l)) {
            continue;
        }
        let kept: String = text
            .lines()
            .filter(|l| !runs(l))
            .map(|l| format!("{l}\n"))
            .collect();
        changes.push(replace(area, jail, &path, kept, vec!["exec lines".into()])?);
    }
    let strategy = dir.join("rebase-merge/strategy");
    let foreign = match read(&strategy) {
        Ok(None) => false,
        Ok(Some(name)) => !BUILTIN_STRATEGIES.contains(&name.trim()),
        Err(()) => true,
    };
    if foreign {
        changes.push(out(area, jail, &strategy)?);
    }
    let opts = dir.join("sequencer/opts");
    if let Ok(Some(text)) = read(&opts) {
        let foreign = gitconfig::parse(&text).0.iter().any(|s| {
            s.key == "strategy"
                && !s
                    .value
                    .as_deref()
                    .is_some_and(|v| BUILTIN_STRATEGIES.contains(&v))
        });
        if foreign {
            changes.push(out(area, jail, &opts)?);
        }
    }
    Ok(changes)
}
