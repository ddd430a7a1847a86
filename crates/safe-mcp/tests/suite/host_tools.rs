//! What the suite's tests run on the host beside the server, outside it: the approvals CLI
//! and the audit report of a sandbox, a free port, a folder's entries, an SSH key pair.

use std::path::{Path, PathBuf};

use super::support::{BIN, Sandbox, assert_success};

/// `safe-mcp approvals ARGS --config POLICY` of `sb`, run to its end.
pub fn approvals_cli(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .arg("approvals")
        .args(args)
        .arg("--config")
        .arg(&sb.policy)
        .output()
        .unwrap()
}

/// `safe-mcp audit report` of `sb`'s trail, as HTML.
pub fn report_html(sb: &Sandbox) -> String {
    let out = sb.base().join("report.html");
    let made = std::process::Command::new(BIN)
        .args(["audit", "report", "--config"])
        .arg(&sb.policy)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_success(&made);
    std::fs::read_to_string(&out).unwrap()
}

/// The part of a report's `html` from the heading `title` to the next heading.
pub fn report_section<'a>(html: &'a str, title: &str) -> &'a str {
    html.split_once(title)
        .map(|(_, rest)| rest.split("<h2").next().unwrap_or(rest))
        .unwrap_or_else(|| panic!("no {title} in the report:\n{html}"))
}

/// A TCP port on loopback free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every entry beneath `dir`, deepest first within each folder.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// `ssh-keygen -t ed25519` (no passphrase, `comment`) into `path` and `path.pub`, the
/// private half owned by `uid` when given; the public line.
pub fn ssh_keypair(path: &Path, comment: &str, uid: Option<u32>) -> String {
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .unwrap();
    assert_success(&made);
    if let Some(uid) = uid {
        std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    }
    std::fs::read_to_string(path.with_extension("pub"))
        .unwrap()
        .trim()
        .to_owned()
}
