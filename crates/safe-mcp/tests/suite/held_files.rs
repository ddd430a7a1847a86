//! Files held from one kind of writer (issue 48, items 5 and 6): the profile caches'
//! read-only placeholders are never written by the file tools (their temp-file-and-rename
//! would replace the inode commands see read-only), and `confirm_paths` are never written by
//! commands (the file tools write them after a person's approval).
//! And the caches of jails that are gone do not pile up (issue 50, item 8).

use serde_json::json;

use super::builders::{python, python_sandbox, session_with, walkdir, with_profile};
use super::support::{Sandbox, eventually, reason_of, server_uids};

/// Item 5: `pip.conf` in the python profile's cache is a read-only placeholder; write_file
/// and edit_file refuse it, naming why, and it stays empty.
#[tokio::test(flavor = "multi_thread")]
async fn the_file_tools_never_write_a_profile_caches_placeholder() {
    let sb = python_sandbox("required", "");
    with_profile(&sb, "python");
    let s = session_with(&sb, &std::env::var("PATH").unwrap_or_default(), None).await;
    let placeholder = walkdir(&sb.base().join("cache"))
        .into_iter()
        .find(|p| p.ends_with("pip.conf"))
        .expect("the python profile's cache has its pip.conf placeholder");
    let r = s
        .call(
            "write_file",
            json!({"path": placeholder, "content": "[global]\nindex-url = https://evil.example/\n"}),
        )
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("placeholder"), "{r}");
    assert_eq!(std::fs::read_to_string(&placeholder).unwrap(), "");
}

/// Item 6: a confirm path exists; commands may not write it (by argument in every view, and
/// the kernel refuses an interpreter's write in the private view), and `describe_policy`
/// says so.
#[tokio::test(flavor = "multi_thread")]
async fn commands_never_write_a_confirm_path() {
    for &uid in server_uids() {
        confirm_path_held(uid).await;
    }
}

async fn confirm_path_held(uid: Option<u32>) {
    let sb = python_sandbox(
        "required",
        "[terminal.files]\nconfirm_paths = [\"deploy.yaml\", \"ci/**\"]\n",
    );
    sb.edit_policy(
        "commands = [\"python3\", \"echo\"]",
        "commands = [\"python3\", \"echo\", \"cp\"]",
    );
    sb.write_in_jail("deploy.yaml", "replicas: 1\n");
    if let Some(uid) = uid {
        sb.give_to(uid);
        std::os::unix::fs::chown(sb.jail.join("deploy.yaml"), Some(uid), Some(uid)).unwrap();
    }
    let s = session_with(&sb, "/usr/bin:/bin", uid).await;
    for c in ["cp notes.txt deploy.yaml", "cp notes.txt ci/deep/x.yaml"] {
        let r = s.run_expecting(c, "POLICY_DENIED").await;
        assert!(reason_of(&r).contains("confirm_paths"), "{c}: {r}");
    }
    let out = python(&s, "try:\n    open('deploy.yaml', 'w').write('replicas: 100\\n'); print('wrote')\nexcept OSError as e:\n    print('refused', e.errno)").await;
    assert!(out.starts_with("refused"), "{out}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("deploy.yaml")).unwrap(),
        "replicas: 1\n"
    );
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert!(
        d["detail"]["protected_paths"]["confirm_paths"]
            .as_str()
            .unwrap()
            .contains("commands never write a confirm path"),
        "{d}"
    );
}

/// Issue 49: the audit trail inside a profile cache (a write path of commands) is refused at
/// load, by `policy check` as by the server, naming the cache.
#[tokio::test(flavor = "multi_thread")]
async fn the_trail_may_not_lie_in_a_profile_cache() {
    let sb = python_sandbox("required", "");
    with_profile(&sb, "python");
    let s = session_with(&sb, &std::env::var("PATH").unwrap_or_default(), None).await;
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    let cache = d["detail"]["write_paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .find(|p| p.contains("/cache/"))
        .unwrap_or_else(|| panic!("a profile cache among the write paths: {d}"))
        .to_owned();
    sb.edit_policy(
        "audit_log = \"audit.jsonl\"",
        &format!("audit_log = \"{cache}/audit.jsonl\""),
    );
    let out = std::process::Command::new(super::support::BIN)
        .args(["policy", "check", "--config"])
        .arg(&sb.policy)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("lets commands write the audit_log"), "{err}");
}

/// Issue 50.8: the per-jail profile caches of jails that are gone (a deleted project, each
/// test's temporary jail) are removed at the next server start, instead of piling up in the
/// server user's home; a jail that still exists keeps its caches (the control).
#[tokio::test(flavor = "multi_thread")]
async fn the_caches_of_a_jail_that_is_gone_are_removed_at_the_next_start() {
    let caches = tempfile::tempdir().unwrap();
    let cache_dir = std::fs::canonicalize(caches.path()).unwrap();
    let with_caches = |sb: &Sandbox| {
        super::builders::in_terminal_table(
            sb,
            &format!(
                "profiles = [\"python\"]\ncache_dir = \"{}\"",
                cache_dir.display()
            ),
        );
    };
    let mine = |jail: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(cache_dir.join("jails"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|d| {
                std::fs::read(d.join("jail")).ok().as_deref()
                    == Some(jail.as_os_str().as_encoded_bytes())
            })
            .collect()
    };
    let (gone, kept, next) = (Sandbox::new(""), Sandbox::new(""), Sandbox::new(""));
    for sb in [&gone, &kept] {
        with_caches(sb);
        drop(sb.session().await);
    }
    let (gone_jail, kept_jail) = (
        std::fs::canonicalize(&gone.jail).unwrap(),
        std::fs::canonicalize(&kept.jail).unwrap(),
    );
    let gone_cache = mine(&gone_jail);
    assert_eq!(gone_cache.len(), 1, "each jail's cache names its jail");
    assert_eq!(mine(&kept_jail).len(), 1);
    std::fs::remove_dir_all(&gone.jail).unwrap();

    with_caches(&next);
    let s = next.session().await;
    assert!(
        !gone_cache[0].exists(),
        "{} stayed",
        gone_cache[0].display()
    );
    assert_eq!(
        mine(&kept_jail).len(),
        1,
        "a jail that exists keeps its caches"
    );
    assert!(
        eventually(5, || s
            .stderr()
            .contains("removed the profile caches of a jail that is gone"))
        .await,
        "{}",
        s.stderr()
    );
}
