//! Why a policy file could not be loaded: the typed [`ConfigError`] and its wording.
//!
//! Owns the text a user sees after `fatal: ` for every fault of the file itself. The tests of
//! the binary match on these words, so changing one is a visible change. It must never
//! import anything but config's own items, and never hold a secret (the HMAC key) in a
//! message.

use std::fmt;
use std::path::PathBuf;

use safe_mcp_rules::config::types::{ENV_POLICY_FILE, UnknownSkipCondition};

/// Why a policy could not be loaded. Each is fatal at startup.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither `--config` nor `SAFE_MCP_POLICY_FILE`.
    NoPolicyPath,
    /// The file could not be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Invalid TOML or an unknown key.
    Parse { path: PathBuf, message: String },
    /// A section the server needs is absent.
    MissingSection(&'static str),
    /// A value is out of range or malformed.
    Invalid { key: String, message: String },
    /// A `[[files.skip]]` rule names a condition that does not exist.
    UnknownCondition {
        key: String,
        error: UnknownSkipCondition,
    },
    /// A root is unset.
    RootUnset {
        key: &'static str,
        env: &'static str,
    },
    /// A root is not an existing directory.
    RootNotDirectory { key: &'static str, path: PathBuf },
    /// The audit log or journal lies inside a root.
    InsideRoot {
        key: &'static str,
        path: PathBuf,
        root: PathBuf,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoPolicyPath => write!(
                f,
                "no policy file: pass --config PATH or set {ENV_POLICY_FILE} (there is no default location)"
            ),
            ConfigError::Read { path, source } => {
                write!(f, "cannot read policy file {}: {source}", path.display())
            }
            ConfigError::Parse { path, message } => {
                write!(
                    f,
                    "invalid policy file {}: {}",
                    path.display(),
                    message.trim_end()
                )
            }
            ConfigError::MissingSection(s) => write!(f, "the policy has no [{s}] section"),
            ConfigError::Invalid { key, message } => write!(f, "invalid `{key}`: {message}"),
            ConfigError::UnknownCondition { key, error } => write!(f, "invalid `{key}`: {error}"),
            ConfigError::RootUnset { key, env } => {
                write!(f, "`{key}` is not set (set it in the policy or via {env})")
            }
            ConfigError::RootNotDirectory { key, path } => {
                write!(
                    f,
                    "`{key}` = {} is not an existing directory",
                    path.display()
                )
            }
            ConfigError::InsideRoot { key, path, root } => write!(
                f,
                "`{key}` = {} lies inside {}; it must be outside every root, out of a command's reach",
                path.display(),
                root.display()
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
