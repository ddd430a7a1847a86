//! The files server over a real MCP session on a seeded workspace: plain files, an
//! installer, a dotfile, a symlink pointing out, a dangling symlink, a FIFO, a hardlink and a
//! name with a newline.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::support::{Session, reason_of, root_or_skip, safe_mcp_on};

pub struct Workspace {
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub policy: PathBuf,
    pub audit: PathBuf,
}

/// Checks that `audit verify` accepts the workspace's trail.
fn assert_trail_verifies(ws: &Workspace) {
    let verify = safe_mcp_on(&["audit", "verify"], &ws.audit);
    let said = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{said}");
}

/// `apply_plan` of the plan that `plan` (a `plan_organize` result) made.
async fn apply(s: &Session, plan: &Value) -> Value {
    s.call("apply_plan", json!({"plan_id": plan["detail"]["plan_id"]}))
        .await
}

pub fn backdate(path: &Path) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    if let Ok(f) = std::fs::File::options().write(true).open(path) {
        let _ = f.set_modified(old);
    }
}

impl Workspace {
    pub fn new(seed: bool) -> Workspace {
        let (dir, base) = super::support::temp_base("safe-mcp-files-");
        let root = base.join("inbox");
        std::fs::create_dir(&root).unwrap();
        if seed {
            for (name, body) in [
                ("report.pdf", "%PDF report"),
                ("photo.jpg", "JPEG photo"),
                ("notes.txt", "notes"),
                ("data.csv", "a,b\n1,2\n"),
                ("setup.exe", "MZ installer"),
                (".bashrc", "alias ll='ls -l'"),
                ("hard.txt", "hard linked"),
                ("new\nline.txt", "a newline in the name"),
                ("mystery.xyz", "no category"),
            ] {
                std::fs::write(root.join(name), body).unwrap();
                backdate(&root.join(name));
            }
            std::fs::hard_link(root.join("hard.txt"), base.join("hard-outside.txt")).unwrap();
            symlink("/etc/passwd", root.join("link-out.txt")).unwrap();
            symlink("/nonexistent/target.pdf", root.join("dangling.pdf")).unwrap();
            let fifo = std::process::Command::new("mkfifo")
                .arg(root.join("pipe.txt"))
                .status()
                .unwrap();
            assert!(fifo.success());
            std::fs::create_dir(root.join("Projects")).unwrap();
        }
        let policy = base.join("policy.toml");
        std::fs::write(
            &policy,
            "audit_log = \"audit.jsonl\"\n[files]\nworkspace_root = \"inbox\"\njournal = \"journal.jsonl\"\nmax_plan_moves = 5000\n",
        )
        .unwrap();
        Workspace {
            _dir: dir,
            root,
            policy,
            audit: base.join("audit.jsonl"),
        }
    }

    pub async fn session(&self) -> Session {
        Session::start_server("files", &self.policy, |_| {}, None).await
    }

    /// Every entry (recursively): kind, content hash or link target, inode.
    pub fn tree(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(&self.root, &self.root, &mut out);
        out
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let value = if meta.file_type().is_symlink() {
            format!("link:{}", std::fs::read_link(&path).unwrap().display())
        } else if meta.is_dir() {
            walk(root, &path, out);
            "dir".to_owned()
        } else if meta.is_file() {
            format!(
                "file:{}:{}",
                hex::encode(Sha256::digest(std::fs::read(&path).unwrap())),
                meta.ino()
            )
        } else {
            format!("special:{}", meta.ino())
        };
        out.insert(rel, value);
    }
}

fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["detail"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed"))
}

#[tokio::test(flavor = "multi_thread")]
async fn six_tools_and_what_list_files_says() {
    let ws = Workspace::new(true);
    let s = ws.session().await;
    let mut names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "apply_plan",
            "list_files",
            "move_file",
            "plan_organize",
            "redo_last_action",
            "undo_last_action"
        ]
    );
    let l = s.call("list_files", json!({})).await;
    assert_eq!(l["code"], "OK");
    assert_eq!(entry(&l, "report.pdf")["would_move"], true);
    assert_eq!(entry(&l, "report.pdf")["category"], "Documents");
    assert_eq!(
        entry(&l, "report.pdf")["destination"],
        "Documents/report.pdf"
    );
    let held = ("restraint", "NEEDS_EXPLICIT_REQUEST");
    let denied = ("protection", "POLICY_DENIED");
    for (name, (layer, code), rule) in [
        ("setup.exe", held, "installer"),
        (".bashrc", held, "dotfile"),
        ("Projects", held, "directory"),
        ("mystery.xyz", held, "uncategorized"),
        ("link-out.txt", denied, "default-deny"),
        ("dangling.pdf", denied, "default-deny"),
        ("pipe.txt", denied, "default-deny"),
        ("hard.txt", denied, "hardlink"),
        ("new\nline.txt", denied, "unsafe-name"),
    ] {
        let e = entry(&l, name);
        assert_eq!(e["would_move"], false, "{name}");
        assert_eq!(
            (
                e["skip"]["layer"].as_str(),
                e["skip"]["code"].as_str(),
                e["skip"]["rule"].as_str()
            ),
            (Some(layer), Some(code), Some(rule)),
            "{name}: {e}"
        );
    }
    let escape = s.call("list_files", json!({"subdir": "../"})).await;
    assert_eq!(escape["code"], "PATH_ESCAPE");
    let bad = s.call("list_files", json!({"subdir": 3})).await;
    assert_eq!(bad["code"], "INVALID_REQUEST");
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_changes_nothing_apply_moves_and_undo_redo_round_trip() {
    let ws = Workspace::new(true);
    let original = ws.tree();
    let s = ws.session().await;
    let plan = s.call("plan_organize", json!({})).await;
    assert_eq!(plan["code"], "OK", "{plan}");
    assert_eq!(
        ws.tree(),
        original,
        "a plan changes nothing, not even folders"
    );
    let mut moves: Vec<String> = plan["detail"]["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["dst"].as_str().unwrap().to_owned())
        .collect();
    moves.sort();
    assert_eq!(
        moves,
        [
            "Documents/notes.txt",
            "Documents/report.pdf",
            "Images/photo.jpg",
            "Spreadsheets/data.csv"
        ]
    );
    assert_eq!(plan["detail"]["move_count"], 4);
    assert!(plan["detail"]["skip_count"].as_u64().unwrap() >= 9);

    let id = plan["detail"]["plan_id"].as_str().unwrap().to_owned();
    let applied = s.call("apply_plan", json!({"plan_id": id})).await;
    assert_eq!(applied["code"], "OK", "{applied}");
    let after = ws.tree();
    assert_eq!(
        after["Documents/report.pdf"], original["report.pdf"],
        "same file, same inode"
    );
    assert!(!after.contains_key("report.pdf"));
    assert_eq!(
        s.call("apply_plan", json!({"plan_id": id})).await["code"],
        "INVALID_REQUEST",
        "single use"
    );

    assert_eq!(s.call("undo_last_action", json!({})).await["code"], "OK");
    assert_eq!(ws.tree(), original, "undo restores the exact tree");
    assert_eq!(s.call("redo_last_action", json!({})).await["code"], "OK");
    assert_eq!(ws.tree(), after, "redo re-applies");
    assert_eq!(s.call("undo_last_action", json!({})).await["code"], "OK");
    // New work clears redo.
    assert_eq!(
        s.move_file("notes.txt", "notes-old.txt").await["code"],
        "OK"
    );
    assert_eq!(
        s.call("redo_last_action", json!({})).await["code"],
        "INVALID_REQUEST"
    );
    assert_eq!(s.call("undo_last_action", json!({})).await["code"], "OK");
    assert_eq!(ws.tree(), original);
    assert_eq!(
        s.call("undo_last_action", json!({})).await["code"],
        "INVALID_REQUEST",
        "nothing left to undo"
    );

    let trail = std::fs::read_to_string(&ws.audit).unwrap();
    assert!(
        trail.contains("\"tool\":\"apply_plan\"")
            && trail.contains("\"tool\":\"undo_last_action\""),
        "files actions are audited"
    );
    let bin = super::support::BIN;
    let tail = std::process::Command::new(bin)
        .args(["audit", "tail"])
        .arg(&ws.audit)
        .output()
        .unwrap();
    let tail = String::from_utf8_lossy(&tail.stdout);
    assert!(
        tail.lines()
            .any(|l| l.contains("apply_plan") && l.contains("OK")),
        "{tail}"
    );
    assert_trail_verifies(&ws);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_changed_or_a_destination_created_after_planning_is_a_conflict() {
    let ws = Workspace::new(true);
    let s = ws.session().await;
    let plan = s.call("plan_organize", json!({})).await;
    std::fs::write(ws.root.join("notes.txt"), "changed after planning").unwrap();
    backdate(&ws.root.join("notes.txt"));
    let before = ws.tree();
    let r = apply(&s, &plan).await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    assert_eq!(ws.tree(), before, "nothing moved");

    let plan = s.call("plan_organize", json!({})).await;
    std::fs::create_dir(ws.root.join("Images")).unwrap();
    std::fs::write(ws.root.join("Images/photo.jpg"), "someone else's photo").unwrap();
    let before = ws.tree();
    let r = apply(&s, &plan).await;
    assert_eq!(r["code"], "CONFLICT", "{r}");
    assert_eq!(ws.tree(), before, "nothing moved, nothing overwritten");
}

#[tokio::test(flavor = "multi_thread")]
async fn move_file_applies_protection_only_and_never_overwrites() {
    let ws = Workspace::new(true);
    std::fs::create_dir_all(ws.root.join("repo/.git")).unwrap();
    std::fs::write(ws.root.join("repo/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let s = ws.session().await;
    let r = s.move_file("setup.exe", "Installers/setup.exe").await;
    assert_eq!(r["code"], "OK", "a named installer may move: {r}");
    assert!(ws.root.join("Installers/setup.exe").exists());
    for (src, dest, code) in [
        ("link-out.txt", "Documents/link.txt", "POLICY_DENIED"),
        ("pipe.txt", "x.txt", "POLICY_DENIED"),
        ("hard.txt", "Documents/hard.txt", "POLICY_DENIED"),
        ("new\nline.txt", "Documents/x.txt", "POLICY_DENIED"),
        ("report.pdf", "photo.jpg", "CONFLICT"),
        ("notes.txt", ".ssh/authorized_keys", "POLICY_DENIED"),
        ("repo/.git/HEAD", "HEAD", "POLICY_DENIED"),
        ("report.pdf", "../report.pdf", "PATH_ESCAPE"),
        ("report.pdf", "/etc/report.pdf", "PATH_ESCAPE"),
        ("missing.pdf", "a.pdf", "INVALID_REQUEST"),
        ("Projects", "Projects/inner", "INVALID_REQUEST"),
    ] {
        let r = s.move_file(src, dest).await;
        assert_eq!(r["code"], code, "{src} -> {dest}: {r}");
    }
    symlink("/tmp", ws.root.join("tmp-link")).unwrap();
    let r = s.move_file("report.pdf", "tmp-link/report.pdf").await;
    assert_eq!(r["code"], "PATH_ESCAPE", "through a symlinked folder: {r}");
    assert!(ws.root.join("report.pdf").exists());
}

/// SIGKILL the server at random points while it applies a plan of 1,000 files; after each
/// crash no file is lost or duplicated, and undo after a restart restores the original tree.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_point_of_apply_loses_nothing_and_undo_restores() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

    const FILES: usize = 1000;
    let trials = 21;
    let mut calibrated = Duration::from_millis(30);
    let mut outcomes = Vec::new();
    for trial in 0..trials {
        let ws = Workspace::new(false);
        for i in 0..FILES {
            let ext = [".pdf", ".jpg", ".txt", ".csv", ".mp3"][i % 5];
            let path = ws.root.join(format!("file-{i:04}{ext}"));
            std::fs::write(&path, format!("content of file {i}")).unwrap();
            backdate(&path);
        }
        let original = ws.tree();
        let contents = |tree: &BTreeMap<String, String>| {
            let mut c: Vec<String> = tree
                .values()
                .filter(|v| v.starts_with("file:"))
                .cloned()
                .collect();
            c.sort();
            c
        };

        let policy = ws.policy.clone();
        let command = tokio::process::Command::new(super::support::BIN).configure(|c| {
            c.arg("files").arg("--config").arg(&policy);
        });
        let transport = TokioChildProcess::new(command).unwrap();
        let pid = transport.id().unwrap();
        let client = ().serve(transport).await.unwrap();
        let plan = client
            .call_tool(CallToolRequestParams::new("plan_organize"))
            .await
            .unwrap();
        let plan_id = plan.structured_content.unwrap()["detail"]["plan_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let peer = client.peer().clone();
        let Value::Object(args) = json!({"plan_id": plan_id}) else {
            unreachable!()
        };
        let apply = tokio::spawn(async move {
            peer.call_tool(CallToolRequestParams::new("apply_plan").with_arguments(args))
                .await
        });
        // Trial 0 measures an uninterrupted apply (and kills the server after it); the other
        // trials spread their kills over that duration, so some land mid-apply on a slow
        // machine as on a fast one.
        let started = std::time::Instant::now();
        let apply = if trial == 0 {
            let _ = apply.await;
            calibrated = started.elapsed();
            None
        } else {
            tokio::time::sleep(calibrated.mul_f64(trial as f64 / trials as f64)).await;
            Some(apply)
        };
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        if let Some(apply) = apply {
            let _ = apply.await;
        }
        drop(client);

        let crashed = ws.tree();
        assert_eq!(
            contents(&crashed),
            contents(&original),
            "trial {trial}: a file was lost or duplicated"
        );
        let moved = crashed.keys().filter(|k| k.contains('/')).count();

        let s = ws.session().await;
        let undo = s.call("undo_last_action", json!({})).await;
        assert!(
            undo["code"] == "OK" || (moved == 0 && undo["code"] == "INVALID_REQUEST"),
            "trial {trial}: {undo}"
        );
        assert_eq!(
            ws.tree(),
            original,
            "trial {trial}: undo after the crash did not restore the tree"
        );
        outcomes.push(moved);
    }
    // The kills must have landed at different points, including mid-apply.
    assert!(
        outcomes.iter().any(|&m| m > 0 && m < FILES),
        "no kill landed mid-apply: {outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_move_across_filesystems_is_refused_never_copied() {
    if !root_or_skip("skipping: mounting a tmpfs inside the workspace needs root") {
        return;
    }
    let ws = Workspace::new(true);
    let mnt = ws.root.join("Elsewhere");
    std::fs::create_dir(&mnt).unwrap();
    assert!(
        std::process::Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    let s = ws.session().await;
    let r = s.move_file("report.pdf", "Elsewhere/report.pdf").await;
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&mnt)
        .status();
    assert_eq!(r["code"], "OPERATION_FAILED", "{r}");
    assert!(reason_of(&r).contains("cross filesystems"), "{r}");
    assert!(
        ws.root.join("report.pdf").exists(),
        "the source stays where it was"
    );
}

#[test]
fn the_files_server_refuses_a_journal_inside_the_workspace() {
    let ws = Workspace::new(false);
    let text = std::fs::read_to_string(&ws.policy)
        .unwrap()
        .replace("\"journal.jsonl\"", "\"inbox/journal.jsonl\"");
    std::fs::write(&ws.policy, text).unwrap();
    let out = std::process::Command::new(super::support::BIN)
        .args(["files", "--config"])
        .arg(&ws.policy)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.starts_with("fatal: ") && stderr.contains("files.journal"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn planning_in_a_loop_keeps_only_the_newest_plans() {
    let ws = Workspace::new(true);
    let s = ws.session().await;
    let first = s.call("plan_organize", json!({})).await;
    for _ in 0..20 {
        s.call("plan_organize", json!({})).await;
    }
    let r = apply(&s, &first).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "an old plan was dropped: {r}");
}

/// Every call of every tool leaves an attempt and an outcome record, refusals that happen
/// before anything is looked at included: an unknown plan id, a path that escapes, a
/// read-only call, arguments that do not parse.
#[tokio::test(flavor = "multi_thread")]
async fn every_refusal_is_audited_and_the_trail_still_verifies() {
    let ws = Workspace::new(true);
    let s = ws.session().await;
    let cases = [
        (
            "apply_plan",
            json!({"plan_id": "no-such-plan"}),
            "INVALID_REQUEST",
        ),
        (
            "move_file",
            json!({"src": "../outside.txt", "dest": "x.txt"}),
            "PATH_ESCAPE",
        ),
        (
            "move_file",
            json!({"src": "notes.txt", "dest": "/etc/notes.txt"}),
            "PATH_ESCAPE",
        ),
        // Read-only tools and calls whose arguments do not parse are recorded the same way.
        ("list_files", json!({"subdir": "../.."}), "PATH_ESCAPE"),
        ("apply_plan", json!({"plan": 1}), "INVALID_REQUEST"),
    ];
    for (tool, args, code) in &cases {
        let r = s.call(tool, args.clone()).await;
        assert_eq!(r["code"], *code, "{tool} {args}: {r}");
    }
    drop(s);

    let records: Vec<Value> = std::fs::read_to_string(&ws.audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape = super::support::record_shapes(&records);
    let pair = super::support::record_pair;
    let want: Vec<_> = cases
        .iter()
        .flat_map(|(tool, _, code)| pair(tool, code))
        .collect();
    assert_eq!(shape, want);
    for pair in records.chunks(2) {
        assert_eq!(pair[0]["call"], pair[1]["call"]);
        assert!(pair[0]["reason"].is_string(), "{}", pair[0]);
    }
    assert_eq!(records[2]["args"]["src"], "../outside.txt");
    assert_trail_verifies(&ws);
}

/// `move_file` may not make a tool's config file, take a name that hides or reorders text,
/// move a folder whole when something inside it could not move on its own, or nest without
/// end. What it may do still works.
#[tokio::test(flavor = "multi_thread")]
async fn move_file_protects_destinations_and_every_entry_of_a_folder() {
    let ws = Workspace::new(false);
    let root = &ws.root;
    std::fs::write(root.join("notes.txt"), "n").unwrap();
    std::fs::write(root.join("evil\u{202E}txt.exe"), "x").unwrap();
    std::fs::create_dir_all(root.join("proj/.ssh")).unwrap();
    std::fs::write(root.join("proj/.ssh/id_ed25519"), "key").unwrap();
    std::fs::create_dir_all(root.join("linked")).unwrap();
    std::fs::write(root.join("linked/a.txt"), "a").unwrap();
    std::fs::hard_link(root.join("linked/a.txt"), root.join("a-again.txt")).unwrap();
    std::fs::create_dir_all(root.join("plain/sub")).unwrap();
    std::fs::write(root.join("plain/sub/b.txt"), "b").unwrap();
    let before = ws.tree();
    let s = ws.session().await;
    for (src, dest, code, needle) in [
        ("notes.txt", ".gitconfig", "POLICY_DENIED", ".gitconfig"),
        (
            "notes.txt",
            "repo/.vscode/tasks.json",
            "POLICY_DENIED",
            ".vscode",
        ),
        ("notes.txt", "x/.envrc", "POLICY_DENIED", ".envrc"),
        ("evil\u{202E}txt.exe", "evil.txt", "POLICY_DENIED", "unsafe"),
        ("notes.txt", "n\u{2066}ote.txt", "POLICY_DENIED", "unsafe"),
        ("proj", "Archive/proj", "POLICY_DENIED", "proj/.ssh"),
        ("linked", "Archive/linked", "POLICY_DENIED", "linked/a.txt"),
        (
            "notes.txt",
            "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/notes.txt",
            "INVALID_REQUEST",
            "deep",
        ),
    ] {
        let r = s.move_file(src, dest).await;
        assert_eq!(r["code"], code, "{src} -> {dest}: {r}");
        let text = r.to_string();
        assert!(
            text.contains(needle) || r["detail"]["rule"].as_str().unwrap_or("").contains(needle),
            "{src} -> {dest}: {r}"
        );
    }
    assert_eq!(ws.tree(), before, "nothing moved");
    let r = s.move_file("plain", "Archive/plain").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(root.join("Archive/plain/sub/b.txt").exists());
}
