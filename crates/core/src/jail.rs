//! The jail's checks ([`safe_mcp_rules::jail`]), with the real filesystem as the resolver
//! they ask how the kernel resolves a path, what `PATH` holds and what a small file says: the
//! one place the core hands the machine to the rules.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use safe_mcp_rules::jail::*;

/// The filesystem, as the kernel resolves it.
#[derive(Debug, Clone, Copy)]
pub struct RealFs;

impl Resolver for RealFs {
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn exists(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn entry(&self, path: &Path) -> Option<Entry> {
        let kind = std::fs::symlink_metadata(path).ok()?.file_type();
        Some(if kind.is_dir() {
            Entry::Dir
        } else if kind.is_file() {
            Entry::File
        } else if kind.is_symlink() {
            Entry::Symlink
        } else {
            Entry::Other
        })
    }

    fn find_program(&self, dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
        crate::programs::find_on(dirs.iter().map(PathBuf::as_path), name)
    }

    fn read_small(&self, path: &Path, max: u64) -> Result<Option<String>, String> {
        crate::untrusted::read_small_file(path, max)
    }
}

/// The jail at the canonical `root`, checked against the real filesystem.
pub fn on_disk(root: PathBuf) -> JailRoot {
    JailRoot::new(root, Arc::new(RealFs))
}

/// The jail's and git directory's checks against the real filesystem: the rules crate
/// holds the decisions, these tests the disk they are made against.
#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn jail() -> (tempfile::TempDir, JailRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("jail");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f.txt"), "x").unwrap();
        symlink("/etc", root.join("out")).unwrap();
        symlink("sub", root.join("in")).unwrap();
        symlink("/nonexistent/x", root.join("dangling")).unwrap();
        (dir, JailRoot::new(root, Arc::new(RealFs)))
    }

    fn is_escape(r: Result<impl std::fmt::Debug, JailError>) -> bool {
        matches!(r, Err(JailError::Escape { .. }))
    }

    #[test]
    fn cwd_resolution() {
        let (_d, j) = jail();
        assert_eq!(j.resolve_cwd(None).unwrap(), j.path());
        assert_eq!(j.resolve_cwd(Some("sub")).unwrap(), j.path().join("sub"));
        assert_eq!(j.resolve_cwd(Some("in")).unwrap(), j.path().join("sub"));
        let abs = j.path().join("sub");
        assert_eq!(j.resolve_cwd(abs.to_str()).unwrap(), abs);
        assert!(is_escape(j.resolve_cwd(Some(".."))));
        assert!(is_escape(j.resolve_cwd(Some("sub/../.."))));
        assert!(is_escape(j.resolve_cwd(Some("/tmp"))));
        assert!(is_escape(j.resolve_cwd(Some("out"))));
        assert!(matches!(
            j.resolve_cwd(Some("missing")),
            Err(JailError::NoSuchDirectory { .. })
        ));
        assert!(matches!(
            j.resolve_cwd(Some("sub/f.txt")),
            Err(JailError::NoSuchDirectory { .. })
        ));
    }

    #[test]
    fn argument_containment() {
        let (_d, j) = jail();
        let cwd = j.path().to_path_buf();
        for ok in [
            "sub/f.txt",
            "new-file",
            "-l",
            "a;b",
            "sub/../sub/f.txt",
            "~",
            "~/sub",
            "in/f.txt",
            "-",
        ] {
            assert!(j.check_argument(ok, &cwd).is_ok(), "{ok}");
        }
        let inside = j.path().join("sub/f.txt");
        assert!(j.check_argument(inside.to_str().unwrap(), &cwd).is_ok());
        // A symlink to `..` is inside on paper; with more `..` after it, it climbs out on disk.
        symlink("..", j.path().join("sub/up")).unwrap();
        assert!(j.check_argument("sub/up/f", &cwd).is_ok());
        for bad in [
            "/etc/passwd",
            "../x",
            "sub/../../x",
            "~root",
            "~root/x",
            "out",
            "out/passwd",
            "dangling",
            "--file=/etc/passwd",
            "--x=../y",
            "sub/up/../../x",
            "-o../../x",
            "-I/etc",
        ] {
            assert!(is_escape(j.check_argument(bad, &cwd)), "{bad}");
        }
        let from_sub = j.path().join("sub");
        assert!(j.check_argument("../sub/f.txt", &from_sub).is_ok());
        assert!(is_escape(j.check_argument("../../x", &from_sub)));
    }

    #[test]
    fn a_gitdir_outside_the_jail_is_refused_unless_writable() {
        let (_dir, base) = crate::testing::scratch(&["jail/wt/sub", "main/.git/worktrees/wt"]);
        let (jail, main) = (base.join("jail"), base.join("main"));
        // git's repository check for `command` run in `cwd` (beneath the jail).
        let check = |command: &str, cwd: &str, writable: &[PathBuf]| {
            let argv: Vec<String> = command.split(' ').map(str::to_owned).collect();
            crate::gitdir::check(&RealFs, &argv, &jail.join(cwd), &jail, writable)
        };
        std::fs::write(
            jail.join("wt/.git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let why = check("git status", "wt/sub", &[]).unwrap_err();
        assert!(why.contains("write_paths"), "{why}");
        assert!(check("git status", "wt/sub", std::slice::from_ref(&main)).is_ok());
        // -C moves the start; a repository of the jail's own is fine.
        std::fs::create_dir_all(jail.join("own/.git")).unwrap();
        assert!(check("git -C ../own status", "wt", &[]).is_ok());
        assert!(check("git status", "", &[]).is_ok());
        // A relative gitdir inside the jail, and one that names nothing.
        std::fs::create_dir_all(jail.join("mods/.git-real")).unwrap();
        std::fs::write(jail.join("mods/.git"), "gitdir: .git-real\n").unwrap();
        assert!(check("git status", "mods", &[]).is_ok());
        std::fs::write(jail.join("mods/.git"), "gitdir: ../nowhere\n").unwrap();
        let why = check("git status", "mods", &[]).unwrap_err();
        assert!(why.contains("does not exist"), "{why}");
    }
}
