//! Opening the trail's own files (the trail, its lock, a sink's spool and sent marker):
//! created mode 0600 for the server's user alone, never through a symbolic link, closed
//! on exec. Callers add how they read or write.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;

/// The options every file of the trail is opened with.
pub(crate) fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}
