//! No loader route (issue 49, item 2): the dynamic loader maps the program it is given with
//! `mmap`, which Landlock's execute right does not check, so `ld.so /usr/bin/rm f` ran a
//! denylisted program from an interpreter. In the private view the program trees are
//! `noexec` but for what the allowlist grants every stage, and what only some stages may run
//! (a ruled program, a tool's helpers, git's exec-path) is executable in their own mount
//! namespace alone: the same calls fail there. The host view keeps the ceiling, and is the
//! control: there the route still works.

use super::builders::{session_with, stderr, stdout};
use super::support::{Sandbox, server_uids};

/// What python does: hand programs to the loader, then say of each whether it ran: `rm`
/// (not allowlisted), `git` (allowlisted with argument rules, so only its own stages may run
/// it), that git's own copy in its exec-path (a library directory) and `gzip` (tar's helper,
/// tar's stages alone).
const THROUGH_THE_LOADER: &str = r#"
import glob, os, subprocess, sys
open("victim", "w").write("x")
loader = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*"))[0]
r = subprocess.run([loader, "/usr/bin/rm", "victim"], capture_output=True, text=True)
print("rm", "ran" if not os.path.exists("victim") else "refused", r.returncode, r.stderr.strip()[:200])
git, exec_path = "GIT", "EXEC_PATH"
for program, args in [(git, ["version"]), (exec_path + "/git", ["version"]),
                      ("/usr/bin/gzip", ["--version"])]:
    r = subprocess.run([loader, program, *args], capture_output=True, text=True)
    print(program, "ran" if r.returncode == 0 else "refused", r.returncode, r.stderr.strip()[:200])
"#;

fn sandbox(namespaces: &str) -> Sandbox {
    Sandbox::builder()
        .allow(&["python3", "echo", "git", "tar"])
        .limits("timeout_seconds = 30")
        .extra("[[terminal.rules]]\ncommand = \"git\"\ndeny_args = [\"push\"]")
        .namespaces(namespaces)
        .build()
}

/// Each line the script printed, by its first word.
fn verdicts(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_loader_cannot_run_a_program_the_allowlist_refuses() {
    for &uid in server_uids() {
        let sb = sandbox("required");
        if let Some(uid) = uid {
            sb.give_to(uid);
        }
        let s = session_with(&sb, "/usr/bin:/bin", uid).await;
        let (out, r) = through_the_loader(&s).await;
        let got = verdicts(&out);
        assert_eq!(got.len(), 4, "uid {uid:?}: {r}");
        for (program, verdict) in &got {
            assert_eq!(verdict, "refused", "uid {uid:?}: {program}: {r}");
        }
        assert!(sb.jail.join("victim").exists(), "uid {uid:?}");
        // Allowed programs still run, and each group's own in its own stages: git (with its
        // exec-path), tar with gzip.
        let r = s.run("echo still-here").await;
        assert_eq!(r["detail"]["stdout"], "still-here\n", "{r}");
        for command in [
            "git init -q repo",
            "git -C repo status",
            "tar czf a.tgz repo",
            "tar tzf a.tgz",
        ] {
            let r = s.run(command).await;
            assert_eq!(r["detail"]["exit_code"], 0, "uid {uid:?}: {command}: {r}");
        }
        // A nested git reaches the server, which judges it: its rule holds.
        let r = s.py("import subprocess; print(subprocess.run(['git', '-C', 'repo', 'push']).returncode)").await;
        assert!(stderr(&r).contains("denied"), "{r}");
    }
    // The control: without the view the same call runs rm (the host view's ceiling).
    let sb = sandbox("off");
    let s = session_with(&sb, "/usr/bin:/bin", None).await;
    let (out, r) = through_the_loader(&s).await;
    let got = verdicts(&out);
    assert_eq!(got.len(), 4, "the control: {r}");
    for (program, verdict) in &got {
        assert_eq!(verdict, "ran", "the control: {program}: {r}");
    }
}

/// What python printed, and the whole result. The git is the one the policy's PATH finds
/// (as explain names it), and its exec-path the one that git names.
async fn through_the_loader(s: &super::support::Session) -> (String, serde_json::Value) {
    let explained = s.explain("git version").await;
    let git = explained["detail"]["stages"][0]["program"]
        .as_str()
        .unwrap_or_else(|| panic!("{explained}"))
        .to_owned();
    let asked = std::process::Command::new(&git)
        .arg("--exec-path")
        .output()
        .unwrap();
    let exec_path = String::from_utf8_lossy(&asked.stdout).trim().to_owned();
    let r = s
        .py(THROUGH_THE_LOADER
            .replace("GIT", &git)
            .replace("EXEC_PATH", &exec_path))
        .await;
    let out = stdout(&r).to_owned();
    (out, r)
}
