//! What the benches share: one tool call over a live rmcp client session, a terminal
//! server started over stdio, percentiles, and a test issuer for OAuth.
#![allow(dead_code)] // each bench uses what it needs

pub mod issuer;

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::Value;

/// The bench's one optional argument, a count (calls or rounds); `default` without it.
pub fn count_arg(default: usize) -> usize {
    std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(default)
}

/// Calls `tool` with the object `args`; returns the envelope (`structuredContent`).
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap();
    r.structured_content.unwrap()
}

/// `safe-mcp terminal --config policy` over stdio, with an rmcp client session.
pub async fn start_terminal(policy: &std::path::Path) -> RunningService<RoleClient, ()> {
    use rmcp::ServiceExt;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_safe-mcp")).configure(|c| {
        c.arg("terminal").arg("--config").arg(policy);
    });
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// The median and the 99th percentile of `v`.
pub fn p50_p99(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// The numbers in `out` (curl's `-w` figures), in order.
pub fn numbers(out: &str) -> Vec<f64> {
    out.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// The median of `v` (bytes per second) in MB/s.
pub fn median_mb(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2] / 1e6
}

/// A policy in `dir/name/policy.toml` whose jail is `dir/name/jail`, allowing `echo`, with
/// `extra` TOML appended.
pub fn echo_policy(dir: &std::path::Path, name: &str, extra: &str) -> std::path::PathBuf {
    let base = dir.join(name);
    std::fs::create_dir_all(base.join("jail")).unwrap();
    let p = base.join("policy.toml");
    std::fs::write(
        &p,
        format!("audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [\"echo\"]\n{extra}"),
    )
    .unwrap();
    p
}
