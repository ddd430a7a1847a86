//! Redaction throughput: a 64 KiB mixed command output and a 50 MB secret-free log, through
//! the engine (keyword prefilter + lazily compiled rules) and through a naive baseline that
//! runs every rule's regex over the whole text, in the same run.
//! `cargo bench -p safe-mcp-core --bench redact`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use regex::Regex;
use safe_mcp_core::config::RedactionSettings;
use safe_mcp_core::redact::Redactor;

fn log_line(i: usize) -> String {
    let levels = ["INFO", "DEBUG", "WARN", "ERROR"];
    format!(
        "2026-11-30T01:{:02}:{:02}.{:03}Z {} [worker-{}] request {:08x}-{:04x}-4abc-9def-{:012x} GET /api/v1/items/{} from 10.{}.{}.{} took {}ms commit 3f786850e387550fdab836ed7e6dc881de{:06x} path=/var/lib/app/cache/{}.json size={} status=200\n",
        i / 3600 % 60,
        i / 60 % 60,
        i % 1000,
        levels[i % 4],
        i % 8,
        i,
        i % 65536,
        i * 7919,
        i % 10_000,
        i % 256,
        i / 256 % 256,
        i % 200,
        i % 900,
        i % 0xffffff,
        i,
        i * 31 % 100_000
    )
}

fn mixed_output() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 64 * 1024 {
        s.push_str(&log_line(i));
        match i % 40 {
            7 => s.push_str("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"),
            15 => s.push_str("> Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U\n"),
            23 => s.push_str("origin\thttps://bob:s3cr3t-pass@git.example.com/r.git (fetch)\n"),
            31 => s.push_str("DB_PASSWORD=Tr0ub4dor&3xyz\n"),
            _ => {}
        }
        i += 1;
    }
    s
}

fn secret_free(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 512);
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&log_line(i));
        i += 1;
    }
    s
}

fn time<F: FnMut()>(mut f: F, rounds: usize) -> f64 {
    f(); // warm-up (and lazy compilation)
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let settings = RedactionSettings {
        enabled: true,
        entropy_fallback: false,
        extra_patterns: vec![],
    };
    let engine = Redactor::new(&settings).unwrap();
    let naive: Vec<Regex> = engine
        .patterns()
        .iter()
        .map(|p| Regex::new(p).unwrap())
        .collect();
    let naive_run = |text: &str| {
        naive
            .iter()
            .map(|r| r.find_iter(text).count())
            .sum::<usize>()
    };

    println!(
        "redaction throughput ({} kinds, best of N rounds)\n",
        engine.kinds()
    );
    for (name, text, rounds) in [
        ("64 KiB mixed output", mixed_output(), 50),
        ("50 MB secret-free log", secret_free(50 << 20), 3),
    ] {
        let mb = text.len() as f64 / 1e6;
        let t = Instant::now();
        let kinds = engine.triggered_kinds(&text);
        println!(
            "{name}: keyword prefilter {:.1} ms; rules it lets run: {kinds:?}",
            t.elapsed().as_secs_f64() * 1e3
        );
        let e = time(|| drop(std::hint::black_box(engine.redact(&text))), rounds);
        let n = time(
            || {
                std::hint::black_box(naive_run(&text));
            },
            rounds,
        );
        println!(
            "{name:<24} engine {:>8.1} MB/s ({:.2} ms)   naive one-regex-at-a-time {:>7.1} MB/s ({:.2} ms)",
            mb / e,
            e * 1e3,
            mb / n,
            n * 1e3
        );
    }
}
