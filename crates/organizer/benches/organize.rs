//! `plan_organize` on a workspace of 100,000 files and `apply_plan` of 10,000 moves, through
//! the organizer's service (no MCP transport), on the disk of the current directory.
//! `cargo bench -p safe-mcp-organizer --bench organize [-- FILES MOVES]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use safe_mcp_core::audit::Caller;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use safe_mcp_core::config::Section;
use safe_mcp_core::load::load_policy;
use safe_mcp_organizer::FilesService;

fn workspace(dir: &Path, files: usize, max_moves: usize) -> FilesService {
    let root = dir.join("inbox");
    std::fs::create_dir_all(&root).unwrap();
    let old = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..files {
        let ext = [
            ".pdf", ".jpg", ".txt", ".csv", ".mp3", ".zip", ".rs", ".pptx",
        ][i % 8];
        let path = root.join(format!("file-{i:06}{ext}"));
        let f = std::fs::File::create(&path).unwrap();
        f.set_modified(old).unwrap();
    }
    let text = format!(
        "audit_log = \"audit.jsonl\"\n[files]\nworkspace_root = \"inbox\"\njournal = \"journal.jsonl\"\nmax_plan_moves = {max_moves}\n"
    );
    let policy_path = dir.join("policy.toml");
    std::fs::write(&policy_path, text).unwrap();
    let env = |_: &str| None;
    let policy = load_policy(Some(&policy_path), &env, Section::Files).unwrap();
    FilesService::start(&policy).unwrap().0
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let files = args.next().unwrap_or(100_000);
    let moves = args.next().unwrap_or(10_000);
    let cwd = std::env::current_dir().unwrap();

    let dir = tempfile::tempdir_in(&cwd).unwrap();
    let service = workspace(dir.path(), files, files);
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = service.plan_organize(&Caller::default());
        samples.push(t.elapsed());
        assert_eq!(r.detail["move_count"], files);
    }
    samples.sort();
    println!(
        "plan_organize over {files} files: best {:.0} ms, median {:.0} ms ({:.0} files/s)",
        samples[0].as_secs_f64() * 1e3,
        samples[2].as_secs_f64() * 1e3,
        files as f64 / samples[2].as_secs_f64()
    );
    drop(dir);

    let dir = tempfile::tempdir_in(&cwd).unwrap();
    let service = workspace(dir.path(), moves, moves);
    let plan = service.plan_organize(&Caller::default());
    let id = plan.detail["plan_id"].as_str().unwrap().to_owned();
    let t = Instant::now();
    let r = service.apply_plan(&id, &Caller::default());
    let apply = t.elapsed();
    assert_eq!(r.detail["moved"], moves, "{}", r.reason);
    let t = Instant::now();
    let u = service.undo_last_action(&Caller::default());
    let undo = t.elapsed();
    assert!(u.ok, "{}", u.reason);
    println!(
        "apply_plan of {moves} moves: {:.0} ms ({:.0} moves/s, journal written ahead and fsynced, folders fsynced); undo: {:.0} ms",
        apply.as_secs_f64() * 1e3,
        moves as f64 / apply.as_secs_f64(),
        undo.as_secs_f64() * 1e3
    );
}
