//! What the core's unit tests share: a scratch directory on disk, canonical, since the
//! checks under test compare paths as the kernel resolves them.

use std::path::{Path, PathBuf};

/// A fresh temporary directory (removed when the guard drops), its canonical path, and
/// `dirs` (relative, `a/b` for nested ones) made beneath it.
pub(crate) fn scratch(dirs: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let guard = tempfile::tempdir().expect("a temporary directory");
    let base = std::fs::canonicalize(guard.path()).expect("its canonical path");
    for dir in dirs {
        std::fs::create_dir_all(base.join(dir)).expect("a directory beneath it");
    }
    (guard, base)
}

/// Writes `text` to `path` with mode 0600, as a secret file must be.
pub(crate) fn secret_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("the secret file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("its mode");
}
