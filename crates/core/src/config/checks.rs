//! Checks the loader applies to single values: the HMAC key file, bare program names, roots
//! that exist, paths kept outside every root, the fixed environment variables, and a
//! server's name in a fleet.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::error::ConfigError;
use crate::paths::lexical_normalize;

/// Reads a secret key file (`audit_hmac_key_file`, `[terminal.approvals] state_key_file`,
/// named by `key`): mode 0600, at least 16 bytes, outside every root and every path a
/// command may read, so that no command can learn it.
pub(super) fn secret_key(
    key: &'static str,
    path: &Path,
    roots: &[PathBuf],
    read_paths: &[PathBuf],
) -> Result<Vec<u8>, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let invalid = |message: String| ConfigError::Invalid {
        key: key.to_owned(),
        message,
    };
    let real =
        std::fs::canonicalize(path).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    let meta = std::fs::metadata(&real).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return Err(invalid(format!(
            "{} must be a regular file with mode 0600",
            path.display()
        )));
    }
    not_inside(key, path, &real, roots)?;
    for readable in read_paths {
        let readable = std::fs::canonicalize(readable).unwrap_or_else(|_| readable.clone());
        if real.starts_with(&readable) {
            return Err(invalid(format!(
                "{} lies under the sandbox read path {}, where commands could read it",
                path.display(),
                readable.display()
            )));
        }
    }
    let bytes = std::fs::read(&real).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    if bytes.len() < 16 {
        return Err(invalid("the key must hold at least 16 bytes".into()));
    }
    Ok(bytes)
}

pub(super) fn program_names(
    key: &str,
    names: Vec<String>,
) -> Result<BTreeSet<String>, ConfigError> {
    let mut set = BTreeSet::new();
    for name in names {
        if name.is_empty()
            || name.contains('/')
            || name.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ConfigError::Invalid {
                key: key.to_owned(),
                message: format!("{name:?} is not a bare program name"),
            });
        }
        set.insert(name);
    }
    Ok(set)
}

pub(super) fn existing_root(key: &'static str, path: &Path) -> Result<PathBuf, ConfigError> {
    let real = std::fs::canonicalize(path)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| ConfigError::RootNotDirectory {
            key,
            path: path.to_path_buf(),
        })?;
    if real == Path::new("/") {
        return Err(ConfigError::Invalid {
            key: key.to_owned(),
            message: "the filesystem root cannot be a jail".into(),
        });
    }
    Ok(real)
}

/// Refuses `path`, resolved as `real`, when it lies inside any root.
fn not_inside(
    key: &'static str,
    path: &Path,
    real: &Path,
    roots: &[PathBuf],
) -> Result<(), ConfigError> {
    match roots.iter().find(|root| real.starts_with(root)) {
        Some(root) => Err(ConfigError::InsideRoot {
            key,
            path: path.to_path_buf(),
            root: root.clone(),
        }),
        None => Ok(()),
    }
}

/// Resolves `path` (whose parent must exist) and refuses it inside any root.
pub(super) fn outside_roots(
    key: &'static str,
    path: &Path,
    roots: &[PathBuf],
) -> Result<PathBuf, ConfigError> {
    let normal = lexical_normalize(path);
    let (parent, name) = match (normal.parent(), normal.file_name()) {
        (Some(parent), Some(name)) => (parent, name),
        _ => {
            return Err(ConfigError::Invalid {
                key: key.to_owned(),
                message: format!("{} is not a file path", path.display()),
            });
        }
    };
    let parent = std::fs::canonicalize(parent).map_err(|e| ConfigError::Invalid {
        key: key.to_owned(),
        message: format!("directory {} is not usable: {e}", parent.display()),
    })?;
    let mut real = parent.join(name);
    if let Ok(target) = std::fs::canonicalize(&real) {
        real = target; // an existing symlink is judged by where it points
    }
    not_inside(key, path, &real, roots)?;
    Ok(real)
}

/// Variables a command's environment keeps whatever `[terminal.env]` says: the server sets
/// them (or pins them) and an override would undo a protection.
pub(super) const FIXED_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
];

/// `first`, then what of `more` is not in it yet, in order.
pub(super) fn union(
    mut first: Vec<PathBuf>,
    more: impl IntoIterator<Item = PathBuf>,
) -> Vec<PathBuf> {
    for p in more {
        if !first.contains(&p) {
            first.push(p);
        }
    }
    first
}

/// The helpers of the exec allowlist (`key`): each a bare program name (found on the PATH
/// at start) or an absolute path, never inside the jail (where a command could replace it
/// with anything) nor `/`, and never a program the denylist refuses.
pub(super) fn helper_entries(
    key: &str,
    helpers: &[String],
    jail_root: &Path,
    deny: &BTreeSet<String>,
) -> Result<(), ConfigError> {
    let bad = |message: String| ConfigError::Invalid {
        key: key.to_owned(),
        message,
    };
    for helper in helpers {
        if helper.starts_with('/') {
            let path = Path::new(helper);
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if real.starts_with(jail_root) {
                return Err(ConfigError::InsideRoot {
                    key: "terminal.allowlist.helpers",
                    path: path.to_path_buf(),
                    root: jail_root.to_path_buf(),
                });
            }
            if real == Path::new("/") {
                return Err(bad(format!(
                    "{helper} would let commands execute anything; name the programs or directories"
                )));
            }
            continue;
        }
        program_names(key, vec![helper.clone()])?;
        if deny.contains(helper) {
            return Err(bad(format!(
                "{helper:?} is on the denylist; a helper may not be what the policy refuses"
            )));
        }
    }
    Ok(())
}

/// This server's name in a fleet: `SAFE_MCP_SERVER_ID` (each replica its own, from one
/// shared policy), else the policy's `server_id`. 1 to 64 of `A-Z a-z 0-9 . _ -`, so that it
/// can stand in a handle and a log line as it is.
pub(super) fn server_id(
    env: Option<std::ffi::OsString>,
    policy: Option<String>,
) -> Result<Option<String>, ConfigError> {
    let (key, value) = match (env, policy) {
        (Some(v), _) => ("SAFE_MCP_SERVER_ID", v.to_string_lossy().into_owned()),
        (None, Some(v)) => ("server_id", v),
        (None, None) => return Ok(None),
    };
    if crate::fleet::valid_server_id(&value) {
        Ok(Some(value))
    } else {
        Err(ConfigError::Invalid {
            key: key.into(),
            message: format!(
                "{value:?}: a server id is 1 to 64 letters, digits, '.', '_' or '-' (a pod name fits)"
            ),
        })
    }
}
