//! The third adversarial round (issue 27): each hole, over a real MCP session (or, where the
//! hole is a policy the server must refuse to start with, through the real binary), as root
//! and as an unprivileged server where the server's user matters.

use serde_json::{Value, json};

use super::cli::{assert_fatal, run};
use super::support::{Sandbox, Session};

/// The sandbox's policy with `lines` added to its `[terminal]` table.
pub(super) fn in_terminal_table(sb: &Sandbox, lines: &str) {
    let text = std::fs::read_to_string(&sb.policy).unwrap().replacen(
        "jail_root = \"jail\"",
        &format!("jail_root = \"jail\"\n{lines}"),
        1,
    );
    std::fs::write(&sb.policy, text).unwrap();
}

/// Names `profile` in the sandbox's `[terminal]`, with a profile cache of the sandbox's own.
pub(super) fn with_profile(sb: &Sandbox, profile: &str) {
    in_terminal_table(
        sb,
        &format!(
            "profiles = [\"{profile}\"]\ncache_dir = \"{}/cache\"",
            sb.base().display()
        ),
    );
}

pub(super) fn stdout(r: &Value) -> &str {
    r["detail"]["stdout"].as_str().unwrap_or_default()
}

/// Item 15: in the spaced `key = value` form a secret's value ends at its line's end; the
/// next line (`region = …`) stays whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_redacted_value_ends_at_its_lines_end() {
    let sb = Sandbox::new("");
    let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    std::fs::write(
        sb.jail.join("credentials"),
        format!("[default]\naws_secret_access_key = {key}\nregion = eu-west-1\noutput = json\n"),
    )
    .unwrap();
    let s = sb.session().await;
    let r = s.run("cat credentials").await;
    assert_eq!(r["code"], "OK", "{r}");
    let out = stdout(&r);
    assert!(!out.contains(key), "{out}");
    assert!(
        out.contains("]\nregion = eu-west-1\noutput = json\n"),
        "the next line was swallowed: {out:?}"
    );
}

/// Item 13: the shipping spool is the trail too: inside a write path or a profile's cache
/// (where a command could edit what waits to be shipped) the server does not start.
#[test]
fn a_spool_inside_a_write_path_or_a_cache_does_not_start() {
    let sb = Sandbox::new("");
    let cache = sb.base().join("cache");
    std::fs::create_dir_all(cache.join("pip")).unwrap();
    let ship = |spool: &str| {
        format!("\n[audit.ship]\nsyslog_tcp = \"127.0.0.1:9\"\nspool_dir = \"{spool}\"\n")
    };
    let original = std::fs::read_to_string(&sb.policy).unwrap();
    let cases = [
        (
            format!("write_paths = [\"{}\"]", cache.display()),
            format!("{}/spool", cache.display()),
        ),
        (
            format!("write_paths = [\"{}/pip\"]", cache.display()),
            format!("{}", cache.display()),
        ),
        (
            "profiles = [\"python\"]\ncache_dir = \"cache\"\nshared_cache = true".to_owned(),
            format!("{}/pip/spool", cache.display()),
        ),
    ];
    for (terminal, spool) in cases {
        std::fs::write(&sb.policy, format!("{original}{}", ship(&spool))).unwrap();
        in_terminal_table(&sb, &terminal);
        let out = run(&["terminal", "--config", sb.policy.to_str().unwrap()], &[]);
        assert_fatal(&out, "audit.ship.spool_dir");
    }
    // The control: the same spool beside the cache starts (and is refused by nothing).
    std::fs::write(
        &sb.policy,
        format!(
            "{original}{}",
            ship(&format!("{}/spool", sb.base().display()))
        ),
    )
    .unwrap();
    let out = run(
        &["policy", "check", "--config", sb.policy.to_str().unwrap()],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A sandbox allowing `sh` (an interpreter: only the kernel stands in its way) with
/// `profiles`, its caches beneath `cache_dir`, and `namespaces`.
fn with_profiles(
    profiles: &str,
    cache_dir: &std::path::Path,
    extra: &str,
    namespaces: &str,
) -> Sandbox {
    let sb = Sandbox::with(
        "\"echo\", \"cat\", \"sh\"",
        "timeout_seconds = 120\nmax_output_bytes = 65536",
        "closed",
        // The exec allowlist off: the scripts plant with rm, mv and chmod, and what must
        // stop them is the caches' own read-only binding, not a refused exec.
        &format!("[terminal.sandbox]\nnamespaces = \"{namespaces}\"\nexec_allowlist = false\n"),
    );
    in_terminal_table(
        &sb,
        &format!(
            "profiles = [{profiles}]\ncache_dir = \"{}\"\n{extra}",
            cache_dir.display()
        ),
    );
    sb
}

/// A session whose server has `path` and this test's HOME, so that the profiles find the
/// toolchains as they would for an operator.
pub(super) async fn session_with(sb: &Sandbox, path: &str, uid: Option<u32>) -> Session {
    let home = std::env::var("HOME").unwrap_or_default();
    match uid {
        None => {
            let path = path.to_owned();
            Session::start(&sb.policy, |c| {
                c.env("PATH", path).env("HOME", home);
            })
            .await
        }
        Some(uid) => sb.session_as_with_path(uid, Some(path)).await,
    }
}

/// What a command prints for `script`, with its code.
async fn sh(s: &Session, script: &str) -> (String, String) {
    let r = s
        .call("run_command", json!({"command": ["sh", "-c", script]}))
        .await;
    (
        r["code"].as_str().unwrap_or_default().to_owned(),
        stdout(&r).to_owned(),
    )
}

/// Tries every way a command could plant the tool configuration of a cache: write it,
/// replace it, remove it, rename it, and the same for the other names the tool reads.
const PLANT: &str = r#"for f in "$@"; do
  p="$CACHE/$f"
  (echo '[build]' > "$p") 2>/dev/null && echo "wrote $f"
  rm -f "$p" 2>/dev/null && echo "removed $f"
  mv "$p" "$CACHE/moved" 2>/dev/null && echo "moved $f"
  chmod 644 "$p" 2>/dev/null && (echo x >> "$p") 2>/dev/null && echo "chmod $f"
done
mv "$CACHE" "$CACHE.x" 2>/dev/null && echo "moved the cache"
echo done"#;

/// Item 1 (High): one project's model cannot configure what another project's cache runs.
/// Caches are per jail by default; the tool configuration files inside each cache are
/// read-only placeholders that no command can write, replace or remove; sharing is the
/// operator's named choice.
#[tokio::test(flavor = "multi_thread")]
async fn profile_caches_are_per_jail_and_their_tool_config_is_read_only() {
    // The python profile: its interpreter is the system's, so an unprivileged server has it.
    let path = "/usr/bin:/bin";
    let root = rustix::process::geteuid().is_root();
    let uids: &[Option<u32>] = if root { &[None, Some(65534)] } else { &[None] };
    for &uid in uids {
        // One cache directory named by both policies, as two projects of one user would.
        let shared = tempfile::tempdir().unwrap();
        let cache = std::fs::canonicalize(shared.path()).unwrap();
        let a = with_profiles("\"python\"", &cache, "", "auto");
        let b = with_profiles("\"python\"", &cache, "", "auto");
        if let Some(uid) = uid {
            for sb in [&a, &b] {
                sb.give_to(uid);
            }
            std::os::unix::fs::chown(&cache, Some(uid), Some(uid)).unwrap();
            for entry in walkdir(&cache) {
                std::os::unix::fs::lchown(&entry, Some(uid), Some(uid)).unwrap();
            }
        }
        let sa = session_with(&a, path, uid).await;
        let sb_ = session_with(&b, path, uid).await;
        let (_, cache_a) = sh(&sa, "echo $PIP_CACHE_DIR").await;
        let (_, cache_b) = sh(&sb_, "echo $PIP_CACHE_DIR").await;
        assert!(cache_a.starts_with(cache.to_str().unwrap()), "{cache_a}");
        assert_ne!(cache_a, cache_b, "two jails share one cache");
        assert!(cache_a.contains("/jails/jail-"), "{cache_a}");
        // A's model tries to plant what B's tool would read: it reaches only A's cache, and
        // even there the placeholders hold.
        let (code, out) = sh(
            &sa,
            &format!("CACHE=$PIP_CACHE_DIR; set -- pip.conf; {PLANT}"),
        )
        .await;
        assert_eq!(code, "OK");
        assert_eq!(out, "done\n", "uid {uid:?}: {out}");
        let conf = std::path::Path::new(cache_a.trim()).join("pip.conf");
        assert_eq!(std::fs::metadata(&conf).unwrap().len(), 0);
        // The cache itself stays writable: it is a cache.
        let (_, out) = sh(
            &sa,
            "echo w > $PIP_CACHE_DIR/entry && cat $PIP_CACHE_DIR/entry",
        )
        .await;
        assert_eq!(out, "w\n");
        drop((sa, sb_));
    }
    // The control: with the host view nothing binds the placeholder, and the same script
    // gets through (what the fallback does not hold, and THREAT_MODEL says).
    let shared = tempfile::tempdir().unwrap();
    let cache = std::fs::canonicalize(shared.path()).unwrap();
    let c = with_profiles("\"python\"", &cache, "", "off");
    if !root {
        return;
    }
    let s = session_with(&c, path, None).await;
    let (_, out) = sh(
        &s,
        &format!("CACHE=$PIP_CACHE_DIR; set -- pip.conf; {PLANT}"),
    )
    .await;
    assert!(out.contains("removed pip.conf"), "{out}");
}

/// Item 1: with `shared_cache = true` two projects share the cache, as the operator chose,
/// and `describe_policy` says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_cache_is_the_operators_named_choice() {
    let shared = tempfile::tempdir().unwrap();
    let cache = std::fs::canonicalize(shared.path()).unwrap();
    let a = with_profiles("\"python\"", &cache, "shared_cache = true", "auto");
    let b = with_profiles("\"python\"", &cache, "shared_cache = true", "auto");
    let sa = session_with(&a, "/usr/bin:/bin", None).await;
    let sb_ = session_with(&b, "/usr/bin:/bin", None).await;
    let (_, cache_a) = sh(&sa, "echo $PIP_CACHE_DIR").await;
    let (_, cache_b) = sh(&sb_, "echo $PIP_CACHE_DIR").await;
    assert_eq!(cache_a, cache_b);
    assert_eq!(cache_a.trim(), cache.join("pip").to_str().unwrap());
    let d = sa.call("describe_policy", json!({"verbose": true})).await;
    let text = d["detail"].to_string();
    assert!(text.contains("shared_cache = true"), "{text}");
    // Shared or not, the placeholders hold.
    let (_, out) = sh(
        &sa,
        &format!("CACHE=$PIP_CACHE_DIR; set -- pip.conf; {PLANT}"),
    )
    .await;
    assert_eq!(out, "done\n", "{out}");
}

/// Every entry beneath `dir` (not following links).
pub(super) fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

/// A sandbox allowing python3 (an interpreter, so only the kernel stands in its way) in
/// `namespaces`, with `extra` TOML.
pub(super) fn python_sandbox(namespaces: &str, extra: &str) -> Sandbox {
    Sandbox::with(
        "\"python3\", \"echo\"",
        "timeout_seconds = 20\nmax_output_bytes = 65536",
        "closed",
        &format!("[terminal.sandbox]\nnamespaces = \"{namespaces}\"\n{extra}"),
    )
}

pub(super) async fn python(s: &Session, script: &str) -> String {
    let r = s
        .call("run_command", json!({"command": ["python3", "-c", script]}))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    format!(
        "{}{}",
        stdout(&r),
        r["detail"]["stderr"].as_str().unwrap_or_default()
    )
}

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
        .call(
            "run_command",
            json!({"command": format!("python3 -c '{}' {args}", SHM.replace('\'', "\"")) }),
        )
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

/// Item 9: with `exec_in_jail = false` nothing the command writes runs, memfds included: a
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
    let root = rustix::process::geteuid().is_root();
    let uids: &[Option<u32>] = if root { &[None, Some(65534)] } else { &[None] };
    for (&uid, namespaces) in uids.iter().flat_map(|u| [(u, "auto"), (u, "off")]) {
        let sb = python_sandbox(namespaces, "");
        if let Some(uid) = uid {
            sb.give_to(uid);
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let out = python(&s, script).await;
        assert!(
            out.contains("plain memfd: Operation not permitted"),
            "{namespaces}: {out}"
        );
        assert!(!out.contains("ran-from-memfd"), "{namespaces}: {out}");
        assert!(
            out.contains("exec: Permission denied"),
            "{namespaces}: {out}"
        );
        let sb = python_sandbox(namespaces, "exec_in_jail = true");
        if let Some(uid) = uid {
            sb.give_to(uid);
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let out = python(&s, script).await;
        assert!(
            out.contains("ran-from-memfd"),
            "{namespaces} uid {uid:?}, exec_in_jail: {out}"
        );
    }
}

/// Item 7: where the exec allowlist does not route them through the server (here it is off),
/// an allowed interpreter voids the argument rules and approvals of every other program;
/// `describe_policy` and `policy check` say so, naming the ruled programs. With the list on
/// (issue 35) the interpreter's nested calls meet the rules, and there is no warning.
#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_interpreter_is_named_as_voiding_the_argument_rules() {
    let rule = "[[terminal.rules]]\ncommand = \"git\"\nconfirm_args = [\"push\"]\n";
    let listed = Sandbox::with(
        "\"python3\", \"git\"",
        "timeout_seconds = 20",
        "closed",
        rule,
    );
    let s = listed.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["warnings"], json!([]), "{d}");
    drop(s);
    let sb = Sandbox::with(
        "\"python3\", \"git\"",
        "timeout_seconds = 20",
        "closed",
        &format!("{rule}\n[terminal.sandbox]\nexec_allowlist = false\n"),
    );
    let s = sb.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    let warnings = d["detail"]["warnings"].to_string();
    assert!(
        warnings.contains("an allowed interpreter (python3) can start any other program itself, since exec_allowlist is off")
            && warnings.contains("of git"),
        "{warnings}"
    );
    let out = run(
        &["policy", "check", "--config", sb.policy.to_str().unwrap()],
        &[],
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("an allowed interpreter (python3)"), "{text}");
    // Without the interpreter, no such warning.
    let sb = Sandbox::with("\"git\"", "timeout_seconds = 20", "closed", "");
    let s = sb.session().await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["warnings"], json!([]), "{d}");
}

/// Item 5: in the private view a command can change nothing of the root of every call's
/// TMPDIR, nor another running call's TMPDIR: `chmod 000` of either fails, and later calls
/// run. Its own TMPDIR stays writable.
#[tokio::test(flavor = "multi_thread")]
async fn the_tmpdir_root_and_other_calls_tmpdirs_are_out_of_reach() {
    let root = rustix::process::geteuid().is_root();
    let uids: &[Option<u32>] = if root { &[None, Some(65534)] } else { &[None] };
    for &uid in uids {
        let sb = Sandbox::with(
            "\"sh\", \"echo\"",
            "timeout_seconds = 20",
            "closed",
            // The exec allowlist off: chmod and touch must be stopped by the mounts and
            // Landlock's write rules, not by a refused exec.
            "[terminal.sandbox]\nnamespaces = \"required\"\nexec_allowlist = false\n",
        );
        let s = match uid {
            Some(uid) => {
                sb.give_to(uid);
                sb.session_as(uid).await
            }
            None => sb.session().await,
        };
        // A running call, whose TMPDIR another call will aim at.
        let started = s
            .call(
                "start_process",
                json!({"command": ["sh", "-c", "echo $TMPDIR; sleep 30"]}),
            )
            .await;
        assert_eq!(started["code"], "OK", "{started}");
        let handle = started["detail"]["handle"].as_str().unwrap().to_owned();
        let mut other = String::new();
        for _ in 0..50 {
            let r = s
                .call(
                    "read_process_output",
                    json!({"handle": handle, "wait_seconds": 1}),
                )
                .await;
            other.push_str(r["detail"]["stdout"].as_str().unwrap_or_default());
            if other.ends_with('\n') {
                break;
            }
        }
        let other = other.trim().to_owned();
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

/// Item 6: a file the server reads in the jail cannot stall it: a worktree's `.git` file
/// under a write lease (an open would wait the kernel's 45 s lease-break time) is refused at
/// once, and every other call runs meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_leased_git_file_does_not_stall_the_server() {
    use std::os::fd::AsRawFd;
    let sb = Sandbox::new("");
    std::fs::create_dir_all(sb.jail.join("wt")).unwrap();
    std::fs::create_dir_all(sb.jail.join("main.git")).unwrap();
    let dot_git = sb.jail.join("wt/.git");
    std::fs::write(&dot_git, "gitdir: ../main.git\n").unwrap();
    // The kernel tells the lease holder of a break with SIGIO, whose default ends it.
    // SAFETY: sets a signal's disposition to ignore; no handler runs.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    let held = std::fs::File::open(&dot_git).unwrap();
    // SAFETY: fcntl on a descriptor this test owns.
    let rc = unsafe { libc::fcntl(held.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) };
    assert_eq!(
        rc,
        0,
        "the test could not take a lease: {}",
        std::io::Error::last_os_error()
    );
    let s = sb.session().await;
    let started = std::time::Instant::now();
    let r = s
        .call("run_command", json!({"command": "git status", "cwd": "wt"}))
        .await;
    // Without the fix the server's open waits out the lease (45 s on this kernel).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{r}"
    );
    assert_ne!(r["code"], "OK", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("lease"), "{r}");
    let r = s.run("echo still").await;
    assert_eq!(stdout(&r), "still\n", "{r}");
    drop(held);
}

/// How many inotify instances a process of uid 65534 on the host can open now (at most 8).
fn host_inotify_of_nobody() -> String {
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "python3", "-c"])
        .arg("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nfds = [libc.inotify_init() for _ in range(8)]\nprint(sum(1 for f in fds if f >= 0))")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Item 8: an unprivileged server's commands share half of the uid's per-user kernel
/// counters at most: a session holding every inotify instance it can get leaves the host's
/// processes of the same uid theirs. POSIX message queues, charged host-wide too, are off.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_take_the_users_kernel_counters() {
    if !rustix::process::geteuid().is_root() {
        super::support::skip(
            "skipping: the unprivileged server is started as uid 65534 by a root test",
        );
        return;
    }
    let host_limit: usize = std::fs::read_to_string("/proc/sys/user/max_inotify_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let sb = python_sandbox("required", "");
    sb.give_to(65534);
    let s = session_with(&sb, "/usr/bin:/bin", Some(65534)).await;
    let hog = format!(
        "import ctypes, sys, time\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         fds = [libc.inotify_init() for _ in range({host_limit})]\n\
         print(sum(1 for f in fds if f >= 0), flush=True)\n\
         time.sleep(30)\n"
    );
    let started = s
        .call("start_process", json!({"command": ["python3", "-c", hog]}))
        .await;
    assert_eq!(started["code"], "OK", "{started}");
    let handle = started["detail"]["handle"].as_str().unwrap().to_owned();
    let mut held = String::new();
    for _ in 0..30 {
        let r = s
            .call(
                "read_process_output",
                json!({"handle": handle, "wait_seconds": 1}),
            )
            .await;
        held.push_str(r["detail"]["stdout"].as_str().unwrap_or_default());
        if held.ends_with('\n') {
            break;
        }
    }
    let held: usize = held.trim().parse().unwrap();
    assert!(
        held > 0 && held <= host_limit / 2,
        "the command held {held} of {host_limit}"
    );
    // While it holds them, a host process of the same uid still gets its own.
    assert_eq!(host_inotify_of_nobody(), "8");
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert!(
        d["detail"]["confinement"]["view"]["detail"]
            .as_str()
            .unwrap()
            .contains("bounded to half the host's"),
        "{d}"
    );
    // POSIX message queues are charged host-wide to the uid: refused.
    let mq = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nq = libc.mq_open(b'/round3', os.O_CREAT | os.O_RDWR, 0o600, None)\nprint('refused' if q < 0 else 'made')";
    let out = python(&s, mq).await;
    assert_eq!(out, "refused\n", "{out}");
    s.call("stop_process", json!({"handle": handle})).await;
}

/// Item 14: `jail_bytes` bounds what the jail and the caches hold: once a call leaves more,
/// the next command is refused with the total and the key, and runs again once space is
/// freed (by the operator here).
#[tokio::test(flavor = "multi_thread")]
async fn jail_bytes_bounds_what_the_jail_holds() {
    let sb = Sandbox::with(
        "\"head\", \"echo\", \"sh\"",
        "timeout_seconds = 20\njail_bytes = 1048576",
        "closed",
        "",
    );
    let s = sb.session().await;
    let r = s
        .call(
            "run_command",
            json!({"command": ["sh", "-c", "head -c 3000000 /dev/zero > big"]}),
        )
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    // The measurement runs in the background after the call.
    let mut refused = Value::Null;
    for _ in 0..50 {
        let r = s.run("echo hi").await;
        if r["code"] == "POLICY_DENIED" {
            refused = r;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let reason = refused["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("jail_bytes = 1048576"), "{refused}");
    std::fs::remove_file(sb.jail.join("big")).unwrap();
    let r = s.run("echo hi").await;
    assert_eq!(stdout(&r), "hi\n", "{r}");
}

/// Item 14: a secret a session prints in two parts, more than the quiet time apart, never
/// comes back whole across reads: within three quiet times the token a line ends in waits
/// for the rest; after a longer pause its first part is shown and the rest is judged at the
/// join (the marker), never in the clear.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_printed_in_two_parts_never_comes_back_whole() {
    let sb = python_sandbox("auto", "");
    let s = sb.session().await;
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    for pause in ["0.6", "1.5"] {
        let script = format!(
            "import sys, time\nsys.stdout.write('token {}'); sys.stdout.flush()\ntime.sleep({pause})\nsys.stdout.write('{}\\n'); sys.stdout.flush()\ntime.sleep(0.2)\n",
            &secret[..14],
            &secret[14..]
        );
        let started = s
            .call(
                "start_process",
                json!({"command": ["python3", "-c", script]}),
            )
            .await;
        let handle = started["detail"]["handle"].as_str().unwrap().to_owned();
        let mut all = String::new();
        for _ in 0..40 {
            let r = s
                .call(
                    "read_process_output",
                    json!({"handle": handle, "wait_seconds": 1}),
                )
                .await;
            all.push_str(r["detail"]["stdout"].as_str().unwrap_or_default());
            if r["detail"]["running"] == false && r["detail"]["stdout"] == "" {
                break;
            }
        }
        assert!(all.starts_with("token "), "{pause}: {all}");
        assert!(!all.contains(&secret[14..]), "{pause}: {all}");
        assert!(all.contains("[REDACTED:github_pat]"), "{pause}: {all}");
        if pause == "0.6" {
            assert_eq!(all, "token [REDACTED:github_pat]\n", "{pause}");
        }
    }
}

/// Item 9: the dynamic loader cannot run a jail file in the private view (the jail is
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
