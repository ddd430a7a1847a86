//! Append throughput of the audit trail with fsync: one caller versus 16 concurrent callers
//! sharing fsyncs (group commit). `cargo bench -p safe-mcp-core --bench audit_append [-- N]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use safe_mcp_core::audit::{AuditLog, AuditOptions};
use serde_json::{Map, json};

fn record(i: usize) -> Map<String, serde_json::Value> {
    Map::from_iter([
        ("call".to_owned(), json!(format!("bench-{i}"))),
        ("tool".to_owned(), json!("run_command")),
        ("command".to_owned(), json!("git log --oneline -5")),
        ("verdict".to_owned(), json!("OK")),
    ])
}

fn run(threads: usize, total: usize) -> (f64, Vec<Duration>) {
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let log = Arc::new(AuditLog::open(
        &dir.path().join("audit.jsonl"),
        AuditOptions::closed(),
    ));
    log.check().unwrap();
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                for i in 0..total / threads {
                    let s = Instant::now();
                    log.append_attempt(record(t * 1_000_000 + i)).unwrap();
                    lat.push(s.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let secs = started.elapsed().as_secs_f64();
    lat.sort();
    (lat.len() as f64 / secs, lat)
}

fn main() {
    let total: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3200);
    println!(
        "audit append with fdatasync before return, {total} attempt records per row, disk of the cwd\n"
    );
    for threads in [1, 16] {
        let (rate, lat) = run(threads, total);
        let at = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        println!(
            "{threads:>2} caller(s): {rate:>8.0} records/s   per-append p50 {:.3} ms   p99 {:.3} ms",
            at(0.5),
            at(0.99)
        );
    }
}
