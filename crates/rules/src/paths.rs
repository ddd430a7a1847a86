//! Path arithmetic with no filesystem and no policy: the bottom of the crate.
//!
//! Owns [`lexical_normalize`], shared by the core's policy loader and its jail, so that
//! neither has to import the other. It must never touch the filesystem, read the
//! environment or import another module of this crate.

use std::path::{Component, Path, PathBuf};

/// Removes `.` and resolves `..` without touching the filesystem.
///
/// A `..` with nothing left to remove is kept as it is.
///
/// ```
/// use std::path::Path;
/// use safe_mcp_rules::paths::lexical_normalize;
/// assert_eq!(lexical_normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
/// assert_eq!(lexical_normalize(Path::new("../x")), Path::new("../x"));
/// ```
pub fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}
