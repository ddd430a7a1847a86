//! `[terminal] write_paths`: directories outside the jail that commands may write (caches).
//!
//! A writable directory is a way to change what runs next, so the load refuses every one
//! that could: a system directory or an ancestor of one (`/`, `/usr`, `/etc`, `/var`, …:
//! binaries, configuration, cron), the server's own HOME or an ancestor of it (rc files), a
//! directory that holds or lies in another root, and one that holds a PATH entry, the audit
//! trail, its HMAC key, the files journal or the policy file itself. Each refusal names the
//! key and what it would have exposed.

use std::path::{Path, PathBuf};

use super::ConfigError;

const KEY: &str = "terminal.write_paths";

/// Trees a command must never write into. `/var/tmp` is the one exception beneath `/var`.
const SYSTEM: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
    "/run", "/sbin", "/sys", "/usr", "/var",
];

fn invalid(message: String) -> ConfigError {
    ConfigError::Invalid {
        key: KEY.to_owned(),
        message,
    }
}

/// Resolves and checks the write paths of one terminal section: each an existing directory,
/// canonical, and none of the kinds the module refuses that the section alone can tell.
pub(super) fn resolve(
    paths: Vec<PathBuf>,
    jail: &Path,
    path_dirs: &[PathBuf],
    home: Option<&Path>,
) -> Result<Vec<PathBuf>, ConfigError> {
    let mut resolved = Vec::with_capacity(paths.len());
    for p in paths {
        let real = std::fs::canonicalize(&p)
            .ok()
            .filter(|r| r.is_dir())
            .ok_or_else(|| invalid(format!("{} is not an existing directory", p.display())))?;
        let system = SYSTEM.iter().map(Path::new).find(|s| {
            (real.starts_with(s) && !real.starts_with("/var/tmp/")) || s.starts_with(&real)
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
        if let Some(home) = home.and_then(|h| std::fs::canonicalize(h).ok())
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
                return Err(invalid(format!(
                    "{} lets commands write the {what} {}; keep it outside every write path",
                    w.display(),
                    real.display()
                )));
            }
        }
        for (what, root) in roots {
            if w.starts_with(root) || root.starts_with(w) {
                return Err(invalid(format!(
                    "{} overlaps the {what} {}, another server's root",
                    w.display(),
                    root.display()
                )));
            }
        }
    }
    Ok(())
}
