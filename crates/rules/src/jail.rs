//! Containment of paths beneath the jail root.
//!
//! Owns the answer to "does this cwd or argument stay inside the root?". A path escapes when,
//! lexically or after following symlinks, it lands outside. This is a check at decision time;
//! a path can still be swapped between check and use, which is why the kernel (Landlock)
//! confines the child as well. This module must never return a path it has not checked.
//!
//! How the kernel resolves a path (symlinks, what exists) is asked of a [`Resolver`] handed
//! in: the core hands in the real filesystem, and this crate reads none itself.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::paths::lexical_normalize;

/// What the rules ask of the machine: how the kernel resolves a path, what a directory of
/// `PATH` holds, what a small file the model may have written says. The jail's checks, the
/// policy ([`crate::policy`]) and git's directory check ([`crate::gitdir`]) read nothing
/// else.
pub trait Resolver: Send + Sync + std::fmt::Debug {
    /// The path with every symlink resolved, if it exists.
    fn canonicalize(&self, path: &Path) -> Option<PathBuf>;
    /// Whether something (a symlink included, dangling or not) is at `path`.
    fn exists(&self, path: &Path) -> bool;
    /// Where the symlink at `path` points, if it is one.
    fn read_link(&self, path: &Path) -> Option<PathBuf>;
    /// Whether `path` is a directory (through symlinks).
    fn is_dir(&self, path: &Path) -> bool;
    /// What is at `path` itself (a symlink is not followed), if anything.
    fn entry(&self, path: &Path) -> Option<Entry>;
    /// The program `name` runs as: the first regular, executable file named so in `dirs`.
    fn find_program(&self, dirs: &[PathBuf], name: &str) -> Option<PathBuf>;
    /// The text of the small file at `path` (at most `max` bytes; `None` if it is gone),
    /// read without following a symlink or waiting on a FIFO: the model may have made it.
    fn read_small(&self, path: &Path, max: u64) -> Result<Option<String>, String>;
}

/// What a path names, its last symlink not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink.
    Symlink,
    /// Anything else (a FIFO, a socket, a device).
    Other,
}

/// Why a path was refused or could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JailError {
    /// It resolves outside the root (PATH_ESCAPE).
    Escape { given: String, why: &'static str },
    /// It lies in a read path: commands may read it, not write it (PATH_ESCAPE for a
    /// program that could write it).
    ReadOnly { given: String },
    /// The cwd does not exist or is not a directory (INVALID_REQUEST).
    NoSuchDirectory { given: String },
}

impl std::fmt::Display for JailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JailError::Escape { given, why } => write!(
                f,
                "{given:?} {why}. Name a path inside the jail: relative to it, or absolute beneath it"
            ),
            JailError::ReadOnly { given } => write!(
                f,
                "{given:?} lies in a read path: commands may read it but not write it, and this program could; read it with cat or grep, or work on a copy in the jail"
            ),
            JailError::NoSuchDirectory { given } => {
                write!(
                    f,
                    "cwd {given:?} is not an existing directory inside the jail. Give one that exists (relative to the jail; `ls` shows them)"
                )
            }
        }
    }
}

impl std::error::Error for JailError {}

/// A canonical directory that every cwd must stay beneath, and every path argument too,
/// or beneath a write path (writable for commands as the jail is), or a read path (readable
/// only).
#[derive(Debug, Clone)]
pub struct JailRoot {
    root: PathBuf,
    writable: Vec<PathBuf>,
    readable: Vec<PathBuf>,
    fs: Arc<dyn Resolver>,
}

/// Where a path lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Jail,
    Writable,
    Readable,
    Outside,
}

impl JailRoot {
    /// `root` must already be canonical (the policy loader makes it so); `fs` resolves paths.
    pub fn new(root: PathBuf, fs: Arc<dyn Resolver>) -> Self {
        JailRoot {
            root,
            writable: Vec::new(),
            readable: Vec::new(),
            fs,
        }
    }

    /// As [`JailRoot::new`], with the write paths and read paths commands may also be
    /// given as arguments (made canonical here).
    pub fn with_paths(
        root: PathBuf,
        (writable, readable): (Vec<PathBuf>, Vec<PathBuf>),
        fs: Arc<dyn Resolver>,
    ) -> Self {
        let canonical = |v: Vec<PathBuf>| {
            v.into_iter()
                .map(|p| fs.canonicalize(&p).unwrap_or(p))
                .collect()
        };
        JailRoot {
            root,
            writable: canonical(writable),
            readable: canonical(readable),
            fs,
        }
    }

    /// Where a path the model names (relative to the jail, or absolute) lands, on paper:
    /// made absolute and normalized, beneath which root (the jail first, then a write path,
    /// then a read path); `None` outside all of them. The one classification commands'
    /// arguments and the file tools share.
    pub fn locate(&self, given: &str) -> (PathBuf, Option<(&Path, Place)>) {
        let path = lexical_normalize(&self.root.join(given));
        let root = std::iter::once(&self.root)
            .chain(&self.writable)
            .find(|r| path.starts_with(r))
            .or_else(|| self.readable.iter().find(|r| path.starts_with(r)));
        let at = root.map(|r| (r.as_path(), self.place(&path)));
        (path, at)
    }

    /// Whether `p` lies beneath a read path (readable, never writable, also where a write
    /// path lies within it).
    pub fn in_read_path(&self, p: &Path) -> bool {
        self.readable.iter().any(|r| p.starts_with(r))
    }

    fn place(&self, p: &Path) -> Place {
        if p.starts_with(&self.root) {
            Place::Jail
        } else if self.writable.iter().any(|w| p.starts_with(w)) {
            Place::Writable
        } else if self.readable.iter().any(|r| p.starts_with(r)) {
            Place::Readable
        } else {
            Place::Outside
        }
    }

    /// The verdict for an argument that lands at `landed`: fine in the jail or a write
    /// path, read-only in a read path, else an escape for `why`.
    fn judge(&self, given: &str, landed: &Path, why: &'static str) -> Result<(), JailError> {
        match self.place(landed) {
            Place::Jail | Place::Writable => Ok(()),
            Place::Readable => Err(JailError::ReadOnly {
                given: given.to_owned(),
            }),
            Place::Outside => Err(escape(given, why)),
        }
    }

    /// What the checks ask of the machine.
    pub fn resolver(&self) -> &dyn Resolver {
        self.fs.as_ref()
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Resolves a requested cwd (relative to the root, or absolute inside it) to a canonical
    /// directory inside the root.
    pub fn resolve_cwd(&self, cwd: Option<&str>) -> Result<PathBuf, JailError> {
        let Some(given) = cwd.filter(|c| !c.is_empty()) else {
            return Ok(self.root.clone());
        };
        let candidate = self.lexical(given, self.root.as_path())?;
        let real = self
            .fs
            .canonicalize(&candidate)
            .ok_or_else(|| JailError::NoSuchDirectory {
                given: given.to_owned(),
            })?;
        if !real.starts_with(&self.root) {
            return Err(escape(
                given,
                "resolves through a symlink to outside the jail",
            ));
        }
        if !self.fs.is_dir(&real) {
            return Err(JailError::NoSuchDirectory {
                given: given.to_owned(),
            });
        }
        Ok(real)
    }

    /// Checks one argument (or the value of `--opt=value`) run from `cwd`.
    ///
    /// An argument that is absolute, has a `..` segment or starts with `~` must resolve inside
    /// the jail. Any other argument that names an existing path is followed too, so a symlink
    /// inside the jail cannot point a command outside it.
    pub fn check_argument(&self, arg: &str, cwd: &Path) -> Result<(), JailError> {
        let value = match arg.strip_prefix("--").and_then(|a| a.split_once('=')) {
            Some((_, v)) => v,
            None => arg,
        };
        // A short option with an attached value (`-o../x`, `-I/etc`) hides a path after two
        // characters; the whole token is checked too.
        if !arg.starts_with("--")
            && arg.starts_with('-')
            && let Some((i, _)) = arg.char_indices().nth(2)
        {
            let attached = &arg[i..];
            if attached.contains('/') || attached.starts_with("..") || attached.starts_with('~') {
                self.check_path(attached, cwd)?;
            }
        }
        self.check_path(value, cwd)
    }

    /// Checks a value known to be a path (an operand or option value the tool opens): it
    /// must resolve inside the jail on paper (for `..`, absolute and `~` paths) and as the
    /// kernel resolves it: through every symlink that exists, *before* any `..` after it is
    /// applied (a symlink to `..` followed by `../..` climbs out on disk, not on paper).
    pub fn check_path(&self, value: &str, cwd: &Path) -> Result<(), JailError> {
        if value.is_empty()
            || value == "-"
            || safe_mcp_contract::HARMLESS_DEVICES
                .iter()
                .any(|(name, _)| *name == value)
        {
            return Ok(());
        }
        let path = Path::new(value);
        let pathlike = path.is_absolute()
            || value.starts_with('~')
            || path.components().any(|c| c == Component::ParentDir);
        if pathlike {
            self.lexical_argument(value, cwd)?;
        }
        let raw = match value.strip_prefix('~') {
            Some(rest) => self.root.join(rest.trim_start_matches('/')),
            None => cwd.join(path),
        };
        // The longest prefix that exists decides, resolved by the filesystem itself.
        let components: Vec<Component<'_>> = raw.components().collect();
        for n in (1..=components.len()).rev() {
            let prefix: PathBuf = components[..n].iter().collect();
            if !self.fs.exists(&prefix) {
                continue;
            }
            return match self.fs.canonicalize(&prefix) {
                Some(real) => {
                    let rest: PathBuf = components[n..].iter().collect();
                    self.judge(
                        value,
                        &lexical_normalize(&real.join(rest)),
                        "resolves through a symlink to outside the jail",
                    )
                }
                // A dangling symlink: judge by where it points, lexically.
                None => self.check_dangling(value, &prefix),
            };
        }
        Ok(())
    }

    /// Where `value`, given from `cwd`, lands as the kernel would resolve it: the longest
    /// prefix that exists, canonicalized, then the rest lexically (for the protected-paths
    /// check; containment itself is [`JailRoot::check_path`]).
    pub fn landing(&self, value: &str, cwd: &Path) -> PathBuf {
        let raw = match value.strip_prefix('~') {
            Some(rest) => self.root.join(rest.trim_start_matches('/')),
            None => cwd.join(value),
        };
        let raw = lexical_normalize(&raw);
        let components: Vec<Component<'_>> = raw.components().collect();
        for n in (1..=components.len()).rev() {
            let prefix: PathBuf = components[..n].iter().collect();
            if let Some(real) = self.fs.canonicalize(&prefix) {
                let rest: PathBuf = components[n..].iter().collect();
                return lexical_normalize(&real.join(rest));
            }
        }
        raw
    }

    fn check_dangling(&self, given: &str, link: &Path) -> Result<(), JailError> {
        let Some(target) = self.fs.read_link(link) else {
            return Ok(());
        };
        let base = link.parent().unwrap_or(&self.root);
        let resolved = lexical_normalize(&base.join(target));
        self.judge(given, &resolved, "is a symlink pointing outside the jail")
    }

    /// [`JailRoot::lexical`] for an argument: beneath the jail, a write path or a read path
    /// on paper (the resolved check then decides which).
    fn lexical_argument(&self, given: &str, base: &Path) -> Result<(), JailError> {
        match self.lexical(given, base) {
            Ok(_) => Ok(()),
            Err(e) => {
                let joined = match given.strip_prefix('~') {
                    Some(_) => return Err(e),
                    None => lexical_normalize(&base.join(given)),
                };
                match self.place(&joined) {
                    Place::Outside | Place::Jail => Err(e),
                    Place::Writable | Place::Readable => Ok(()),
                }
            }
        }
    }

    /// Joins `given` to `base` (or the root for `~`), normalises `..` lexically, and refuses
    /// anything that leaves the root on paper.
    fn lexical(&self, given: &str, base: &Path) -> Result<PathBuf, JailError> {
        let joined = if let Some(rest) = given.strip_prefix('~') {
            // HOME is the jail root for every command. `~user` names someone else's home.
            match rest.strip_prefix('/') {
                Some(rest) => self.root.join(rest),
                None if rest.is_empty() => self.root.clone(),
                None => return Err(escape(given, "names another user's home directory")),
            }
        } else {
            base.join(given)
        };
        let normal = lexical_normalize(&joined);
        if normal.starts_with(&self.root) {
            Ok(normal)
        } else if Path::new(given).is_absolute() {
            Err(escape(given, "is an absolute path outside the jail"))
        } else {
            Err(escape(given, "climbs out of the jail with `..`"))
        }
    }
}

fn escape(given: &str, why: &'static str) -> JailError {
    JailError::Escape {
        given: given.to_owned(),
        why,
    }
}
