//! The policies and sessions many tests build: a sandbox's `[terminal]` table extended, a
//! profile named with a cache of the sandbox's own, python's sandbox, a session as another
//! user, and the small readers of a result.

use serde_json::{Value, json};

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
