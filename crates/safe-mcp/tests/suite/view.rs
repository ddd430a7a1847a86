//! Confinement v2: each command enters the server's private view of the machine (mount,
//! ipc, uts and network namespaces with a fresh root). Seen from outside: what is not in the
//! view cannot be read, listed or changed, not even its metadata through a symlink; read
//! paths are read-only; the network has loopback only. A `namespaces = "off"` control shows
//! each probe can tell the difference.

use serde_json::json;

use super::support::{
    BIN, SETPRIV_NEEDS_ROOT, Sandbox, Session, live_processes_with, root_or_skip, stdout_of,
};

/// Whether this kernel lets the server's user make the view's namespaces (and, with
/// `pid`, a pid namespace with its own `/proc` in them), asked of util-linux's `unshare`
/// (not of the server, so that a server that fails to make them where they exist fails the
/// test instead of skipping it). Root needs no user namespace.
pub fn namespaces_available(uid: Option<u32>, pid: bool) -> bool {
    let user = uid.is_some() || !rustix::process::geteuid().is_root();
    let mut args: Vec<String> = Vec::new();
    if let Some(uid) = uid {
        args.extend([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".to_owned(),
        ]);
    }
    args.extend(["--".to_owned(), "unshare".to_owned()]);
    args.push(if user { "-Urmin" } else { "-min" }.to_owned());
    if pid {
        args.extend(["-pf".to_owned(), "--mount-proc".to_owned()]);
    }
    args.push("true".to_owned());
    let ok = std::process::Command::new("setpriv")
        .args(&args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        super::support::skip(format!(
            "skipping: this kernel or user cannot make mount, ipc and network namespaces{} here (unshare failed), so the server falls back {}",
            if pid {
                " with a pid namespace and its /proc"
            } else {
                ""
            },
            if pid {
                "to a view without a pid namespace, or to the host view"
            } else {
                "to the host view"
            }
        ));
    }
    ok
}

/// Where the private view can be made: a default [`sandbox`], a session with its server,
/// and its verbose `describe_policy`; `None` (the test skipped) where it cannot.
async fn private_view() -> Option<(Sandbox, Session, serde_json::Value)> {
    if !namespaces_available(None, true) {
        return None;
    }
    let sb = sandbox("");
    let s = sb.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    Some((sb, s, d))
}

fn sandbox(extra: &str) -> Sandbox {
    let sb = Sandbox::builder()
        .allow_more(&["python3", "stat"])
        .roomy(20)
        .extra(extra)
        .build();
    // What the scripts look around with.
    sb.add_helpers(&["id", "mkdir", "readlink", "hostname", "ln", "chmod"]);
    sb
}

/// A read path of the test's own, with one file in it.
fn read_path_with_file(sb: &Sandbox) -> std::path::PathBuf {
    let dir = sb.base().join("readonly");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("f"), "read me").unwrap();
    dir
}

fn policy_with_read_path(ro: &std::path::Path, namespaces: &str) -> String {
    let defaults: Vec<String> = [
        "/usr",
        "/bin",
        "/lib",
        "/lib64",
        "/etc/ld.so.cache",
        "/etc/alternatives",
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
        "/dev/null",
        "/dev/urandom",
    ]
    .iter()
    .map(|p| format!("\"{p}\""))
    .collect();
    format!(
        "[terminal.sandbox]\nnamespaces = \"{namespaces}\"\nnetwork = true\nread_paths = [{}, \"{}\"]",
        defaults.join(", "),
        ro.display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_sees_only_its_view_of_the_machine() {
    if !namespaces_available(None, false) {
        return;
    }
    let outside = |sb: &Sandbox| {
        let f = sb.base().join("outside.txt");
        std::fs::write(&f, "outside").unwrap();
        f
    };
    for namespaces in ["auto", "off"] {
        let probe_dir = tempfile::tempdir().unwrap();
        let sb = sandbox("");
        let ro = read_path_with_file(&sb);
        let key = sb.base().join("audit.key");
        std::fs::write(&key, "k".repeat(64)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = std::fs::read_to_string(&sb.policy).unwrap();
        std::fs::write(
            &sb.policy,
            format!(
                "audit_hmac_key_file = \"audit.key\"\n{text}\n{}",
                policy_with_read_path(&ro, namespaces)
            ),
        )
        .unwrap();
        let secret = outside(&sb);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let s = sb.session().await;
        let d = s.call("describe_policy", json!({"verbose": true})).await;
        let view = d["detail"]["confinement"]["view"]["view"].clone();
        let private = namespaces == "auto";
        assert_eq!(view, if private { "private" } else { "host" }, "{d}");

        // What is not in the view is not there: the host's accounts, the audit log, its
        // HMAC key, the policy, a file beside the jail.
        let r = s
            .sh(&format!(
                "cat /etc/passwd; ls /etc/shadow {} {} {} {} 2>&1; cat {} 2>&1; hostname",
                sb.audit.display(),
                key.display(),
                sb.policy.display(),
                secret.display(),
                secret.display()
            ))
            .await;
        let out = stdout_of(&r);
        assert!(out.contains("root:x:0:0"), "{r}");
        if private {
            assert!(!out.contains("daemon:"), "the host's passwd leaked: {out}");
            assert_eq!(out.matches("No such file or directory").count(), 6, "{out}");
            assert!(out.trim_end().ends_with("safe-mcp"), "{out}");
        } else {
            assert!(
                out.contains("daemon:"),
                "control: the host's passwd is visible: {out}"
            );
        }

        // Metadata through a symlink to a file outside the jail, and of a read path's file:
        // Landlock does not mediate chmod or utimes; the view does.
        let before = std::fs::metadata(&secret).unwrap();
        let ro_before = std::fs::metadata(ro.join("f")).unwrap();
        let script = format!(
            "ln -s {out} lnk; touch -c -d 2001-01-01 lnk; chmod 600 lnk; touch -c -d 2001-01-01 {ro}/f; chmod 600 {ro}/f",
            out = secret.display(),
            ro = ro.display()
        );
        s.sh(&script).await;
        let after = std::fs::metadata(&secret).unwrap();
        let ro_after = std::fs::metadata(ro.join("f")).unwrap();
        use std::os::unix::fs::MetadataExt;
        if private {
            assert_eq!(
                before.mtime(),
                after.mtime(),
                "mtime changed outside the jail"
            );
            assert_eq!(before.mode(), after.mode(), "mode changed outside the jail");
            assert_eq!(
                ro_before.mtime(),
                ro_after.mtime(),
                "a read path was changed"
            );
            assert_eq!(ro_before.mode(), ro_after.mode(), "a read path was changed");
            let r = s.sh(&format!("cat {}/f", ro.display())).await;
            assert_eq!(r["detail"]["stdout"], "read me", "{r}");
        } else {
            assert!(
                before.mtime() != after.mtime() || before.mode() != after.mode(),
                "control: through a symlink, the host view lets metadata change"
            );
        }

        own_loopback(&s, &listener, private).await;
        drop(probe_dir);
    }
}

/// Loopback of its own: the host's listener is not reachable even with network on (the
/// control: in the host view it is).
async fn own_loopback(s: &Session, listener: &std::net::TcpListener, private: bool) {
    let port = listener.local_addr().unwrap().port();
    let probe = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\nexcept OSError as e:\n    print('refused', e.errno)"
    );
    let r = s.py(probe).await;
    let connected = listener.accept().is_ok();
    if private {
        assert!(!connected, "the host's loopback was reached");
        assert!(stdout_of(&r).starts_with("refused"), "{r}");
    } else {
        assert!(
            connected,
            "control: with network on, the host view reaches loopback: {r}"
        );
    }
}

/// An unprivileged server makes the same view in a user namespace of its own.
#[tokio::test(flavor = "multi_thread")]
async fn an_unprivileged_server_gets_the_same_view() {
    if !root_or_skip(SETPRIV_NEEDS_ROOT) {
        return;
    }
    if !namespaces_available(Some(65534), false) {
        return;
    }
    // The pid namespace needs more of the kernel (a /proc it will mount in a user namespace).
    let pid = namespaces_available(Some(65534), true);
    let sb = sandbox("");
    sb.give_to(65534);
    let s = sb.session_as(65534).await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    let view = &d["detail"]["confinement"]["view"];
    assert_eq!(view["view"], "private", "{d}");
    assert_eq!(view["namespaces"][0], "user", "{d}");
    assert_eq!(
        d["detail"]["confinement"]["capabilities"]
            .as_str()
            .unwrap()
            .split(' ')
            .next(),
        Some("all"),
        "{d}"
    );
    assert_eq!(
        view["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "pid"),
        pid,
        "{d}"
    );
    let r = s.sh("echo $$; id -u; cat /etc/passwd; ls /etc/shadow 2>&1; echo made > made.txt; cat made.txt").await;
    let out = stdout_of(&r);
    let (first, rest) = out.split_once('\n').unwrap();
    assert!(rest.starts_with("65534\n"), "{r}");
    assert_eq!(
        first == "2",
        pid,
        "the command is its init's child exactly where pid namespaces work: {r}"
    );
    assert!(
        out.contains("nobody:x:65534") && !out.contains("daemon:"),
        "{out}"
    );
    assert!(out.contains("No such file or directory"), "{out}");
    assert!(out.ends_with("made\n"), "{out}");
}

/// `kill -9 -1` from a command (as root, with capabilities dropped, uid 0 may still signal
/// every uid-0 process by permission bits) kills nothing outside its own tree: Landlock's
/// signal scoping confines it to its own domain, in either view.
#[tokio::test(flavor = "multi_thread")]
async fn kill_minus_one_kills_nothing_outside() {
    for namespaces in ["auto", "off"] {
        let sb = sandbox(&format!(
            "[terminal.sandbox]\nnamespaces = \"{namespaces}\""
        ));
        let mut bystander = std::process::Command::new("sleep")
            .arg("30.917")
            .spawn()
            .unwrap();
        let s = sb.session().await;
        let r = s.sh("kill -9 -1; echo survived").await;
        assert_eq!(r["code"], "OK", "{namespaces}: {r}");
        assert_eq!(
            bystander.try_wait().unwrap(),
            None,
            "{namespaces}: a process outside the command was killed"
        );
        let r = s.run("echo still-serving").await;
        assert_eq!(
            r["detail"]["stdout"], "still-serving\n",
            "{namespaces}: {r}"
        );
        bystander.kill().unwrap();
        let _ = bystander.wait();
    }
}

/// The device files in the view are read-only binds of the host's: writing them works,
/// changing their mode does not (uid 0 owns the host's /dev/null). The probe asks for the
/// mode /dev/null already has, so the host is unchanged whatever happens.
#[tokio::test(flavor = "multi_thread")]
async fn device_files_in_the_view_cannot_be_chmodded() {
    let sb = sandbox("");
    let s = sb.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    if d["detail"]["confinement"]["view"]["view"] != "private" {
        super::support::skip("skipping: no private view here");
        return;
    }
    let r = s
        .sh("echo x > /dev/null && echo wrote; chmod 666 /dev/null && echo chmodded")
        .await;
    assert_eq!(r["detail"]["stdout"], "wrote\n", "{r}");
}

/// `policy check` of the sandbox's policy with `extra_read` among the read paths fails,
/// saying `why`.
fn read_path_is_fatal(sb: &Sandbox, extra_read: &std::path::Path, why: &str) {
    let text = std::fs::read_to_string(&sb.policy).unwrap();
    std::fs::write(
        &sb.policy,
        format!(
            "{text}\n[terminal.sandbox]\nread_paths = [\"/usr\", \"{}\"]\n",
            extra_read.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["policy", "check", "--config", sb.policy.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(why),
        "{out:?}"
    );
}

/// A read path inside the jail is a path the model could swap for a symlink to anything,
/// and one over the audit trail would let commands read it: neither policy loads.
#[test]
fn read_paths_in_the_jail_or_over_the_trail_are_fatal() {
    let sb = sandbox("");
    read_path_is_fatal(&sb, &sb.jail.join("sub"), "read_paths");
    let sb = sandbox("");
    read_path_is_fatal(&sb, sb.base(), "lets commands read the audit_log");
}

/// Each command is the child of its own init, pid 1 of a namespace of its own: it is pid 2,
/// its `/proc` lists only its own tree and is read-only, and the `namespaces = "off"`
/// control sees the host's pids.
#[tokio::test(flavor = "multi_thread")]
async fn each_command_has_a_pid_namespace_of_its_own() {
    if !namespaces_available(None, true) {
        return;
    }
    for namespaces in ["auto", "off"] {
        let sb = sandbox(&format!(
            "[terminal.sandbox]\nnamespaces = \"{namespaces}\""
        ));
        let s = sb.session().await;
        let d = s.call("describe_policy", json!({"verbose": true})).await;
        let names = d["detail"]["confinement"]["view"]["namespaces"].clone();
        let r = s.sh("echo $$; ls /proc | grep -c '^[0-9]'; echo x > /proc/sys/kernel/hostname 2>/dev/null || echo unwritable; head -1 /proc/self/status").await;
        assert_eq!(r["code"], "OK", "{namespaces}: {r}");
        let out = stdout_of(&r).to_owned();
        let lines: Vec<&str> = out.lines().collect();
        if namespaces == "auto" {
            assert!(names.as_array().unwrap().iter().any(|n| n == "pid"), "{d}");
            assert_eq!(lines[0], "2", "the command is not its init's child: {out}");
            // init, sh, ls and grep: its own tree, readable, and nothing else.
            let count: u32 = lines[1].parse().unwrap();
            assert!(
                (3..=5).contains(&count),
                "the command sees other processes, or none: {out}"
            );
            assert_eq!(lines[2], "unwritable", "{out}");
            assert_eq!(lines[3], "Name:\thead", "{out}");
        } else {
            assert_ne!(lines[0], "2", "control: the host's pids: {out}");
        }
    }
}

/// A `setsid` double-fork escapee, re-parented to the namespace's init rather than to the
/// server, dies when the command ends: with its pid namespace.
#[tokio::test(flavor = "multi_thread")]
async fn a_setsid_escapee_dies_with_the_pid_namespace() {
    let Some((_sb, s, d)) = private_view().await else {
        return;
    };
    assert!(
        d["detail"]["confinement"]["view"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "pid"),
        "{d}"
    );
    let marker = "30.4711";
    let r = s.sh(&format!(
                "setsid sh -c 'sleep {marker} & exit 0' </dev/null >/dev/null 2>&1; sleep 0.2; echo left"
            )).await;
    assert_eq!(r["detail"]["stdout"], "left\n", "{r}");
    // The kernel kills the namespace as its init exits, before the server reaps the init.
    assert!(
        live_processes_with(marker).is_empty(),
        "the escapee outlived its command"
    );
}

/// The view's `/dev`: five harmless devices, `/dev/tty` that opens nothing (each command is
/// in a session of its own, with no controlling terminal), and a devpts of the command's own
/// where it can make a pseudo-terminal, numbered from 0 whatever the host has open.
#[tokio::test(flavor = "multi_thread")]
async fn the_view_has_a_minimal_dev_with_private_ptys() {
    let Some((_sb, s, d)) = private_view().await else {
        return;
    };
    let detail = d["detail"]["confinement"]["view"]["detail"]
        .as_str()
        .unwrap();
    assert!(detail.contains("devpts of its own"), "{d}");
    let probe = "import os, pty\nm, s = os.openpty()\nprint(os.ttyname(s))\ntry:\n    open('/dev/tty', 'w')\n    print('tty opened')\nexcept OSError as e:\n    print('tty', e.errno)\n";
    let r = s.py(probe).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(
        r["detail"]["stdout"],
        "/dev/pts/0\ntty 6\n", // ENXIO
        "{r}"
    );
    // The host's devices are not there at all.
    let r = s
        .sh("ls /dev/mem /dev/kmsg /dev/shm /dev/mqueue 2>&1")
        .await;
    let out = stdout_of(&r);
    assert_eq!(out.matches("No such file or directory").count(), 4, "{r}");
}

/// Issue 55 (item 3): a command that makes itself a terminal (a pty of its own, its
/// controlling terminal in a session of its own) cannot type into it, paste a console
/// selection into it or swap its line discipline: seccomp answers EPERM before the
/// terminal's driver sees the request. The control: the same program run unconfined
/// types (`TIOCSTI ok`), is told by the driver that a pty is no console (not EPERM) and sets
/// the line discipline it has (`TIOCSETD ok`). As root and under an unprivileged server.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_type_into_a_terminal() {
    let probe = r#"
import fcntl, os, struct, termios
m, s = os.openpty()
name = os.ttyname(s)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    fd = os.open(name, os.O_RDWR)  # a session leader's first terminal: its controlling one
    said = []
    for label, request, arg in [("TIOCSTI", termios.TIOCSTI, b"x"),
                                ("TIOCLINUX", termios.TIOCLINUX, bytes([6])),
                                ("TIOCSETD", termios.TIOCSETD, struct.pack("i", 0))]:
        try:
            fcntl.ioctl(fd, request, arg)
            said.append(label + " ok")
        except OSError as e:
            said.append(f"{label} {e.errno}")
    os.write(w, " ".join(said).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
print(os.read(r, 1000).decode())
"#;
    let unconfined = std::process::Command::new("python3")
        .args(["-c", probe])
        .output()
        .unwrap();
    let control = String::from_utf8_lossy(&unconfined.stdout);
    let words: Vec<&str> = control.split_whitespace().collect();
    // Where `dev.tty.legacy_tiocsti` is 0 the kernel itself answers EIO to a caller without
    // CAP_SYS_ADMIN (Linux 6.2+): still the terminal's code, not seccomp's EPERM.
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map_or(true, |v| v.trim() != "0");
    let typed = if legacy || rustix::process::geteuid().is_root() {
        "ok"
    } else {
        "5"
    };
    assert!(
        words.len() == 6
            && words[..2] == ["TIOCSTI", typed]
            && words[2] == "TIOCLINUX"
            && words[3] != "1"
            && words[4..] == ["TIOCSETD", "ok"],
        "the control: unconfined, each request reaches the terminal's driver (a pty is no console: ENOTTY or EINVAL, never EPERM): {unconfined:?}"
    );
    let Some((_sb, s, d)) = private_view().await else {
        return;
    };
    let refused = &d["detail"]["confinement"]["seccomp"]["refused_terminal_ioctls"];
    assert_eq!(
        refused,
        &json!(["TIOCSTI", "TIOCLINUX", "TIOCCONS", "TIOCSETD"]),
        "{d}"
    );
    let r = s.py(probe).await;
    assert_eq!(
        stdout_of(&r),
        "TIOCSTI 1 TIOCLINUX 1 TIOCSETD 1\n",
        "each refused with EPERM: {r}"
    );
    // The same under an unprivileged server (its commands in a user namespace of its own).
    if rustix::process::geteuid().is_root() && namespaces_available(Some(65534), false) {
        let sb = sandbox("");
        sb.give_to(65534);
        let r = sb.session_as(65534).await.py(probe).await;
        assert_eq!(
            stdout_of(&r),
            "TIOCSTI 1 TIOCLINUX 1 TIOCSETD 1\n",
            "unprivileged: {r}"
        );
    }
}
