//! apply_plan told to stop between two moves, on a real workspace with a real journal: the
//! moves made stand as one undoable action, every file is in exactly one place, undo
//! restores the tree, and the audit outcome says the call was cancelled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use safe_mcp_core::audit::Caller;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use safe_mcp_core::config::{ProcessEnv, Section};
use safe_mcp_organizer::{FilesService, Watch};

fn files_under(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut queue = vec![root.to_path_buf()];
    while let Some(dir) = queue.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                queue.push(p);
            } else {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out
}

fn workspace(n: usize) -> (tempfile::TempDir, std::path::PathBuf, FilesService) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("inbox");
    std::fs::create_dir(&root).unwrap();
    let old = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..n {
        let f = root.join(format!("doc{i:03}.pdf"));
        std::fs::write(&f, format!("pdf {i}")).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        "audit_log = \"audit.jsonl\"\n[files]\nworkspace_root = \"inbox\"\njournal = \"journal.jsonl\"\n",
    )
    .unwrap();
    let policy =
        safe_mcp_core::load::load_policy(Some(&policy), &ProcessEnv, Section::Files).unwrap();
    let (service, _) = FilesService::start(&policy).unwrap();
    (dir, root, service)
}

fn plan_id(service: &FilesService) -> String {
    let plan = service.plan_organize(&Caller::default()).to_value();
    plan["detail"]["plan_id"].as_str().unwrap().to_owned()
}

#[test]
fn a_cancelled_apply_keeps_what_it_moved_as_one_undoable_action() {
    let (dir, root, service) = workspace(10);
    let before = files_under(&root);
    let id = plan_id(&service);
    let moved = AtomicUsize::new(0);
    let progress = std::sync::Mutex::new(Vec::new());
    let watch = Watch {
        stop: &|| moved.load(Ordering::Acquire) >= 4,
        moved: &|done, total| {
            moved.store(done, Ordering::Release);
            progress.lock().unwrap().push((done, total));
        },
    };
    let r = service
        .apply_plan_watched(&id, &watch, &Caller::default())
        .to_value();
    assert_eq!(r["code"], "OPERATION_FAILED", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("after 4 of 10 moves"),
        "{r}"
    );
    assert_eq!(
        *progress.lock().unwrap(),
        (1..=4).map(|d| (d, 10)).collect::<Vec<_>>()
    );
    // Every file exactly once: four moved, six where they were.
    let now = files_under(&root);
    assert_eq!(now.len(), 10);
    assert_eq!(
        now.iter().filter(|f| f.starts_with("Documents/")).count(),
        4,
        "{now:?}"
    );
    // The audit outcome says so.
    let trail = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let outcome = trail
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|v| v["tool"] == "apply_plan" && v["kind"] == "outcome")
        .unwrap();
    assert_eq!(outcome["cancelled"], true, "{outcome}");
    // Undo restores the tree as it was.
    let u = service.undo_last_action(&Caller::default()).to_value();
    assert_eq!(u["code"], "OK", "{u}");
    assert_eq!(files_under(&root), before);
}

#[test]
fn a_cancel_before_the_first_move_moves_nothing() {
    let (_dir, root, service) = workspace(3);
    let before = files_under(&root);
    let id = plan_id(&service);
    let watch = Watch {
        stop: &|| true,
        moved: &|_, _| {},
    };
    let r = service
        .apply_plan_watched(&id, &watch, &Caller::default())
        .to_value();
    assert!(
        r["reason"].as_str().unwrap().contains("nothing moved"),
        "{r}"
    );
    assert_eq!(files_under(&root), before);
    let u = service.undo_last_action(&Caller::default()).to_value();
    assert_ne!(u["code"], "OK", "there is nothing to undo: {u}");
}
