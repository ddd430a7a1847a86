//! What one command cannot reach of another call or of the host (round 3, issue 27): SysV
//! IPC and POSIX shared memory, a memfd past `exec_in_jail`, the TMPDIR root and other calls'
//! TMPDIRs, a jail file through the loader in the private view.

use super::profile_caches::sh;
use serde_json::json;

use super::builders::{python, python_sandbox, session_with, stdout};
use super::support::{Sandbox, Session, server_uids};

/// System V shared memory through libc: `create KEY` makes a segment and writes a word into
/// it, `find KEY` reads it back, `plain` makes a private one. Prints the result or errno.
const SHM: &str = r#"
import ctypes, ctypes.util, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
op, key = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
if op == "create":
    i = libc.shmget(key, 4096, 0o1600)
elif op == "find":
    i = libc.shmget(key, 0, 0)
else:
    i = libc.shmget(0, 4096, 0o1600)
if i < 0:
    print("shmget", os.strerror(ctypes.get_errno())); sys.exit(0)
p = libc.shmat(i, None, 0)
if p in (None, ctypes.c_void_p(-1).value):
    print("shmat", os.strerror(ctypes.get_errno())); sys.exit(0)
if op == "create":
    ctypes.memmove(p, b"round3-secret", 13)
print("read", ctypes.string_at(p, 13).decode(errors="replace"))
"#;

async fn shm(s: &Session, args: &str) -> String {
    let r = s
        .run_with(json!({"command": format!("python3 -c '{}' {args}", SHM.replace('\'', "\"")) }))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    stdout(&r).to_owned()
}

/// Items 3 and 4: with no ipc namespace of its own (the host view) a command cannot touch
/// System V IPC at all (refused by seccomp, and the report says so); in the private view each
/// command has its own, so a segment one call leaves behind is gone for the next, and a
/// host process's segment is out of sight.
#[tokio::test(flavor = "multi_thread")]
async fn sysv_ipc_never_crosses_a_command() {
    // A segment of a host process (this test), with a key a command could guess.
    let key: i32 = 0x5afe_0000 | (std::process::id() as i32 & 0xffff);
    // SAFETY: plain libc calls on a segment this test owns and removes below.
    let host = unsafe { libc::shmget(key, 4096, 0o1666) };
    assert!(host >= 0, "the test could not make its own segment");
    let root = rustix::process::geteuid().is_root();
    let mut servers: Vec<(&str, Option<u32>)> = vec![("off", None), ("auto", None)];
    if root {
        servers.push(("off", Some(65534)));
        servers.push(("auto", Some(65534)));
    }
    for (namespaces, uid) in servers {
        let sb = python_sandbox(namespaces, "");
        let s = match uid {
            Some(uid) => {
                sb.give_to(uid);
                sb.session_as(uid).await
            }
            None => sb.session().await,
        };
        let what = format!("namespaces = {namespaces}, uid {uid:?}");
        let host_seen = shm(&s, &format!("find {key}")).await;
        assert!(!host_seen.starts_with("read"), "{what}: {host_seen}");
        let d = s.call("describe_policy", json!({"verbose": true})).await;
        let sysv = d["detail"]["confinement"]["seccomp"]["sysv_ipc"].to_string();
        if namespaces == "off" {
            assert_eq!(host_seen, "shmget Operation not permitted\n", "{what}");
            assert_eq!(
                shm(&s, "plain").await,
                "shmget Operation not permitted\n",
                "{what}"
            );
            assert!(sysv.contains("refused"), "{what}: {sysv}");
        } else {
            // A call leaves a segment behind; the next call cannot find it.
            let made = shm(&s, "create 4242").await;
            assert_eq!(made, "read round3-secret\n", "{what}");
            let again = shm(&s, "find 4242").await;
            assert_eq!(again, "shmget No such file or directory\n", "{what}");
            assert!(sysv.contains("of its own"), "{what}: {sysv}");
        }
    }
    // SAFETY: removes the segment this test made.
    unsafe { libc::shmctl(host, libc::IPC_RMID, std::ptr::null_mut()) };
}

/// Round 3 (issue 27), item 9: with `exec_in_jail = false` nothing the command writes runs, memfds included: a
/// memfd must be sealed against exec, so `execve("/proc/self/fd/N")` of a copy of a program
/// fails; with `exec_in_jail = true` the same runs (the control).
#[tokio::test(flavor = "multi_thread")]
async fn a_memfd_does_not_run_past_exec_in_jail() {
    let script = r#"
import os, sys
try:
    fd = os.memfd_create("x", os.MFD_CLOEXEC)
except OSError as e:
    print("plain memfd:", e.strerror)
    fd = os.memfd_create("x", os.MFD_CLOEXEC | 8)
os.write(fd, open("/bin/echo", "rb").read())
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    try:
        os.execv("/proc/self/fd/%d" % fd, ["echo", "ran-from-memfd"])
    except OSError as e:
        os.write(1, ("exec: %s\n" % e.strerror).encode())
    os._exit(0)
os.waitpid(pid, 0)
"#;
    for (&uid, namespaces) in server_uids().iter().flat_map(|u| [(u, "auto"), (u, "off")]) {
        // What the script prints in a python sandbox with `extra`, its server run as `uid`.
        let output = async |extra: &str| {
            let sb = python_sandbox(namespaces, extra);
            if let Some(uid) = uid {
                sb.give_to(uid);
            }
            let s = session_with(&sb, "/usr/bin:/bin", uid).await;
            python(&s, script).await
        };
        let out = output("").await;
        assert!(
            out.contains("plain memfd: Operation not permitted"),
            "{namespaces}: {out}"
        );
        assert!(!out.contains("ran-from-memfd"), "{namespaces}: {out}");
        assert!(
            out.contains("exec: Permission denied"),
            "{namespaces}: {out}"
        );
        let out = output("exec_in_jail = true").await;
        assert!(
            out.contains("ran-from-memfd"),
            "{namespaces} uid {uid:?}, exec_in_jail: {out}"
        );
    }
}

/// Round 3 (issue 27), item 5: in the private view a command can change nothing of the root of every call's
/// TMPDIR, nor another running call's TMPDIR: `chmod 000` of either fails, and later calls
/// run. Its own TMPDIR stays writable.
#[tokio::test(flavor = "multi_thread")]
async fn the_tmpdir_root_and_other_calls_tmpdirs_are_out_of_reach() {
    let root = rustix::process::geteuid().is_root();
    let uids: &[Option<u32>] = if root { &[None, Some(65534)] } else { &[None] };
    for &uid in uids {
        // The exec allowlist off: chmod and touch must be stopped by the mounts and
        // Landlock's write rules, not by a refused exec.
        let sb = Sandbox::builder()
            .allow(&["sh", "echo"])
            .limits("timeout_seconds = 20")
            .sandbox("namespaces = \"required\"\nexec_allowlist = false")
            .build();
        let s = match uid {
            Some(uid) => {
                sb.give_to(uid);
                sb.session_as(uid).await
            }
            None => sb.session().await,
        };
        // A running call, whose TMPDIR another call will aim at.
        let handle = s
            .start_process(json!({"command": ["sh", "-c", "echo $TMPDIR; sleep 30"]}))
            .await;
        let other = s.first_line(&handle, 50).await.trim().to_owned();
        assert!(other.starts_with('/'), "{other}");
        let (code, out) = sh(
            &s,
            &format!(
                "chmod 000 \"$(dirname $TMPDIR)\" 2>/dev/null && echo root-changed; \
                 chmod 000 {other} 2>/dev/null && echo other-changed; \
                 touch \"$(dirname $TMPDIR)/planted\" 2>/dev/null && echo planted; \
                 echo mine > $TMPDIR/f && cat $TMPDIR/f"
            ),
        )
        .await;
        assert_eq!(code, "OK");
        assert_eq!(out, "mine\n", "uid {uid:?}");
        // Every later call still runs.
        let (code, out) = sh(&s, "echo $TMPDIR > /dev/null && echo still").await;
        assert_eq!(
            (code.as_str(), out.as_str()),
            ("OK", "still\n"),
            "uid {uid:?}"
        );
        let stopped = s.call("stop_process", json!({"handle": handle})).await;
        assert_eq!(stopped["code"], "OK", "{stopped}");
    }
}

/// Round 3 (issue 27), item 9: the dynamic loader cannot run a jail file in the private view (the jail is
/// mounted noexec, which refuses the loader's executable mapping); in the host view it can
/// (the ceiling THREAT_MODEL states, shown here so that the probe is known to work).
#[tokio::test(flavor = "multi_thread")]
async fn the_loader_does_not_run_a_jail_file_in_the_private_view() {
    let loader = "/lib64/ld-linux-x86-64.so.2";
    if !std::path::Path::new(loader).exists() {
        super::support::skip(format!("skipping: no {loader} on this architecture"));
        return;
    }
    let script = format!(
        "import os, subprocess\nr = subprocess.run(['{loader}', './prog', 'ran-through-the-loader'], capture_output=True, text=True)\nprint(r.stdout.strip() or 'refused')"
    );
    for (namespaces, want) in [("required", "refused"), ("off", "ran-through-the-loader")] {
        let sb = python_sandbox(namespaces, "");
        std::fs::copy("/bin/echo", sb.jail.join("prog")).unwrap();
        let s = sb.session().await;
        let out = python(&s, &script).await;
        assert_eq!(out.trim(), want, "{namespaces}: {out}");
    }
}
