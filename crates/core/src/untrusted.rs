//! Reading a small file the model controls, from the server, without letting it stall the
//! server.
//!
//! The server reads a few files beneath a root the model can write (a worktree's `.git`
//! file, the project's `.safe-mcp.toml`). Sandboxed code can make such a name a FIFO (an
//! open blocks until someone opens the other end), a device, a socket, a symlink out, or a
//! regular file under a lease (`F_SETLEASE`: an open blocks for the kernel's lease-break
//! time, 45 s by default, and every call waiting behind it with it). So every such open here
//! is `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY`, which never waits (a lease answers
//! EWOULDBLOCK, a FIFO opens at once), then `fstat` refuses anything but a regular file,
//! and at most `max` bytes are read. It never follows a final symlink and never writes.

use std::io::Read;
use std::path::Path;

/// The text of the regular file at `path`, at most `max` bytes; `None` when nothing is
/// there; otherwise why it cannot be read now.
pub fn read_small_file(path: &Path, max: u64) -> Result<Option<String>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            return Err(format!(
                "{} is held by another process (a file lease) and cannot be read now",
                path.display()
            ));
        }
        Err(e) => {
            return Err(format!(
                "{} cannot be opened (a symlink is refused): {e}",
                path.display()
            ));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file (a FIFO, device or socket is never read)",
            path.display()
        ));
    }
    if meta.len() > max {
        return Err(format!("{} is larger than {max} bytes", path.display()));
    }
    let mut text = String::new();
    file.take(max)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_symlinks_and_big_files_are_refused_without_waiting() {
        let (_dir, base) = crate::testing::scratch(&[]);
        let fifo = base.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()));
        let why = read_small_file(&fifo, 10).unwrap_err();
        assert!(why.contains("not a regular file"), "{why}");
        std::os::unix::fs::symlink("/etc/hostname", base.join("link")).unwrap();
        assert!(read_small_file(&base.join("link"), 100).is_err());
        std::fs::write(base.join("big"), "x".repeat(20)).unwrap();
        assert!(read_small_file(&base.join("big"), 10).is_err());
        std::fs::write(base.join("ok"), "gitdir: x\n").unwrap();
        assert_eq!(
            read_small_file(&base.join("ok"), 10).unwrap().as_deref(),
            Some("gitdir: x\n")
        );
        assert_eq!(read_small_file(&base.join("none"), 10).unwrap(), None);
    }
}
