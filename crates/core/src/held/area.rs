//! The server's own place outside the jail: what it saw (`state.json`) and what it moved
//! out of the jail (`quarantine/`).
//!
//! It sits beside the audit trail (`<audit_log>.held/`, mode 0700), which the policy
//! already keeps outside the jail and every write path, so no command and no file tool
//! can reach it. Nothing the model can pre-create decides where something goes: each
//! quarantined item gets a fresh name made from a counter the server keeps.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the server saw, kept across its runs.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct State {
    /// The jail this state is for.
    pub jail: PathBuf,
    /// The operator's git directories and `.git` pointers (present when the server first
    /// saw the jail, or made while no server ran).
    pub adopted: Vec<PathBuf>,
    /// Git directories the model made (neutralized at every sweep, never adopted).
    pub model_made: Vec<PathBuf>,
    /// What the server made to hold a path (empty directories, placeholders), removed at
    /// exit; a killed server's are removed at the next start.
    pub made: Vec<PathBuf>,
    /// Lines the server added to a `.git/info/exclude`, removed with what they hid.
    pub excluded: Vec<(PathBuf, String)>,
    /// Whether the last run ended with its exit sweep.
    pub clean: bool,
}

/// Why the server's place could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct AreaError {
    /// The path that failed.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

fn err(path: &Path) -> impl FnOnce(std::io::Error) -> AreaError + '_ {
    move |source| AreaError {
        path: path.to_path_buf(),
        source,
    }
}

/// The server's place for one jail. Nothing is made on disk until something is kept there:
/// a trail directory that is read-only now (the calls get `AUDIT_UNAVAILABLE` then) does not
/// stop a server that has nothing to move.
#[derive(Debug)]
pub struct Area {
    dir: PathBuf,
    /// The last number given to a quarantined item; `None` until the quarantine is made.
    seq: std::sync::Mutex<Option<u64>>,
}

/// How much of a model-made item is copied out when it cannot be renamed (another file
/// system); past this it is removed, and the record says so.
const MAX_COPY_BYTES: u64 = 16 << 20;

impl Area {
    /// The place at `dir`.
    pub fn at(dir: PathBuf) -> Area {
        Area {
            dir,
            seq: std::sync::Mutex::new(None),
        }
    }

    /// Makes the place (0700) and its quarantine, and the next number to use.
    fn next(&self) -> Result<u64, AreaError> {
        use std::os::unix::fs::DirBuilderExt;
        let mut seq = self.seq.lock().map_err(|_| AreaError {
            path: self.dir.clone(),
            source: std::io::Error::other("a lock was poisoned"),
        })?;
        let last = match *seq {
            Some(n) => n,
            None => {
                let quarantine = self.dir.join("quarantine");
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&quarantine)
                    .map_err(err(&quarantine))?;
                std::fs::read_dir(&quarantine)
                    .map_err(err(&quarantine))?
                    .flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .split('-')
                            .next()?
                            .parse::<u64>()
                            .ok()
                    })
                    .max()
                    .unwrap_or(0)
            }
        };
        *seq = Some(last + 1);
        Ok(last + 1)
    }

    /// Takes the place for this server's run (an exclusive `flock` on `lock` in it, held as
    /// long as the returned file is open): `None` when another running server holds it
    /// (two servers on one trail), which then owns what is kept there.
    pub fn claim(&self) -> Option<std::fs::File> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .ok()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.dir.join("lock"))
            .ok()?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
        Some(file)
    }

    /// Where it is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state of the last run, if any (an unreadable one counts as none, said by the
    /// caller as a first start).
    pub fn load(&self) -> Option<State> {
        let path = self.dir.join("state.json");
        let text = crate::untrusted::read_small_file(&path, 16 << 20)
            .ok()
            .flatten()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes `state` (a temporary file renamed over the old one).
    pub fn save(&self, state: &State) -> Result<(), AreaError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(err(&self.dir))?;
        let path = self.dir.join("state.json");
        let tmp = self.dir.join("state.json.tmp");
        let text = serde_json::to_vec_pretty(state).unwrap_or_default();
        std::fs::write(&tmp, text).map_err(err(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(err(&path))
    }

    /// Moves `path` (never followed) out of the jail into the quarantine, under a fresh
    /// name that says where it was. Returns where it went, or `None` when it was too large
    /// to copy across file systems and was removed instead.
    pub fn quarantine(&self, jail: &Path, path: &Path) -> Result<Option<PathBuf>, AreaError> {
        // The breach names what had to go, and why it could not.
        let n = self.next().map_err(|e| AreaError {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let rel = path.strip_prefix(jail).unwrap_or(path);
        let flat: String = rel
            .to_string_lossy()
            .chars()
            .map(|c| if c == '/' { '%' } else { c })
            .take(160)
            .collect();
        let dest = self.dir.join("quarantine").join(format!("{n}-{flat}"));
        match std::fs::rename(path, &dest) {
            Ok(()) => Ok(Some(dest)),
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
                let kept = if size(path) <= MAX_COPY_BYTES {
                    copy_tree(path, &dest).map_err(err(&dest))?;
                    Some(dest)
                } else {
                    None
                };
                remove_tree(path).map_err(err(path))?;
                Ok(kept)
            }
            Err(e) => Err(AreaError {
                path: path.to_path_buf(),
                source: e,
            }),
        }
    }
}

fn size(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|l| l.flatten().map(|e| size(&e.path())).sum())
        .unwrap_or(0)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_dir() {
        std::fs::create_dir(to)?;
        for e in std::fs::read_dir(from)?.flatten() {
            copy_tree(&e.path(), &to.join(e.file_name()))?;
        }
        Ok(())
    } else if meta.is_file() {
        std::fs::copy(from, to).map(|_| ())
    } else {
        Ok(()) // a fifo or socket holds nothing to keep
    }
}

/// Removes `path`, a directory with what it holds, never following a symlink.
pub(super) fn remove_tree(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarantined_item_gets_a_fresh_name_the_model_cannot_pre_empt() {
        let (_dir, base) = crate::testing::scratch(&["jail/.git"]);
        let jail = base.join("jail");
        let area = Area::at(base.join("held"));
        for _ in 0..3 {
            std::fs::write(jail.join(".git/commondir"), "../x").unwrap();
            let to = area
                .quarantine(&jail, &jail.join(".git/commondir"))
                .unwrap()
                .unwrap();
            assert!(to.starts_with(area.dir()) && to.exists());
            assert!(!jail.join(".git/commondir").exists());
        }
        // A reopened area goes on counting from what is there.
        let again = Area::at(base.join("held"));
        std::fs::write(jail.join("x"), "1").unwrap();
        let to = again.quarantine(&jail, &jail.join("x")).unwrap().unwrap();
        assert!(
            to.file_name().unwrap().to_str().unwrap().starts_with("4-"),
            "{to:?}"
        );
        let state = State {
            jail: jail.clone(),
            clean: true,
            ..State::default()
        };
        again.save(&state).unwrap();
        assert_eq!(again.load(), Some(state));
    }
}
