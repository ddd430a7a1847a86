//! Path and file helpers of the view's setup, run in the server before any clone.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::consts::USER_LIMITS;

pub(super) fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))
}

/// `root` joined with the absolute `path`.
pub(super) fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Each of [`USER_LIMITS`] that this kernel has, with half the host's value.
pub(super) fn halved_user_limits() -> Result<Vec<(CString, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for name in USER_LIMITS {
        let path = Path::new("/proc/sys/user").join(name);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // an older kernel without this counter
        };
        let Ok(host) = text.trim().parse::<u64>() else {
            continue;
        };
        out.push((cstring(&path)?, (host / 2).max(1).to_string().into_bytes()));
    }
    Ok(out)
}

/// passwd and group with root, nobody and the server's own user; hosts with localhost.
pub(super) fn synthetic_etc(uid: u32, gid: u32) -> Vec<(&'static str, String)> {
    let mut passwd = String::from(
        "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    );
    let mut group = String::from("root:x:0:\nnogroup:x:65534:\n");
    if uid != 0 && uid != 65534 {
        passwd.push_str(&format!(
            "safe-mcp:x:{uid}:{gid}:safe-mcp server:/nonexistent:/usr/sbin/nologin\n"
        ));
    }
    if gid != 0 && gid != 65534 {
        group.push_str(&format!("safe-mcp:x:{gid}:\n"));
    }
    vec![
        ("passwd", passwd),
        ("group", group),
        ("hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n".to_owned()),
    ]
}

/// Where a read path is, or passes through, a symlink on the host, the skeleton gets the
/// same symlink (`/bin -> usr/bin`), so the path resolves in the view as on the host.
pub(super) fn mirror_symlinks(root: &Path, path: &Path) -> Result<(), String> {
    let mut prefix = PathBuf::from("/");
    for component in path.components().skip(1) {
        prefix.push(component);
        let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
            return Ok(());
        };
        if meta.file_type().is_symlink() {
            let target =
                std::fs::read_link(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
            let at = under(root, &prefix);
            if std::fs::symlink_metadata(&at).is_err() {
                make_mount_point(root, at.parent().unwrap_or(root), true)?;
                std::os::unix::fs::symlink(&target, &at)
                    .map_err(|e| format!("cannot mirror {}: {e}", prefix.display()))?;
            }
            // The rest resolves through the link, to a canonical path bound on its own.
            return Ok(());
        }
    }
    Ok(())
}

/// Makes `at` (a directory or an empty file) and its parents inside the skeleton, never
/// through a symlink: every mount target is a canonical host path, whose prefixes are real
/// directories, while the skeleton's symlinks sit only where the host has symlinks.
pub(super) fn make_mount_point(root: &Path, at: &Path, dir: bool) -> Result<(), String> {
    let parent = if dir { at } else { at.parent().unwrap_or(root) };
    let mut built = root.to_path_buf();
    for component in parent
        .strip_prefix(root)
        .unwrap_or(Path::new(""))
        .components()
    {
        built.push(component);
        match std::fs::symlink_metadata(&built) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} is not a directory in the view's skeleton",
                    built.display()
                ));
            }
            Err(_) => std::fs::create_dir(&built)
                .map_err(|e| format!("cannot make {}: {e}", built.display()))?,
        }
    }
    if !dir && std::fs::symlink_metadata(at).is_err() {
        std::fs::File::create(at).map_err(|e| format!("cannot make {}: {e}", at.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{cstring, synthetic_etc, under};

    #[test]
    fn a_host_path_lands_under_the_views_root() {
        assert_eq!(
            under(Path::new("/run/view"), Path::new("/usr/lib")),
            Path::new("/run/view/usr/lib")
        );
        assert_eq!(under(Path::new("/v"), Path::new("/")), Path::new("/v"));
        assert!(cstring(Path::new("/a\0b")).is_err());
    }

    #[test]
    fn the_synthetic_etc_names_only_root_nobody_and_the_server() {
        let files = synthetic_etc(1000, 1000);
        let file = |name: &str| files.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        let passwd = file("passwd");
        assert_eq!(passwd.lines().count(), 3, "{passwd}");
        assert!(passwd.contains("safe-mcp:x:1000:1000:"));
        assert!(passwd.lines().all(|l| l.ends_with("/usr/sbin/nologin")));
        assert!(file("hosts").starts_with("127.0.0.1\tlocalhost"));
        // A root server adds no user of its own.
        assert_eq!(file_of(&synthetic_etc(0, 0), "passwd").lines().count(), 2);
    }

    fn file_of(files: &[(&'static str, String)], name: &str) -> String {
        files.iter().find(|(n, _)| *n == name).unwrap().1.clone()
    }
}
