//! The kernel's per-user counters (issue 49): inotify instances are counted per user, so a
//! root server's command that held them all gave every root process of the host EMFILE (the
//! server's own watch of the jail among them). Commands now hold at most half of them
//! together, root or not; the control is the same program run unconfined, which gets more.

use serde_json::json;

use super::builders::{python, python_sandbox, session_with};
use super::support::{root_or_skip, server_uids};

/// Opens inotify instances until the kernel refuses one (or `LIMIT` are open), says how
/// many it holds, then holds them.
const HOLD: &str = r#"
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
limit = int(sys.argv[1])
held = []
while len(held) < limit:
    fd = libc.inotify_init()
    if fd < 0:
        break
    held.append(fd)
print("holding", len(held), flush=True)
time.sleep(float(sys.argv[2]))
"#;

fn max_instances() -> usize {
    std::fs::read_to_string("/proc/sys/user/max_inotify_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn holding(out: &str) -> usize {
    out.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_hold_at_most_half_of_their_users_inotify_instances() {
    let max = max_instances();
    let ask = (max / 2 + 8).to_string();
    // The control: unconfined, the same program gets more than half.
    let control = std::process::Command::new("python3")
        .args(["-c", HOLD, &ask, "0"])
        .output()
        .unwrap();
    let got = holding(&String::from_utf8_lossy(&control.stdout));
    assert!(got > max / 2, "the control held {got} of {max}");

    for &uid in server_uids() {
        let sb = python_sandbox("required", "");
        if let Some(uid) = uid {
            sb.give_to(uid);
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let handle = s
            .start_process(json!({"command": ["python3", "-c", HOLD, &ask, "30"]}))
            .await;
        let held = holding(&s.first_line(&handle, 30).await);
        assert!(
            held > 0 && held <= max / 2,
            "uid {uid:?}: a command held {held} of {max}"
        );
        // While the command holds all it may, a process of the server's user outside still
        // gets one (the test runs as the server's user when uid is None).
        if uid.is_none() {
            let fd = rustix::fs::inotify::init(rustix::fs::inotify::CreateFlags::CLOEXEC);
            assert!(
                fd.is_ok(),
                "the host's own: {fd:?} while a command holds {held}"
            );
        }
        let stopped = s.call("stop_process", json!({"handle": handle})).await;
        assert_eq!(stopped["code"], "OK", "{stopped}");
    }
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

/// Round 3 (issue 27), item 8: an unprivileged server's commands share half of the uid's per-user kernel
/// counters at most: a session holding every inotify instance it can get leaves the host's
/// processes of the same uid theirs. POSIX message queues, charged host-wide too, are off.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_take_the_users_kernel_counters() {
    if !root_or_skip("skipping: the unprivileged server is started as uid 65534 by a root test") {
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
    let handle = s
        .start_process(json!({"command": ["python3", "-c", hog]}))
        .await;
    let held: usize = s.first_line(&handle, 30).await.trim().parse().unwrap();
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
