//! No loader route (issue 49, item 2): the dynamic loader maps the program it is given with
//! `mmap`, which Landlock's execute right does not check, so `ld.so /usr/bin/rm f` ran a
//! denylisted program from an interpreter. In the private view the program trees are
//! `noexec` but for what the allowlist grants: the same call fails there. The host view
//! keeps the ceiling, and is the control: there the route still works.

use serde_json::json;

use super::round3::session_with;
use super::support::Sandbox;

/// What python does: hand `rm` (denylisted) to the loader, then say whether it ran.
const THROUGH_THE_LOADER: &str = r#"
import glob, os, subprocess
open("victim", "w").write("x")
loader = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*"))[0]
r = subprocess.run([loader, "/usr/bin/rm", "victim"], capture_output=True, text=True)
print("ran" if not os.path.exists("victim") else "refused", r.returncode, r.stderr.strip()[:200])
"#;

fn sandbox(namespaces: &str) -> Sandbox {
    Sandbox::with(
        "\"python3\", \"echo\"",
        "timeout_seconds = 30",
        "closed",
        &format!("[terminal.sandbox]\nnamespaces = \"{namespaces}\"\n"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_loader_cannot_run_a_program_the_allowlist_refuses() {
    let root = rustix::process::geteuid().is_root();
    let uids: &[Option<u32>] = if root { &[None, Some(65534)] } else { &[None] };
    for &uid in uids {
        let sb = sandbox("required");
        if let Some(uid) = uid {
            sb.give_to(uid);
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let (out, r) = through_the_loader(&s).await;
        assert!(out.starts_with("refused"), "uid {uid:?}: {r}");
        assert!(sb.jail.join("victim").exists(), "uid {uid:?}");
        // Allowed programs still run, through the loader too.
        let r = s.run("echo still-here").await;
        assert_eq!(r["detail"]["stdout"], "still-here\n", "{r}");
    }
    // The control: without the view the same call runs rm (the host view's ceiling).
    let sb = sandbox("off");
    let s = session_with(&sb, "/usr/bin:/bin", None).await;
    let (out, r) = through_the_loader(&s).await;
    assert!(out.starts_with("ran"), "the control: {r}");
}

/// What python printed, and the whole result.
async fn through_the_loader(s: &super::support::Session) -> (String, serde_json::Value) {
    let r = s
        .call(
            "run_command",
            json!({"command": ["python3", "-c", THROUGH_THE_LOADER]}),
        )
        .await;
    let out = r["detail"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (out, r)
}
