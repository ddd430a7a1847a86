//! End to end with a client no one here wrote: the official Python MCP SDK.
//!
//! The test makes its own venv under the target directory and installs `mcp` and
//! `jsonschema` from PyPI (CI reaches PyPI); the script lists the tools, calls each one and
//! validates every result against the tool's declared `outputSchema`.

use std::path::PathBuf;
use std::process::Command;

use super::support::{BIN, Sandbox};

/// The venv with the Python SDK and jsonschema.
fn venv_python() -> PathBuf {
    super::support::venv("py-e2e-venv", &["mcp>=1.20", "jsonschema"])
}

/// Runs one of the Python client scripts with these arguments; returns its stdout.
pub fn run_script(script: &str, args: &[String]) -> String {
    let python = venv_python();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

/// Runs one of the Python client scripts against `policy`; returns its stdout.
fn run_client(script: &str, policy: &std::path::Path) -> String {
    run_script(
        script,
        &[BIN.to_owned(), policy.to_string_lossy().into_owned()],
    )
}

#[test]
fn official_python_sdk_drives_every_tool() {
    let sb = Sandbox::new("");
    let stdout = run_client("e2e_client.py", &sb.policy);
    assert!(stdout.contains("validated"), "{stdout}");
    // The file tools' edit reached the disk.
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("src/app.py")).unwrap(),
        "def f():\n    return 2\n"
    );
}

#[test]
fn official_python_sdk_drives_the_files_server() {
    let ws = super::files::Workspace::new(false);
    for name in ["report.pdf", "setup.exe", "photo.jpg"] {
        let path = ws.root.join(name);
        std::fs::write(&path, name).unwrap();
        super::files::backdate(&path);
    }
    let stdout = run_client("e2e_files_client.py", &ws.policy);
    assert!(stdout.contains("validated every files result"), "{stdout}");
}

/// Progress through the Python SDK: a callback (and so a progressToken) gets the output's
/// latest lines as it runs; a call without one gets no notification at all.
#[test]
fn official_python_sdk_gets_progress_only_when_it_asks() {
    let sb = Sandbox::allowing(&["sh", "echo", "sleep"], "timeout_seconds = 30");
    let stdout = run_client("progress_client.py", &sb.policy);
    let line = stdout.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let seen = v["with"].as_array().unwrap();
    assert!(seen.len() >= 3, "{stdout}");
    assert!(
        seen.iter()
            .any(|p| p[1].as_str().is_some_and(|m| m.starts_with("step "))),
        "{stdout}"
    );
    assert_eq!(v["without"], 0, "{stdout}");
}

/// A process session through the Python SDK: start, write, read, list, stop, and the
/// handle is gone after.
#[test]
fn official_python_sdk_drives_a_process_session() {
    let sb = Sandbox::allowing(&["sh", "echo"], "timeout_seconds = 30");
    let stdout = run_client("session_client.py", &sb.policy);
    let line = stdout.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["read"], "echo:from python\n", "{stdout}");
    assert_eq!(v["stopped"]["ended"], "stop", "{stdout}");
    assert_eq!(v["after"], "INVALID_REQUEST", "{stdout}");
}
