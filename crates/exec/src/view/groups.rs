//! What only some stages may execute, executable for them alone (issue 49, item 2).
//!
//! The view is one mount namespace for every command, and in it what only one program's
//! stages may execute (a program with argument rules, tar's compressors, git's exec-path)
//! is `noexec` ([`super::programs`]). Each stage of the private view gets a mount namespace
//! of its own (for its `/proc`); there its init binds its group's files over themselves and
//! remounts them without `noexec`, before the command starts. So the loader, started from
//! any other stage, cannot map them: Landlock's execute right (which grants them to their
//! group alone) is checked at `execve` only, `noexec` at `mmap(PROT_EXEC)` too.

use std::ffi::{CString, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::step::errno;

/// Per exec group, the paths its stages bind executable in their own mount namespace.
#[derive(Debug, Default)]
pub(crate) struct GroupMounts {
    /// Index `g - 1` for the exec group `g` (group 0, every stage, has nothing to bind).
    groups: Vec<Vec<CString>>,
}

impl GroupMounts {
    /// From each group's own paths (`groups[g - 1]`), those the view shows (beneath one of
    /// `visible`, its read paths).
    pub(crate) fn new(groups: &[Vec<PathBuf>], visible: &[PathBuf]) -> Result<Self, String> {
        let groups = groups
            .iter()
            .map(|own| {
                own.iter()
                    .filter(|p| visible.iter().any(|v| p.starts_with(v)))
                    .map(|p| {
                        CString::new(p.as_os_str().as_bytes())
                            .map_err(|_| format!("{}: a NUL byte in the path", p.display()))
                    })
                    .collect::<Result<Vec<_>, String>>()
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(GroupMounts { groups })
    }

    /// Whether any group has a path to bind.
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.iter().all(Vec::is_empty)
    }

    /// Binds the paths of `group` over themselves and remounts each without `noexec`
    /// (keeping its other flags: read-only stays read-only).
    ///
    /// # Safety
    /// Only in a stage's init, in the mount namespace of its own, before the command starts.
    pub(crate) unsafe fn mount(&self, group: usize) -> Result<(), c_int> {
        let Some(paths) = group.checked_sub(1).and_then(|g| self.groups.get(g)) else {
            return Ok(());
        };
        for path in paths {
            // SAFETY: a prepared NUL-terminated path, bound over itself; no data argument.
            let rc = unsafe {
                libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                return Err(errno());
            }
            // SAFETY: the bind just made, in this init's own mount namespace.
            unsafe { super::child::remount_without(path, 0, libc::MS_NOEXEC) }?;
        }
        Ok(())
    }
}
