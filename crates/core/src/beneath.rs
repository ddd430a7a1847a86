//! The one way to open a path beneath a root descriptor, shared by the terminal's file tools
//! and the files server: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`, close-on-exec. The kernel, not a check on paper, keeps the path
//! beneath the root: a `..` that climbs out, an absolute path, a symlink (one a command
//! planted, or any other) and a `/proc` magic link each fail (`EXDEV`, `ELOOP`).

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// How every path beneath a root is resolved: beneath it, and through no symlink at all.
pub const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// Opens `path` beneath `root` with `flags` (and `O_CLOEXEC`), never out of it and through no
/// symlink; `mode` for a file it creates.
pub fn open<P: rustix::path::Arg>(
    root: impl AsFd,
    path: P,
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(root, path, flags | OFlags::CLOEXEC, mode, RESOLVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_out_of_the_root_or_through_a_symlink_is_refused() {
        let (_dir, base) = crate::testing::scratch(&["root/sub"]);
        let root_path = base.join("root");
        std::fs::write(base.join("outside"), "x").unwrap();
        std::fs::write(root_path.join("sub/inside"), "y").unwrap();
        std::os::unix::fs::symlink("inside", root_path.join("sub/link")).unwrap();
        let root =
            rustix::fs::open(&root_path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let read = |p: &str| open(&root, p, OFlags::RDONLY, Mode::empty());
        assert!(read("sub/inside").is_ok());
        // Control: the same names resolve without the flags.
        assert!(std::fs::read(root_path.join("../outside")).is_ok());
        assert!(std::fs::read(root_path.join("sub/link")).is_ok());
        assert_eq!(read("../outside").err(), Some(rustix::io::Errno::XDEV));
        assert_eq!(
            read(base.join("outside").to_str().unwrap()).err(),
            Some(rustix::io::Errno::XDEV)
        );
        assert_eq!(read("sub/link").err(), Some(rustix::io::Errno::LOOP));
        assert!(read("/proc/self/root/etc/passwd").is_err());
    }
}
