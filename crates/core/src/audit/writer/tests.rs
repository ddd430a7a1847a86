//! The trail's writer: chained, reopened, rotated, group-committed, torn tails sealed.

use super::*;
use crate::audit::verify::{Break, Report, verify};
use std::fs::OpenOptions;

/// A trail `name` in a fresh directory, kept as long as the directory.
fn fresh(name: &str) -> (tempfile::TempDir, PathBuf, AuditLog) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let log = AuditLog::open(&path, AuditOptions::closed());
    (dir, path, log)
}

/// The trail at `path`, verified without a key.
fn verified(path: &Path) -> Result<Report, Break> {
    verify(&[path.to_path_buf()], &Chain::new(None))
}

fn rec(n: u64) -> Map<String, Value> {
    Map::from_iter([("n".to_owned(), json!(n))])
}

#[test]
fn records_chain_and_continue_after_reopen() {
    let (_dir, path, log) = fresh("audit.jsonl");
    log.append_attempt(rec(1)).unwrap();
    log.append_outcome(rec(2)).unwrap();
    drop(log);
    let log = AuditLog::open(&path, AuditOptions::closed());
    assert_eq!(log.append_attempt(rec(3)).unwrap(), 3);
    let report = verified(&path).unwrap();
    assert_eq!(report.records, 3);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn rotation_keeps_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let opts = AuditOptions {
        max_bytes: 600,
        keep: 10,
        ..AuditOptions::closed()
    };
    let log = AuditLog::open(&path, opts.clone());
    for i in 0..20 {
        log.append_attempt(rec(i)).unwrap();
    }
    drop(log);
    let log = AuditLog::open(&path, opts);
    log.append_attempt(rec(99)).unwrap();
    let mut files: Vec<PathBuf> = (1..=10)
        .rev()
        .map(|n| dir.path().join(format!("audit.jsonl.{n}")))
        .filter(|p| p.exists())
        .collect();
    assert!(files.len() >= 3, "{files:?}");
    files.push(path);
    let report = verify(&files, &Chain::new(None)).unwrap();
    assert_eq!(report.records, 21);
}

#[test]
fn group_commit_serves_concurrent_callers() {
    let (_dir, path, log) = fresh("a.jsonl");
    let log = Arc::new(log);
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..20 {
                    log.append_attempt(rec(t * 100 + i)).unwrap();
                }
                20
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 320);
    assert_eq!(verified(&path).unwrap().records, 320);
}

#[test]
fn a_trail_deleted_under_a_running_server_leaves_a_visible_gap() {
    let (_dir, path, log) = fresh("a.jsonl");
    log.append_attempt(rec(1)).unwrap();
    log.append_attempt(rec(2)).unwrap();
    std::fs::remove_file(&path).unwrap();
    log.append_attempt(rec(3)).unwrap();
    let b = verified(&path).unwrap_err();
    assert_eq!(
        (b.kind, b.line),
        (crate::audit::verify::BreakKind::Deleted, 1),
        "{b}"
    );
}

#[test]
fn deleted_directory_is_an_error() {
    let (_dir, base) = crate::testing::scratch(&["logs"]);
    let sub = base.join("logs");
    let log = AuditLog::open(&sub.join("a.jsonl"), AuditOptions::closed());
    log.append_attempt(Map::new()).unwrap();
    std::fs::remove_dir_all(&sub).unwrap();
    assert!(log.append_attempt(Map::new()).is_err());
}

#[test]
fn a_torn_tail_is_sealed_on_reopen() {
    let (_dir, path, log) = fresh("a.jsonl");
    log.append_attempt(rec(1)).unwrap();
    log.append_attempt(rec(2)).unwrap();
    drop(log);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"{\"kind\":\"attempt\",\"se").unwrap();
    drop(f);
    let err = verified(&path).unwrap_err();
    assert_eq!(
        (err.line, err.kind),
        (3, crate::audit::verify::BreakKind::TornLastLine)
    );
    let log = AuditLog::open(&path, AuditOptions::closed());
    log.append_attempt(rec(3)).unwrap();
    let report = verify(&[path], &Chain::new(None)).unwrap();
    assert_eq!(report.records, 4); // two, the recovery record, one more
    assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
}
