//! Whether anything in the jail changed since the last sweep, without walking it.
//!
//! A sweep walks every directory of the jail; in a repository of 10,000 files that is ten
//! milliseconds, twice a call. The kernel can say instead: every directory the walk visits
//! gets an inotify watch (added *before* it is read, so a change after the read is an event
//! and a change before it is in the read), and a sweep whose watch queue is empty has
//! nothing to do. inotify is per inode, so a write through a command's bind mount of the
//! jail is seen too. Where a watch cannot be added (the user's `max_user_watches` is spent)
//! or the queue overflowed, every sweep walks: slower, never blind.

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::inotify;

/// The jail's watches.
#[derive(Debug)]
pub(super) struct Watch {
    /// The inotify instance; `None` when none could be made.
    fd: Option<OwnedFd>,
    /// A watch could not be added: the events do not cover the jail, so every sweep walks.
    blind: AtomicBool,
}

/// Every change to a directory's entries or to a file in it.
const CHANGES: inotify::WatchFlags = inotify::WatchFlags::CREATE
    .union(inotify::WatchFlags::DELETE)
    .union(inotify::WatchFlags::MOVED_FROM)
    .union(inotify::WatchFlags::MOVED_TO)
    .union(inotify::WatchFlags::MODIFY)
    .union(inotify::WatchFlags::CLOSE_WRITE)
    .union(inotify::WatchFlags::ATTRIB)
    .union(inotify::WatchFlags::DELETE_SELF)
    .union(inotify::WatchFlags::MOVE_SELF);

impl Watch {
    /// A new set of watches (none yet).
    pub(super) fn new() -> Watch {
        let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).ok();
        Watch {
            blind: AtomicBool::new(fd.is_none()),
            fd,
        }
    }

    /// Watches `dir` (adding a watch to a watched inode changes nothing). Never follows a
    /// symlink.
    pub(super) fn add(&self, dir: &Path) {
        let Some(fd) = &self.fd else { return };
        let flags = CHANGES | inotify::WatchFlags::DONT_FOLLOW | inotify::WatchFlags::ONLYDIR;
        if inotify::add_watch(fd, dir, flags).is_err() && dir.exists() {
            self.blind.store(true, Ordering::Relaxed);
        }
    }

    /// Whether anything may have changed since the last call: an event, an overflow, or no
    /// watches to trust. Empties the queue.
    pub(super) fn changed(&self) -> bool {
        let Some(fd) = &self.fd else { return true };
        let mut any = self.blind.load(Ordering::Relaxed);
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        loop {
            match reader.next() {
                Ok(_) => any = true,
                Err(rustix::io::Errno::INTR) => continue,
                // WOULDBLOCK: the queue is empty; any other error: trust nothing.
                Err(rustix::io::Errno::WOULDBLOCK) => return any,
                Err(_) => return true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_in_a_watched_directory_is_seen_and_then_forgotten() {
        let (_dir, base) = crate::testing::scratch(&["sub"]);
        let sub = base.join("sub");
        let w = Watch::new();
        w.add(&base);
        w.add(&sub);
        assert!(!w.changed(), "nothing happened yet");
        std::fs::write(sub.join("f"), "x").unwrap();
        assert!(w.changed());
        assert!(!w.changed(), "the queue was emptied");
        std::fs::create_dir(base.join("new")).unwrap();
        assert!(w.changed());
        // A directory the walk has not watched yet is not seen: the walk adds it first.
        std::fs::write(base.join("new/f"), "x").unwrap();
        assert!(!w.changed());
    }
}
