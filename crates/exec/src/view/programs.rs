//! Program trees `noexec` in the view, the programs that may run bound executable over
//! themselves (issue 49, item 2).
//!
//! Landlock's execute right is checked at `execve`, on the file, a script's interpreter and
//! an ELF's loader. The loader is executable for every stage (every dynamic program needs
//! it), and it maps the program it is given with `mmap`, which Landlock does not check: so
//! `/lib64/ld-linux-x86-64.so.2 /usr/bin/rm f` ran any readable program. A `noexec` mount is
//! checked at `mmap(PROT_EXEC)` too. So the directories that hold programs (`/usr/bin`,
//! `/usr/sbin`, `/usr/local/bin`, `/usr/libexec`, a toolchain's `bin`, …) are bound
//! `noexec` in the view, and each file or directory the exec allowlist grants (with the
//! interpreters and loaders they need, as resolved at start) is bound over itself
//! executable, on top. What only some stages may execute (a program with argument rules,
//! a tool's helpers, git's exec-path) is not among those: it stays `noexec` in the view
//! (bound so over itself where it lies outside the program trees, as `/usr/lib/git-core`
//! does), and the stages of its program bind it executable in their own mount namespace
//! ([`super::GroupMounts`]), so the loader run from any other stage cannot map it (`ld.so
//! /usr/bin/git push --force` from python). Libraries stay executable (every program maps
//! them), so a program kept inside a library directory that is nobody's helper
//! (`/usr/lib/postgresql/15/bin/*`) is still reachable through the loader: THREAT_MODEL
//! lists that remainder. The host view has no mounts and keeps the ceiling.

use std::ffi::c_ulong;
use std::path::PathBuf;

/// Where systems keep programs, besides each read path's own `bin`, `sbin` and `libexec`.
const PROGRAM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/libexec",
    "/usr/local/libexec",
    "/usr/games",
    "/usr/local/games",
    "/bin",
    "/sbin",
];

/// The names of a read path's subdirectories (or of a read path itself) that hold programs.
const PROGRAM_DIR_NAMES: &[&str] = &["bin", "sbin", "libexec", "games"];

/// The binds that hold program trees: each program directory visible in the view (beneath
/// one of `read_paths`, canonical) `noexec`, then each of `executable` that lies in one bound
/// over itself without it, and each of `held` (what only some stages may execute: a ruled
/// program, a tool's helpers, git's exec-path in a library directory) bound over itself
/// `noexec` wherever it would otherwise be executable; a stage of its own binds it
/// executable again in its own mount namespace ([`crate::view::GroupMounts`]). `flags` are
/// the read paths' own (read-only, nosuid, nodev).
pub(super) fn binds(
    read_paths: &[PathBuf],
    executable: &[PathBuf],
    held: &[PathBuf],
    flags: c_ulong,
) -> Vec<(PathBuf, PathBuf, c_ulong)> {
    let mut dirs: Vec<PathBuf> = PROGRAM_DIRS.iter().map(PathBuf::from).collect();
    for p in read_paths {
        if p.file_name()
            .is_some_and(|n| PROGRAM_DIR_NAMES.iter().any(|d| n == *d))
        {
            dirs.push(p.clone());
        }
        dirs.extend(PROGRAM_DIR_NAMES.iter().map(|d| p.join(d)));
    }
    let mut real: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.is_dir())
        // Only what the view shows, and never a directory granted whole (a toolchain's
        // sysroot holds its `bin`): that one stays executable.
        .filter(|d| read_paths.iter().any(|r| d.starts_with(r)))
        .filter(|d| !executable.iter().any(|e| d.starts_with(e) && e.is_dir()))
        .collect();
    real.sort();
    real.dedup();
    let mut out: Vec<(PathBuf, PathBuf, c_ulong)> = real
        .iter()
        .map(|d| (d.clone(), d.clone(), flags | libc::MS_NOEXEC))
        .collect();
    for e in executable {
        if real.iter().any(|d| e.starts_with(d) && e != d) {
            out.push((e.clone(), e.clone(), flags));
        }
    }
    for h in held {
        let in_a_tree = real.iter().any(|d| h.starts_with(d));
        // Never over what every stage runs, nor inside a directory every stage may run from.
        let shared = executable
            .iter()
            .any(|e| e.starts_with(h) || (h.starts_with(e) && e.is_dir()));
        if !in_a_tree && !shared && read_paths.iter().any(|r| h.starts_with(r)) {
            out.push((h.clone(), h.clone(), flags | libc::MS_NOEXEC));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn program_directories_go_noexec_and_allowed_programs_stay_executable() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let tool = root.join("tool");
        for d in ["tool/bin", "tool/lib", "sysroot/bin"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(tool.join("bin/ok"), "").unwrap();
        std::fs::write(tool.join("bin/other"), "").unwrap();
        let read = vec![tool.clone(), root.join("sysroot")];
        let exec = vec![tool.join("bin/ok"), root.join("sysroot")];
        let held = vec![root.join("tool/lib/helper"), tool.join("bin/ok")];
        std::fs::write(root.join("tool/lib/helper"), "").unwrap();
        let binds = binds(&read, &exec, &held, libc::MS_RDONLY);
        let flags_of = |p: &Path| binds.iter().find(|(_, t, _)| t == p).map(|(_, _, f)| *f);
        assert_eq!(
            flags_of(&tool.join("bin")),
            Some(libc::MS_RDONLY | libc::MS_NOEXEC)
        );
        assert_eq!(flags_of(&tool.join("bin/ok")), Some(libc::MS_RDONLY));
        assert_eq!(
            flags_of(&tool.join("bin/other")),
            None,
            "left in the noexec tree"
        );
        assert_eq!(
            flags_of(&tool.join("lib")),
            None,
            "libraries stay as they are"
        );
        assert_eq!(
            flags_of(&root.join("tool/lib/helper")),
            Some(libc::MS_RDONLY | libc::MS_NOEXEC),
            "a group's own program in a library directory"
        );
        assert_eq!(
            flags_of(&tool.join("bin/ok")),
            Some(libc::MS_RDONLY),
            "what every stage runs is never held"
        );
        assert_eq!(
            flags_of(&root.join("sysroot/bin")),
            None,
            "a directory granted whole"
        );
    }
}
