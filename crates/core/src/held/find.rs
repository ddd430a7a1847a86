//! Every git directory in the jail, wherever it is and whoever made it.
//!
//! Git finds a repository by walking up from where it runs, and then more through it:
//! a `.git` directory, a `.git` *file* or symlink (`gitdir: …`: submodules, linked
//! worktrees), a bare repository (a directory with `HEAD`, `objects/` and `refs/`, which
//! git uses when run inside it), an absorbed submodule's git directory under
//! `<gitdir>/modules/**`, and a linked worktree's under `<gitdir>/worktrees/*`. The walk
//! finds all of them by that shape, at any depth, ignored directories included; it never
//! follows a symlink and never reads a file (the names and types from `readdir` are enough).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a walk of the jail found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Git directories: `.git` directories, bare repositories, `modules/**` and
    /// `worktrees/*` entries.
    pub git_dirs: BTreeSet<PathBuf>,
    /// `.git` entries that are files or symlinks: pointers to a git directory.
    pub pointers: BTreeSet<PathBuf>,
}

/// The entries of `dir`: names with whether each is a directory (never a symlink's target).
fn entries(dir: &Path) -> Vec<(std::ffi::OsString, bool, bool)> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    list.flatten()
        .filter_map(|e| {
            let t = e.file_type().ok()?;
            Some((e.file_name(), t.is_dir(), t.is_file() || t.is_symlink()))
        })
        .collect()
}

/// Whether a directory with `names` has a git directory's shape (`HEAD`, `objects/`,
/// `refs/`), as git's own `is_git_directory` asks; a linked worktree's has `HEAD` and
/// `commondir` instead.
fn git_shape(names: &[(std::ffi::OsString, bool, bool)]) -> bool {
    let has = |n: &str, dir: bool| {
        names
            .iter()
            .any(|(name, d, f)| name == n && (if dir { *d } else { *f }))
    };
    has("HEAD", false) && ((has("objects", true) && has("refs", true)) || has("commondir", false))
}

/// Walks `jail` for git directories and pointers; `visit` is told of each directory
/// before it is read (the sweep's watches: [`super::watch`]).
pub fn walk(jail: &Path, visit: &dyn Fn(&Path)) -> Found {
    let mut found = Found::default();
    let mut stack = vec![jail.to_path_buf()];
    while let Some(dir) = stack.pop() {
        visit(&dir);
        let names = entries(&dir);
        if dir != jail && git_shape(&names) {
            inside_git_dir(&dir, &names, &mut found, visit);
            continue;
        }
        for (name, is_dir, is_file) in &names {
            let path = dir.join(name);
            if name == ".git" {
                if *is_dir {
                    visit(&path);
                    let inner = entries(&path);
                    inside_git_dir(&path, &inner, &mut found, visit);
                } else if *is_file {
                    found.pointers.insert(path);
                }
            } else if *is_dir {
                stack.push(path);
            }
        }
    }
    found
}

/// What beneath a git directory the sweep reads: its hooks and an operation in progress.
const WATCHED_INSIDE: &[&str] = &["hooks", "rebase-merge", "rebase-apply", "sequencer"];

/// Records the git directory `dir` (already visited) and what lies in its `modules/` and
/// `worktrees/`.
fn inside_git_dir(
    dir: &Path,
    names: &[(std::ffi::OsString, bool, bool)],
    found: &mut Found,
    visit: &dyn Fn(&Path),
) {
    found.git_dirs.insert(dir.to_path_buf());
    for (name, is_dir, _) in names {
        if *is_dir && WATCHED_INSIDE.iter().any(|w| name == w) {
            visit(&dir.join(name));
        }
        if !is_dir || (name != "modules" && name != "worktrees") {
            continue;
        }
        // A submodule's name may hold `/`: descend until a git directory's shape appears.
        let mut stack = vec![dir.join(name)];
        while let Some(d) = stack.pop() {
            visit(&d);
            for (n, sub_dir, _) in entries(&d) {
                if !sub_dir {
                    continue;
                }
                let p = d.join(&n);
                visit(&p);
                let inner = entries(&p);
                if git_shape(&inner) {
                    inside_git_dir(&p, &inner, found, visit);
                } else if name == "modules" {
                    stack.push(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_of_git_directory_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path();
        let mk = |p: &str| std::fs::create_dir_all(j.join(p)).unwrap();
        let file = |p: &str| std::fs::write(j.join(p), "x").unwrap();
        for g in [
            ".git",
            "deep/er/sub/.git",
            "bare.git",
            ".git/modules/a/b",
            ".git/modules/c",
        ] {
            mk(&format!("{g}/objects"));
            mk(&format!("{g}/refs"));
            file(&format!("{g}/HEAD"));
        }
        mk(".git/worktrees/w");
        file(".git/worktrees/w/HEAD");
        file(".git/worktrees/w/commondir");
        mk("wt");
        file("wt/.git");
        mk("ignored/node_modules/x");
        std::os::unix::fs::symlink("/etc", j.join("ignored/link")).unwrap();
        let found = walk(j, &|_| {});
        let rel: Vec<String> = found
            .git_dirs
            .iter()
            .map(|p| p.strip_prefix(j).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                ".git",
                ".git/modules/a/b",
                ".git/modules/c",
                ".git/worktrees/w",
                "bare.git",
                "deep/er/sub/.git"
            ]
        );
        assert_eq!(found.pointers, BTreeSet::from([j.join("wt/.git")]));
    }
}
