//! Building the view once at start: the plan (binds, mount points, synthetic files) made in
//! the server, then handed to the setup child ([`super::child`]).

use std::ffi::c_ulong;
use std::path::{Path, PathBuf};

use safe_mcp_contract::{ConfinementSpec, HARMLESS_DEVICES};

use super::child::{Bind, Setup, run_setup};
use super::consts::{Entries, TTY};
use super::helpers::{
    cstring, halved_user_limits, make_mount_point, mirror_symlinks, synthetic_etc, under,
};

/// What the setup found: the namespaces, whether there is a user namespace, whether pid
/// namespaces work (or why not), whether devpts does, and whether the per-user counters
/// were bounded.
pub(super) type Built = (Entries, bool, Result<(), String>, bool, bool);

pub(super) fn build(
    spec: &ConfinementSpec,
    dir: &Path,
    tmp_root: &Path,
    executable: &[PathBuf],
    held: &[PathBuf],
) -> Result<Built, String> {
    let root = dir.join("root");
    let etc = dir.join("etc");
    let proc_dir = root.join("proc");
    let pts_dir = root.join("dev/pts");
    for d in [&root, &etc, &proc_dir, &root.join("dev"), &pts_dir] {
        std::fs::create_dir(d).map_err(|e| format!("cannot make {}: {e}", d.display()))?;
    }
    std::os::unix::fs::symlink("pts/ptmx", root.join("dev/ptmx"))
        .map_err(|e| format!("cannot make the view's /dev/ptmx: {e}"))?;
    let user = !rustix::process::geteuid().is_root();
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();

    let synthetic = synthetic_etc(uid, gid);
    let mut binds: Vec<(PathBuf, PathBuf, c_ulong)> = Vec::new();
    let ro = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    for (name, body) in &synthetic {
        let source = etc.join(name);
        std::fs::write(&source, body).map_err(|e| format!("cannot write {name}: {e}"))?;
        binds.push((source, Path::new("/etc").join(name), ro));
    }
    let devices: Vec<&Path> = HARMLESS_DEVICES
        .iter()
        .map(|(d, _)| Path::new(*d))
        .chain([Path::new(TTY)])
        .filter(|d| d.exists())
        .collect();
    for d in &devices {
        // Read-only: writes to a device file ignore it, but chmod and chown of the host's
        // inode (uid 0 owns /dev/null) are refused.
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC;
        binds.push((d.to_path_buf(), d.to_path_buf(), flags));
    }
    let mut jail_flags = libc::MS_NOSUID | libc::MS_NODEV;
    if !spec.exec_in_jail {
        jail_flags |= libc::MS_NOEXEC;
    }
    for writable in std::iter::once(&spec.jail_root)
        .chain(&spec.write_paths)
        .map(PathBuf::as_path)
        .chain([tmp_root])
    {
        // Canonical paths (the load canonicalizes them): no symlink to mirror.
        binds.push((writable.to_path_buf(), writable.to_path_buf(), jail_flags));
    }
    if let Some(home) = &spec.home {
        binds.push((home.clone(), home.clone(), ro));
    }
    // Each on itself, read-only, on top of the write path that holds it: a mount point
    // cannot be written, removed or renamed, and its directory (a mount point too) cannot be
    // moved away.
    for file in &spec.read_only_files {
        binds.push((file.clone(), file.clone(), ro | jail_flags));
    }
    for dir in &spec.pinned_dirs {
        binds.push((dir.clone(), dir.clone(), jail_flags));
    }
    let mut reads: Vec<PathBuf> = Vec::new();
    for p in &spec.read_paths {
        let synthetic_file = synthetic
            .iter()
            .any(|(name, _)| p == &Path::new("/etc").join(name));
        if !p.exists() || synthetic_file || devices.contains(&p.as_path()) {
            continue;
        }
        mirror_symlinks(&root, p)?;
        let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
        binds.push((real.clone(), real.clone(), ro));
        reads.push(real);
    }
    // Program trees noexec, what may run executable over itself ([`super::programs`]). A
    // program directory that is also a read path gets the noexec bind instead of its own.
    if !executable.is_empty() || !held.is_empty() {
        let trees = super::programs::binds(&reads, executable, held, ro);
        binds.retain(|(_, target, _)| !trees.iter().any(|(_, t, _)| t == target));
        binds.extend(trees);
    }
    // Parents before children, so that a bind inside another lands on top of it.
    binds.sort_by_key(|(_, target, _)| target.components().count());
    binds.dedup_by(|a, b| a.1 == b.1);
    let prepared = mount_points(&root, &binds)?;
    let setup = Setup {
        user,
        setgroups: cstring(Path::new("/proc/self/setgroups"))?,
        uid_map_path: cstring(Path::new("/proc/self/uid_map"))?,
        gid_map_path: cstring(Path::new("/proc/self/gid_map"))?,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        root: cstring(&root)?,
        binds: prepared,
        hostname: b"safe-mcp",
        proc_dir: cstring(&proc_dir)?,
        pts_dir: cstring(&pts_dir)?,
        user_limits: if user {
            halved_user_limits()?
        } else {
            Vec::new()
        },
    };
    let (entries, pid, pts, limited) = run_setup(&setup)?;
    Ok((entries, user, pid, pts, limited))
}

/// Each bind's mount point made in the skeleton at `root`, and the bind as the setup child
/// takes it (C strings, prepared here: the child may not allocate).
fn mount_points(root: &Path, binds: &[(PathBuf, PathBuf, c_ulong)]) -> Result<Vec<Bind>, String> {
    let mut prepared = Vec::with_capacity(binds.len());
    for (source, target, flags) in binds {
        let at = under(root, target);
        let is_dir = std::fs::metadata(source)
            .map_err(|e| format!("{}: {e}", source.display()))?
            .is_dir();
        make_mount_point(root, &at, is_dir)?;
        prepared.push(Bind {
            source: cstring(source)?,
            target: cstring(&at)?,
            flags: *flags,
        });
    }
    Ok(prepared)
}
