//! `[terminal] write_paths`: directories outside the jail that commands may write (caches).
//!
//! A writable directory is a way to change what runs next, so the load refuses every one
//! that could: a system directory or an ancestor of one (`/`, `/usr`, `/etc`, `/var`, …:
//! binaries, configuration, cron), the server's own HOME or an ancestor of it (rc files),
//! the trees beneath HOME that configure or hold what the user runs (`~/.config`, `~/.ssh`,
//! `~/.local`, `~/.cargo`, …), a directory that holds or lies in another root, and one that
//! holds a PATH entry, the audit trail, its HMAC key, the files journal or the policy file
//! itself. A directory of its own beneath HOME is fine, root's included (`/root/.cache/…`):
//! a user's home holds its caches. Each refusal names the key that fixes it and what it
//! would have exposed.

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// The key of the operator's own write paths.
pub(super) const WRITE_PATHS: &str = "terminal.write_paths";

/// The trees beneath a HOME that configure or hold what its user runs: a write path there
/// is refused even though HOME itself is the user's own.
const HOME_CONFIG: &[&str] = &[
    ".config",
    ".ssh",
    ".gnupg",
    ".local",
    ".cargo",
    ".rustup",
    ".pyenv",
    ".npm",
    ".nvm",
    ".bashrc.d",
    ".docker",
    ".kube",
    ".aws",
];

/// Trees a command must never write into. `/var/tmp` is the one exception beneath `/var`.
const SYSTEM: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
    "/run", "/sbin", "/sys", "/usr", "/var",
];

fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        message,
    }
}

/// Whether the directories checked must exist now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Made {
    /// The operator's: they exist already.
    Already,
    /// The profiles' caches, which a starting server makes: a missing one is judged by where
    /// it would be (its nearest existing ancestor, canonical, and the rest).
    AtStart,
}

/// Where `p` is or would be: canonical, through its nearest existing ancestor.
fn would_be(p: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = p.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&at) {
            return Some(rest.iter().rev().fold(real, |acc, c| acc.join(c)));
        }
        rest.push(at.file_name()?.to_owned());
        at = at.parent()?.to_path_buf();
    }
}

/// Resolves and checks the write paths of one terminal section: each a directory, canonical,
/// and none of the kinds the module refuses that the section alone can tell. `key` is the key
/// a refusal names: `terminal.write_paths` for the operator's own, or `terminal.cache_dir`
/// for the profiles' caches beneath it.
pub(super) fn resolve(
    key: &str,
    paths: Vec<PathBuf>,
    jail: &Path,
    path_dirs: &[PathBuf],
    home: Option<&Path>,
    made: Made,
) -> Result<Vec<PathBuf>, ConfigError> {
    let invalid = |message: String| invalid(key, message);
    let home = home.and_then(|h| std::fs::canonicalize(h).ok());
    // Beneath a HOME of the user's own (not `/`, not a system tree itself) is fine.
    let own_home = home.as_deref().filter(|h| {
        *h == Path::new("/root") || !SYSTEM.iter().map(Path::new).any(|s| s.starts_with(h))
    });
    let mut resolved = Vec::with_capacity(paths.len());
    for p in paths {
        let real = if made == Made::AtStart && !p.exists() {
            would_be(&p).filter(|r| r.is_absolute())
        } else {
            std::fs::canonicalize(&p).ok().filter(|r| r.is_dir())
        }
        .ok_or_else(|| invalid(format!("{} is not an existing directory", p.display())))?;
        let beneath_home = own_home.is_some_and(|h| real.starts_with(h) && real != h);
        if let Some(h) = own_home.filter(|_| beneath_home)
            && let Some(tree) = HOME_CONFIG
                .iter()
                .map(|t| h.join(t))
                .find(|t| real.starts_with(t) || t.starts_with(&real))
        {
            return Err(invalid(format!(
                "{} would let commands write {}, which configures or holds what you run; name a directory of its own, such as {}/.cache/safe-mcp",
                p.display(),
                tree.display(),
                h.display()
            )));
        }
        let system = SYSTEM.iter().map(Path::new).find(|s| {
            !beneath_home
                && ((real.starts_with(s) && !real.starts_with("/var/tmp/")) || s.starts_with(&real))
        });
        if let Some(system) = system {
            return Err(invalid(format!(
                "{} would let commands write {}; name a directory of its own, such as a cache under /var/tmp or your home",
                p.display(),
                system.display()
            )));
        }
        if real.starts_with(jail) || jail.starts_with(&real) {
            return Err(invalid(format!(
                "{} overlaps the jail {}; the jail is writable already, and a write path must lie outside it",
                p.display(),
                jail.display()
            )));
        }
        if let Some(home) = home.as_deref()
            && home.starts_with(&real)
        {
            return Err(invalid(format!(
                "{} holds the server's HOME {}, whose rc files configure the next login; name a subdirectory such as {}/.cache/<tool>",
                p.display(),
                home.display(),
                home.display()
            )));
        }
        if let Some(dir) = path_dirs.iter().find(|d| {
            std::fs::canonicalize(d)
                .unwrap_or_else(|_| (*d).clone())
                .starts_with(&real)
        }) {
            return Err(invalid(format!(
                "{} holds the PATH entry {}: a command could plant the next program that runs",
                p.display(),
                dir.display()
            )));
        }
        resolved.push(real);
    }
    Ok(resolved)
}

/// Refuses a write path that holds one of `kept` (what, path) or lies in one of `roots`.
pub(super) fn keep_out(
    write_paths: &[PathBuf],
    kept: &[(&str, &Path)],
    roots: &[(&str, &Path)],
) -> Result<(), ConfigError> {
    for w in write_paths {
        for (what, path) in kept {
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            // A kept directory (the spool) must not hold a write path either.
            if real.starts_with(w) || (real.is_dir() && w.starts_with(&real)) {
                return Err(invalid(
                    WRITE_PATHS,
                    format!(
                        "{} lets commands write the {what} {}; keep it outside every write path",
                        w.display(),
                        real.display()
                    ),
                ));
            }
        }
        for (what, root) in roots {
            if w.starts_with(root) || root.starts_with(w) {
                return Err(invalid(
                    WRITE_PATHS,
                    format!(
                        "{} overlaps the {what} {}, another server's root",
                        w.display(),
                        root.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}
