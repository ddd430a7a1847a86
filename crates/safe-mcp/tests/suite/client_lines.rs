//! The client lines `init` prints work in the real clients (issue 50, item 6): Claude Code,
//! Codex and Gemini CLI from npm (pinned, installed into the target directory on first
//! use, never fetched while the server runs) take each line as printed, and their `mcp
//! list` shows the server; with a scratch HOME, and as root with the real HOME (each entry
//! removed again afterwards).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::BIN;

/// The clients, pinned: (npm package, its program, what `init` prints before its line).
const CLIENTS: &[(&str, &str, &str)] = &[
    (
        "@anthropic-ai/claude-code@2.1.332",
        "claude",
        "Claude Code:",
    ),
    ("@openai/codex@0.171.0", "codex", "Codex:"),
    ("@google/gemini-cli@0.61.0", "gemini", "Gemini CLI:"),
];

/// The clients' `.bin` directory, installed on first use.
fn clients() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("agent-clis");
    let bin = dir.join("node_modules/.bin");
    if !CLIENTS
        .iter()
        .all(|(_, program, _)| bin.join(program).exists())
    {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund"])
            .args(CLIENTS.iter().map(|(package, _, _)| *package))
            .current_dir(&dir)
            .output()
            .expect("npm is needed for the client-line test (.ci/run installs it)");
        assert!(out.status.success(), "npm install: {out:?}");
    }
    bin
}

/// A printed line's words, as a POSIX shell splits them (`init` quotes with single quotes).
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            c if c.is_whitespace() && !quoted => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// Runs `program` of the clients with `args` and HOME `home`, at most two minutes.
fn client(bin: &Path, program: &str, args: &[String], home: &Path) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(bin.join(program))
        .args(args)
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `init` for a fresh project under `home`; each client adds the line printed for it and
/// lists the server. With `clean`, each entry and the policy are removed afterwards.
fn every_line_works(bin: &Path, home: &Path, clean: bool) {
    let projects = tempfile::Builder::new()
        .prefix("cli-lines-")
        .tempdir()
        .unwrap();
    let project = std::fs::canonicalize(projects.path())
        .unwrap()
        .join(format!("lines{}", std::process::id()));
    std::fs::create_dir_all(&project).unwrap();
    let out = Command::new(BIN)
        .args(["init", "--profile", "readonly", "--jail"])
        .arg(&project)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let name = format!("safe-terminal-lines{}", std::process::id());
    for (_, program, label) in CLIENTS {
        let line = printed
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label} line in {printed}"));
        let argv = words(line.trim());
        assert_eq!(argv[0], *program, "{line}");
        let (ok, said) = client(bin, program, &argv[1..], home);
        assert!(ok, "{program}: the printed line failed: {line}\n{said}");
        let (ok, listed) = client(bin, program, &["mcp".into(), "list".into()], home);
        assert!(ok && listed.contains(&name), "{program} mcp list: {listed}");
        if clean {
            let mut remove = vec!["mcp".to_owned(), "remove".to_owned()];
            if *program != "codex" {
                remove.extend(["--scope".to_owned(), "user".to_owned()]);
            }
            remove.push(name.clone());
            let (ok, said) = client(bin, program, &remove, home);
            assert!(ok, "{program} mcp remove: {said}");
        }
    }
    if clean {
        let dir = home.join(".config/safe-mcp");
        for f in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if f.file_name()
                .to_string_lossy()
                .starts_with(&format!("lines{}", std::process::id()))
            {
                // The policy, its trail, and what a started server kept beside them.
                let _ =
                    std::fs::remove_file(f.path()).or_else(|_| std::fs::remove_dir_all(f.path()));
            }
        }
    }
}

#[test]
fn every_client_line_init_prints_works_in_the_real_client() {
    let bin = clients();
    let scratch = tempfile::tempdir().unwrap();
    every_line_works(&bin, &std::fs::canonicalize(scratch.path()).unwrap(), false);
    if rustix::process::geteuid().is_root()
        && let Some(home) = std::env::var_os("HOME")
    {
        // The clients' files this run makes in the real HOME go again; ones that were
        // there keep everything but the entry, which each client removes itself.
        let home = PathBuf::from(home);
        let theirs = [".claude.json", ".codex", ".gemini"].map(|f| home.join(f));
        let new: Vec<&PathBuf> = theirs.iter().filter(|p| !p.exists()).collect();
        every_line_works(&bin, &home, true);
        for p in new {
            let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
        }
    }
}
