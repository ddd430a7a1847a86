//! Where a git command's repository keeps its git directory, judged before it runs.
//!
//! A worktree (`git worktree add`) or a submodule has a `.git` *file* whose `gitdir:` line
//! points at a directory elsewhere, often outside the jail. There the kernel confinement
//! refuses git's reads and writes with errors that say nothing useful ("not a git
//! repository", "Permission denied"). So the repository a git command starts from (its cwd,
//! or its last `-C`) is found here first, walking up to the jail root: a `.git` directory in
//! the jail is fine; a `.git` file or symlink pointing inside the jail or beneath a
//! `write_paths` entry is fine (the kernel grants that); anything else is refused with the
//! reason and the remedy. Only reads the file system; never follows a name out of the jail
//! except to canonicalize the named git directory; asks the machine through a
//! [`Resolver`].

use std::path::{Path, PathBuf};

use crate::jail::{Entry, Resolver};

/// How much of a `.git` file is read.
const MAX_BYTES: u64 = 4096;

/// Checks the repository a `git argv` run from `cwd` would use.
pub fn check(
    fs: &dyn Resolver,
    argv: &[String],
    cwd: &Path,
    jail: &Path,
    write_paths: &[PathBuf],
) -> Result<(), String> {
    let mut start = cwd.to_path_buf();
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        if a == "-C"
            && let Some(dir) = args.next()
        {
            start = start.join(dir);
        } else if !a.starts_with('-') {
            break; // the subcommand: -C only comes before it
        }
    }
    let mut dir = start.as_path();
    loop {
        let dot_git = dir.join(".git");
        match fs.entry(&dot_git) {
            Some(Entry::Dir) => return Ok(()),
            Some(Entry::File) => {
                return judge(fs, &dot_git, &gitdir_of(fs, &dot_git)?, jail, write_paths);
            }
            Some(Entry::Symlink) => {
                let target = fs
                    .read_link(&dot_git)
                    .ok_or_else(|| format!("{}: not a symlink any more", dot_git.display()))?;
                return judge(fs, &dot_git, &dir.join(target), jail, write_paths);
            }
            _ => {}
        }
        if dir == jail {
            return Ok(());
        }
        match dir.parent() {
            Some(parent) if parent.starts_with(jail) => dir = parent,
            _ => return Ok(()),
        }
    }
}

/// The directory a `.git` file's `gitdir:` line names, relative to the file's directory.
fn gitdir_of(fs: &dyn Resolver, dot_git: &Path) -> Result<PathBuf, String> {
    // The model controls this file: a FIFO or a lease must not stall the server.
    let text = fs
        .read_small(dot_git, MAX_BYTES)?
        .ok_or_else(|| format!("{} vanished while it was read", dot_git.display()))?;
    let named = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .ok_or_else(|| format!("{} has no gitdir: line", dot_git.display()))?;
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    Ok(base.join(named))
}

fn judge(
    fs: &dyn Resolver,
    dot_git: &Path,
    named: &Path,
    jail: &Path,
    write_paths: &[PathBuf],
) -> Result<(), String> {
    let Some(real) = fs.canonicalize(named) else {
        return Err(format!(
            "{} points at {}, which does not exist",
            dot_git.display(),
            named.display()
        ));
    };
    if real.starts_with(jail) || write_paths.iter().any(|w| real.starts_with(w)) {
        return Ok(());
    }
    Err(format!(
        "this repository's git directory is {} (named by {}: a worktree or submodule), outside the jail; the operator can add it, or the main repository's .git, to [terminal] write_paths",
        real.display(),
        dot_git.display()
    ))
}
