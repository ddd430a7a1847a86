//! Git's trust surface (issue 48): after any sequence of calls, git run by the operator in
//! the jail, in any directory beneath it, in any submodule or linked worktree, runs nothing
//! the model wrote. Each attack is first run on a copy of the same repository with no server
//! (the control: the operator's git runs it, the marker appears), then through a real MCP
//! session, as root and as uid 65534 in the private view, and the operator's git is run
//! afterwards on the host as the operator would, unconfined: no marker may appear.

use super::builders::stdout;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::builders::{git_env, in_terminal_table, python, python_sandbox, session_with};
use super::support::{
    OPERATOR_GIT, Sandbox, Session, assert_success, eventually, reason_of, server_uids,
};

/// Git as the operator runs it in `dir`: unconfined, with an empty global configuration,
/// trusting every directory's owner (the unprivileged runs own the jail as another uid, and
/// git's ownership check is not what this test is about). Returns stdout and stderr.
fn operator_git(home: &Path, dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .envs(OPERATOR_GIT)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The operator's repository: one commit, a linked worktree `wt` (made by the operator),
/// `core.hooksPath = .githooks` (husky's way), and a local bare remote outside the jail.
fn operator_repo(home: &Path, jail: &Path) {
    let g = |args: &[&str]| operator_git(home, jail, args);
    g(&["init", "-q", "-b", "main"]);
    std::fs::write(jail.join("README"), "hello\n").unwrap();
    g(&["add", "-A"]);
    g(&["commit", "-qm", "first"]);
    g(&["worktree", "add", "-q", "wt", "-b", "side"]);
    g(&["config", "core.hooksPath", ".githooks"]);
    std::fs::create_dir(jail.join(".githooks")).unwrap();
    std::fs::write(jail.join(".githooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(
        jail.join(".githooks/pre-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
}

/// What the model's commands make first (the model's own repositories), in the jail.
const SETUP: &[&str] = &[
    "git init -q sub",
    "git -C sub commit -q --allow-empty -m s",
    "git init -q sub2",
    "git -C sub2 commit -q --allow-empty -m s",
    "git init -q --bare pushme.git",
];

/// What the model does, as a python program (an interpreter: only the kernel and the sweep
/// stand in its way). `MARKERS` is the marker directory, outside the jail; each vector
/// touches its own marker when the operator's git runs it.
const ATTACK: &str = r##"
import os, shutil
M = "MARKERS"
G = "." + "git"  # spelled so: the argument check reads a script's words as paths
def put(path, text, mode=0o755, append=False):
    d = os.path.dirname(path)
    try:
        if d: os.makedirs(d, exist_ok=True)
        open(path, "a" if append else "w").write(text); os.chmod(path, mode)
        print("wrote", path)
    except OSError as e:
        print("refused", path, e.errno)
def hook(name): return "#!/bin/sh\ntouch %s/%s\n" % (M, name)
def fsmonitor(name): return "[core]\n\tfsmonitor = touch %s/%s; false\n" % (M, name)
# 1. the sweep gives up: every aside name taken, then a commondir into the model's own dir.
for n in range(1, 1000):
    put(G + "/commondir.refused-%d" % n, "x", 0o644)
for own, marker in (("own", "commondir"), ("own2", "worktree")):
    for d in ("objects", "refs"):
        os.makedirs("%s/%s" % (own, d), exist_ok=True)
    put(own + "/HEAD", "ref: refs/heads/main\n", 0o644)
    put(own + "/config", fsmonitor(marker), 0o644)
put("own/hooks/pre-commit", hook("commondir-hook"))
put(G + "/commondir", "../own\n", 0o644)
# 2. a nested repository the model made (the model's own git records it as a gitlink).
put("sub/" + G + "/config", fsmonitor("nested"), 0o644, append=True)
put("sub/" + G + "/hooks/post-checkout", hook("nested-hook"))
# 2b. an absorbed submodule: sub2's git directory moved under .git/modules.
os.makedirs(G + "/modules", exist_ok=True)
shutil.move("sub2/" + G, G + "/modules/sub2")  # copies across the view's bind mounts
put("sub2/" + G, "gitdir: ../" + G + "/modules/sub2\n", 0o644)
put(G + "/modules/sub2/config", "[core]\n\tworktree = ../../../sub2\n" + fsmonitor("module").split("\n", 1)[1], 0o644, append=True)
# 4. the operator's linked worktree: its entry points git at the model's own dir.
put(G + "/worktrees/wt/commondir", "../../../own2\n", 0o644)
put(G + "/worktrees/wt/config.worktree", fsmonitor("worktree-config"), 0o644)
# the operator's hooksPath, inside the work tree.
put(".githooks/pre-commit", hook("hookspath"))
# a bare repository the model made: the operator pushes to it.
put("pushme.git/hooks/pre-receive", hook("bare-hook"))
"##;

/// The vectors the control proves run as the operator.
const MARKERS: &[&str] = &[
    "commondir",
    "commondir-hook",
    "nested",
    "module",
    "worktree",
    "hookspath",
    "bare-hook",
];

/// What the operator does afterwards, everywhere in the jail.
fn operator_day(home: &Path, jail: &Path, remote_of: &Path) {
    operator_git(home, jail, &["status"]);
    operator_git(home, jail, &["diff"]);
    operator_git(home, jail, &["commit", "-q", "--allow-empty", "-m", "op"]);
    operator_git(home, &jail.join("sub"), &["status"]);
    operator_git(home, &jail.join("sub2"), &["status"]);
    operator_git(home, &jail.join("wt"), &["status"]);
    operator_git(
        home,
        &jail.join("wt"),
        &["commit", "-q", "--allow-empty", "-m", "op"],
    );
    // With the commondir gone, the operator's own configuration (its hooksPath) is back.
    let _ = std::fs::remove_file(jail.join(".git/commondir"));
    operator_git(
        home,
        jail,
        &["commit", "-q", "--allow-empty", "-m", "op again"],
    );
    operator_git(
        home,
        jail,
        &["push", "-q", remote_of.to_str().unwrap(), "main:pushed"],
    );
}

fn fired(markers: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(markers)
        .map(|l| {
            l.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The control: the same attack with no server, straight on the host. The operator's git
/// runs every vector; without this, a missing marker would prove nothing.
#[test]
fn control_every_vector_runs_as_the_operator_without_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (home, jail, markers) = (
        dir.path().join("home"),
        dir.path().join("jail"),
        dir.path().join("markers"),
    );
    for d in [&home, &jail, &markers] {
        std::fs::create_dir_all(d).unwrap();
    }
    operator_repo(&home, &jail);
    for c in SETUP {
        let args: Vec<&str> = c.split(' ').skip(1).collect();
        operator_git(&home, &jail, &args);
    }
    let script = ATTACK.replace("MARKERS", markers.to_str().unwrap());
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .current_dir(&jail)
        .output()
        .unwrap();
    assert_success(&out);
    operator_git(&home, &jail, &["add", "sub", "sub2"]);
    operator_day(&home, &jail, &jail.join("pushme.git"));
    let fired = fired(&markers);
    for m in MARKERS {
        assert!(
            fired.contains(&(*m).to_owned()),
            "{m} did not fire unconfined: {fired:?}"
        );
    }
}

/// Issue 48, items 1, 2, 4 and the hooksPath, bare and in-progress classes: nothing the
/// model plants fires, as root and as an unprivileged server, and git keeps working for the
/// model (init, add, commit in its own repository; commit in the operator's).
#[tokio::test(flavor = "multi_thread")]
async fn git_run_by_the_operator_runs_nothing_the_model_wrote() {
    for &uid in server_uids() {
        let what = format!("uid {uid:?}");
        let (sb, home) = operator_sandbox(uid);
        let markers = sb.base().join("markers");
        std::fs::create_dir_all(&markers).unwrap();
        std::fs::set_permissions(
            &markers,
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        for c in SETUP {
            let r = s.run(c).await;
            assert_eq!(r["detail"]["exit_code"], 0, "{what}: {c}: {r}");
        }
        let out = python(&s, &ATTACK.replace("MARKERS", markers.to_str().unwrap())).await;
        for held in [".git/worktrees/wt/commondir", ".githooks/pre-commit"] {
            assert!(
                out.contains(&format!("refused {held}")),
                "{what}: {held} is held read-only: {out}"
            );
        }
        assert!(
            !sb.jail.join(".git/commondir").exists(),
            "{what}: the sweep did not give up"
        );
        assert!(
            !sb.jail.join(".git/worktrees/wt/config.worktree").exists(),
            "{what}"
        );
        let r = s.run("git add sub sub2").await;
        assert_eq!(r["detail"]["exit_code"], 0, "{what}: {r}");
        // The model's own repository keeps working for the model.
        for c in [
            "git -C sub commit -q --allow-empty -m mine",
            "git -C sub log --oneline",
            "git commit -q --allow-empty -m agent",
        ] {
            let r = s.run(c).await;
            assert_eq!(r["detail"]["exit_code"], 0, "{what}: {c}: {r}");
        }
        // File tools: no write into any git directory, at any depth.
        for path in [
            "sub/.git/config",
            ".git/modules/m/config",
            "deep/.git/hooks/x",
            ".git/worktrees/wt/gitdir",
        ] {
            let r = s
                .call("write_file", json!({"path": path, "content": "[core]\n"}))
                .await;
            assert_eq!(r["code"], "POLICY_DENIED", "{what}: {path}: {r}");
        }
        operator_day(&home, &sb.jail, &sb.jail.join("pushme.git"));
        assert_eq!(fired(&markers), Vec::<String>::new(), "{what}");
        // The model's settings are outside the jail, and the trail names each change.
        let sub_config = std::fs::read_to_string(sb.jail.join("sub/.git/config")).unwrap();
        assert!(!sub_config.contains("fsmonitor"), "{what}: {sub_config}");
        let records = sb.audit_records();
        let rewritten = records.iter().any(|r| {
            r["kind"] == "protected"
                && r["event"] == "rewritten"
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("sub/.git/config"))
        });
        assert!(rewritten, "{what}: {records:?}");
        let area = held_area(&sb);
        assert!(
            area.join("quarantine").read_dir().unwrap().count() > 0,
            "{what}"
        );
        end(s, &sb).await;
        operator_day(&home, &sb.jail, &sb.jail.join("pushme.git"));
        assert_eq!(
            fired(&markers),
            Vec::<String>::new(),
            "{what}: after the server's exit"
        );
    }
}

/// Issue 48, item 3: a process session writes after the last call; its end, and the
/// server's exit, sweep. Then a server killed mid-session leaves a run marked unclean, and
/// the next start adopts nothing that appeared.
#[tokio::test(flavor = "multi_thread")]
async fn what_a_session_writes_after_the_last_call_is_swept_at_its_end_and_at_exit() {
    for &uid in server_uids() {
        let what = format!("uid {uid:?}");
        let (sb, _home) = operator_sandbox(uid);
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let late = "import time, os\ntime.sleep(1.5)\nos.makedirs('late/.git/hooks', exist_ok=True)\nfor d in ('objects', 'refs'): os.makedirs('late/.git/' + d, exist_ok=True)\nopen('late/.git/HEAD', 'w').write('ref: refs/heads/main\\n')\nopen('late/.git/config', 'w').write('[core]\\n\\tfsmonitor = touch /tmp/late\\n')\nopen('.git/commondir', 'w').write('../late/.git\\n')\nprint('planted', flush=True)\ntime.sleep(30)\n";
        let r = s
            .call("start_process", json!({"command": ["python3", "-c", late]}))
            .await;
        assert_eq!(r["code"], "OK", "{what}: {r}");
        assert!(
            eventually(10, || sb.jail.join(".git/commondir").exists()).await,
            "{what}: the session did not plant"
        );
        // The client goes: the session is stopped, and the exit sweep takes what it planted.
        end(s, &sb).await;
        assert!(!sb.jail.join(".git/commondir").exists(), "{what}");
        let config = std::fs::read_to_string(sb.jail.join("late/.git/config")).unwrap();
        assert!(!config.contains("fsmonitor"), "{what}: {config}");
        // A killed server runs no exit sweep. What appears before the next start (a writer
        // that outlived it) is not taken for the operator's: the run did not end cleanly.
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        assert_eq!(s.run("echo hi").await["code"], "OK");
        kill_server(&sb);
        drop(s);
        let later = sb.jail.join("later/.git");
        for d in ["objects", "refs"] {
            std::fs::create_dir_all(later.join(d)).unwrap();
        }
        std::fs::write(later.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            later.join("config"),
            "[core]\n\tfsmonitor = touch /tmp/later\n",
        )
        .unwrap();
        if let Some(uid) = uid {
            chown(&sb.jail.join("later"), uid);
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let r = s.run("echo hi").await;
        assert_eq!(r["code"], "OK", "{what}: {r}");
        let config = std::fs::read_to_string(later.join("config")).unwrap();
        assert!(
            !config.contains("fsmonitor"),
            "{what}: not adopted after an unclean run: {config}"
        );
        end(s, &sb).await;
    }
}

/// Issue 48, item 1: a sweep that cannot move what must go refuses every later call with
/// the reason, and the next sweep that succeeds lifts it.
#[tokio::test(flavor = "multi_thread")]
async fn a_sweep_that_cannot_finish_refuses_every_later_call() {
    let (sb, _home) = operator_sandbox(None);
    let s = session_with(&sb, "/usr/bin:/bin", None).await;
    assert_eq!(s.run("echo ok").await["code"], "OK");
    // The server's place is made unwritable (as a full disk or a wrong owner would).
    let quarantine = held_area(&sb).join("quarantine");
    assert!(
        !quarantine.exists(),
        "nothing was moved yet, so nothing was made"
    );
    std::fs::write(&quarantine, "not a directory").unwrap();
    let r = s.py("open('.git/commondir','w').write('x')").await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = s.run("echo next").await;
    assert_eq!(r["code"], "SANDBOX_UNAVAILABLE", "{r}");
    assert!(reason_of(&r).contains("commondir"), "{r}");
    let breach = sb.has_record(|r| r["kind"] == "protected" && r["event"] == "breach");
    assert!(breach);
    std::fs::remove_file(&quarantine).unwrap();
    let r = s.run("echo again").await;
    assert_eq!(
        r["code"], "OK",
        "the next sweep that finishes lifts it: {r}"
    );
    assert!(!sb.jail.join(".git/commondir").exists());
}

/// Issue 48, "no litter": a server that starts and ends leaves the user's tree as it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ran_leaves_no_litter() {
    let sb = python_sandbox("required", &git_env("Agent", "agent@example.com"));
    let home = sb.base().join("home");
    std::fs::create_dir_all(&home).unwrap();
    operator_repo(&home, &sb.jail);
    let before = tree(&sb.jail);
    let exclude = std::fs::read_to_string(sb.jail.join(".git/info/exclude")).unwrap_or_default();
    let s = sb.session().await;
    assert_eq!(s.run("echo hi").await["code"], "OK");
    assert!(
        sb.jail.join(".mcp.json").exists(),
        "held while the server runs"
    );
    end(s, &sb).await;
    assert_eq!(tree(&sb.jail), before);
    assert_eq!(
        std::fs::read_to_string(sb.jail.join(".git/info/exclude")).unwrap_or_default(),
        exclude
    );
}

fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() && !p.ends_with("objects") && !p.ends_with("logs") {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A private-view sandbox whose jail is the operator's repository, python3, echo and git
/// allowed, given to `uid` when one is named; and the operator's HOME.
fn operator_sandbox(uid: Option<u32>) -> (Sandbox, PathBuf) {
    let sb = python_sandbox("required", &git_env("Agent", "agent@example.com"));
    let home = sb.base().join("home");
    std::fs::create_dir_all(&home).unwrap();
    operator_repo(&home, &sb.jail);
    allow(&sb, &["python3", "echo", "git"]);
    if let Some(uid) = uid {
        sb.give_to(uid);
        chown(&sb.jail, uid);
    }
    (sb, home)
}

fn allow(sb: &Sandbox, commands: &[&str]) {
    let list: Vec<String> = commands.iter().map(|c| format!("\"{c}\"")).collect();
    sb.edit_policy(
        "commands = [\"python3\", \"echo\"]",
        &format!("commands = [{}]", list.join(", ")),
    );
    in_terminal_table(sb, "");
}

fn chown(path: &Path, uid: u32) {
    let st = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

fn held_area(sb: &Sandbox) -> PathBuf {
    sb.base().join("audit.jsonl.held")
}

/// Ends the session as a client does (stdin closed) and waits for the server's exit sweep.
async fn end(mut s: Session, sb: &Sandbox) {
    let _ = s.client.close().await;
    let state = held_area(sb).join("state.json");
    let clean = eventually(15, || {
        std::fs::read_to_string(&state)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["clean"] == true)
    })
    .await;
    assert!(clean, "the server did not end with its exit sweep");
}

/// SIGKILLs the server of `sb` (found by its policy path on its command line).
fn kill_server(sb: &Sandbox) {
    for pid in super::support::live_processes_with(sb.policy.to_str().unwrap()) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// Issue 48, "keep everyday git whole": under the git profile, in the operator's repository,
/// the model adds a submodule from a local repository (`git submodule` is a shell script:
/// the profile gives it what it starts), updates it, works in the operator's linked worktree,
/// and the refused `.git/config` write (`git remote add`) says why and what to do.
#[tokio::test(flavor = "multi_thread")]
async fn everyday_git_keeps_working_under_the_git_profile() {
    // A submodule from a local path needs the file transport, which git allows submodules
    // only when told (the operator's choice, in the environment it gives commands).
    let env = git_env("Agent", "agent@example.com").replace(
        "GIT_AUTHOR_NAME",
        "GIT_ALLOW_PROTOCOL = \"file\", GIT_AUTHOR_NAME",
    );
    let sb = python_sandbox("required", &env);
    let home = sb.base().join("home");
    std::fs::create_dir_all(&home).unwrap();
    operator_repo(&home, &sb.jail);
    // A repository of the operator's, in the jail, to take as a submodule.
    let lib = sb.jail.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    operator_git(&home, &lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "lib\n").unwrap();
    operator_git(&home, &lib, &["add", "-A"]);
    operator_git(&home, &lib, &["commit", "-qm", "lib"]);
    allow(&sb, &["python3", "echo"]);
    in_terminal_table(
        &sb,
        &format!(
            "profiles = [\"git\"]\ncache_dir = \"{}/cache\"",
            sb.base().display()
        ),
    );
    let s = session_with(&sb, &std::env::var("PATH").unwrap_or_default(), None).await;
    let url = format!("file://{}", lib.display());
    for c in [
        format!("git submodule add {url} vendor/lib"),
        "git submodule status".to_owned(),
        "git commit -q -m add-lib".to_owned(),
        "git submodule update".to_owned(),
        "git -C wt status --short".to_owned(),
        "git -C wt commit -q --allow-empty -m in-the-worktree".to_owned(),
        "git worktree list".to_owned(),
    ] {
        let r = s.run(&c).await;
        assert_eq!(
            (r["code"].as_str(), r["detail"]["exit_code"].as_i64()),
            (Some("OK"), Some(0)),
            "{c}: {r}"
        );
    }
    // What writes the operator's `.git/config` fails, and says why and what to do.
    for c in [
        "git remote add origin https://example.com/r.git",
        "git submodule update --init",
    ] {
        let r = s.run(c).await;
        assert_ne!(r["detail"]["exit_code"], 0, "{c}: {r}");
        assert!(
            reason_of(&r).contains("unprotected_paths"),
            "{c}: the refusal says why and what to do: {r}"
        );
    }
}

/// What the model leaves of a rebase in progress (its todo list, a merge strategy), written
/// by hand in the operator's repository.
const LEFT_IN_PROGRESS: &str = r##"
import os, subprocess
G = "." + "git"
head = open(G + "/refs/heads/main").read().strip()
os.makedirs(G + "/rebase-merge", exist_ok=True)
for name, body in (("head-name", "refs/heads/main\n"), ("onto", head + "\n"),
                   ("orig-head", head + "\n"), ("interactive", ""), ("done", ""),
                   ("git-rebase-todo", "exec touch MARKER\n"), ("strategy", "evil/x\n")):
    open(G + "/rebase-merge/" + name, "w").write(body)
print("left")
"##;

/// Issue 48, the class "a rebase's todo list left in progress": `git rebase --continue` by
/// the operator runs the todo's `exec` lines and a merge strategy by name (a name with `/`
/// runs a path in the work tree). The control shows the operator's git runs the model's
/// line; through the server, the sweep takes the line and the strategy out first.
#[tokio::test(flavor = "multi_thread")]
async fn an_operation_left_in_progress_runs_nothing_the_model_wrote() {
    for confined in [false, true] {
        let (sb, home) = operator_sandbox(None);
        let marker = sb.base().join("rebase-marker");
        let script = LEFT_IN_PROGRESS.replace("MARKER", marker.to_str().unwrap());
        if confined {
            let s = session_with(&sb, "/usr/bin:/bin", None).await;
            assert_eq!(
                s.run("git checkout -q --detach").await["detail"]["exit_code"],
                0
            );
            assert_eq!(python(&s, &script).await, "left\n");
            end(s, &sb).await;
        } else {
            operator_git(&home, &sb.jail, &["checkout", "-q", "--detach"]);
            let out = std::process::Command::new("python3")
                .args(["-c", &script])
                .current_dir(&sb.jail)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
        if confined {
            let todo =
                std::fs::read_to_string(sb.jail.join(".git/rebase-merge/git-rebase-todo")).unwrap();
            assert!(!todo.contains("exec"), "{todo}");
            let records = sb.audit_records();
            assert!(
                records.iter().any(|r| r["kind"] == "protected"
                    && r["path"]
                        .as_str()
                        .is_some_and(|p| p.ends_with("rebase-merge/strategy"))),
                "{records:?}"
            );
        }
        let said = operator_git(&home, &sb.jail, &["rebase", "--continue"]);
        assert_eq!(marker.exists(), !confined, "confined {confined}: {said}");
    }
}

/// Round 3 (issue 27), item 6: a file the server reads in the jail cannot stall it: a worktree's `.git` file
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
    let r = s.run_in("wt", "git status").await;
    // Without the fix the server's open waits out the lease (45 s on this kernel).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{r}"
    );
    assert_ne!(r["code"], "OK", "{r}");
    assert!(reason_of(&r).contains("lease"), "{r}");
    let r = s.run("echo still").await;
    assert_eq!(stdout(&r), "still\n", "{r}");
    drop(held);
}
