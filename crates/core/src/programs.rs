//! What counts as a program on disk, and finding one by name on a PATH: one answer for the
//! policy's resolution, the profiles' discovery, the lint and the exec allowlist.
//!
//! A program is a regular file with an execute bit (following symlinks); the first one on
//! the PATH wins. It reads file metadata only and imports nothing of this crate.

use std::path::{Path, PathBuf};

/// Whether `path` is a regular file someone may execute.
pub fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `name` in the first of `dirs` that holds it as a program.
pub fn find_on<'a>(dirs: impl IntoIterator<Item = &'a Path>, name: &str) -> Option<PathBuf> {
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|candidate| is_program(candidate))
}
