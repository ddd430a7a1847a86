//! Table-driven tests of the argument-level policy: each way of turning an allowlisted tool
//! into a shell, with its variants (abbreviation, bundling, attached values, case inside
//! sub-languages, options after operands), is refused with a reason that names it; and the
//! everyday uses stay allowed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use safe_mcp_core::ResultCode;
use safe_mcp_core::config::{Policy, Section};
use safe_mcp_core::load::load_policy;
use safe_mcp_core::policy::{Decision, evaluate};
use safe_mcp_core::syntax::parse;

include!("../testdata/escapes_table.rs");

const TOOLS: &str = r#""git", "find", "tar", "sed", "awk", "gawk", "mawk", "sort", "xargs", "env", "zip", "unzip", "rsync", "ssh", "scp", "make", "rg", "grep", "less", "more", "man", "vim", "vi", "ed", "sqlite3", "npm", "npx", "cargo", "go", "pip", "python3", "node", "perl", "ruby", "docker", "curl", "wget", "jq", "cp", "mv", "ln", "tee", "dd", "bash", "sh", "zsh", "ls", "wc", "cat", "echo", "sudo", "sftp", "cpio", "xz", "du", "sha256sum""#;

struct Fixture {
    _dir: tempfile::TempDir,
    policy: Policy,
}

fn fixture(extra: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let jail = dir.path().join("jail");
    std::fs::create_dir(&jail).unwrap();
    std::fs::write(jail.join("f"), "x\n").unwrap();
    let text = format!(
        "audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [{TOOLS}]\n{extra}"
    );
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, &text).unwrap();
    let env = |_: &str| None;
    let policy = load_policy(Some(&path), &env, Section::Terminal).unwrap();
    Fixture { _dir: dir, policy }
}

fn decide(f: &Fixture, command: &str) -> Decision {
    let t = f.policy.terminal.as_ref().unwrap();
    let list = parse(command).unwrap_or_else(|e| panic!("{command}: {e}"));
    evaluate(
        t,
        &safe_mcp_core::jail::on_disk(t.jail_root.clone()),
        &list,
        None,
    )
}

/// Where each awk lives on this machine's PATH, canonical (`awk` is an alternatives link).
fn awk_binary(name: &str) -> Option<std::path::PathBuf> {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// Whichever awk the machine has (mawk, gawk, busybox), and whichever `awk` names: the ones
/// without a sandbox refuse what runs commands or writes files; gawk gets `--sandbox`, so
/// `>` is only a comparison there, and commands and pipes are refused all the same.
#[test]
fn every_awk_present_is_checked_as_what_it_is() {
    let f = fixture("");
    let mut tested = 0;
    for name in ["awk", "mawk", "gawk"] {
        let Some(binary) = awk_binary(name) else {
            eprintln!("{name}: not installed here, not tested");
            continue;
        };
        tested += 1;
        let gawk = binary
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("gawk"));
        // Refused, saying why in a phrase of its reason.
        let refused = |command: &str, fragment: &str| {
            let d = decide(&f, command);
            let why = format!("{command} ({}): {}", binary.display(), d.reason);
            assert_eq!(d.code, ResultCode::PolicyDenied, "{why}");
            assert!(d.reason.contains(fragment), "{why}");
        };
        for (program, fragment) in [
            ("'BEGIN{system (\"CMD\")}'", "system()"),
            ("'BEGIN{print | \"sh\"}'", "`|`"),
            ("'BEGIN{\"id\" | getline x}'", "awk program"),
        ] {
            refused(&format!("{name} {program}"), fragment);
        }
        let command = format!("{name} '{{print > \"/tmp/x\"}}' f");
        let d = decide(&f, &command);
        if gawk {
            assert_eq!(d.code, ResultCode::Ok, "{command}: {}", d.reason);
            let argv = d.stages[0].run_argv.clone().unwrap();
            assert!(
                argv.contains(&"--sandbox".to_owned()),
                "{command}: {argv:?}"
            );
        } else {
            refused(&command, "`>`");
            // Without a sandbox, ARGV can point the main loop at any file.
            let command = format!("{name} 'BEGIN{{ARGV[1]=\"/etc/passwd\"; ARGC=2}}{{print}}'");
            let d = decide(&f, &command);
            assert_eq!(d.code, ResultCode::PolicyDenied, "{command}: {}", d.reason);
            assert!(d.reason.contains("ARGV"), "{command}: {}", d.reason);
        }
    }
    assert!(tested > 0, "no awk at all on this machine");
}

#[test]
fn every_escape_is_refused_with_a_reason_that_names_it() {
    let f = fixture("");
    let mut failures = Vec::new();
    for (command, code, fragment) in ESCAPES {
        let d = decide(&f, command);
        if d.code != *code || !d.reason.contains(fragment) {
            failures.push(format!(
                "{command}\n    got {} ({}): {}\n    want {code} mentioning {fragment:?}",
                d.code, d.rule, d.reason
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} escapes were mishandled:\n{}",
        failures.len(),
        ESCAPES.len(),
        failures.join("\n")
    );
}

#[test]
fn everyday_uses_stay_allowed() {
    let f = fixture("");
    let mut failures = Vec::new();
    for command in LEGIT {
        let d = decide(&f, command);
        // OPERATION_FAILED only means the tool is not installed on this machine.
        if !matches!(d.code, ResultCode::Ok | ResultCode::OperationFailed) {
            failures.push(format!("{command}: {} ({}): {}", d.code, d.rule, d.reason));
        }
    }
    assert!(
        failures.is_empty(),
        "legitimate commands refused:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_forcing_push_matches_an_operator_force_rule() {
    let f = fixture(
        "[[terminal.rules]]\ncommand = \"git\"\ndeny_args = [\"push --force\"]\nreason = \"no force-push\"\n",
    );
    for command in [
        "git push --force origin main",
        "git push -f origin main",
        "git push --force-with-lease origin main",
        "git push --force-with-lease=main:abc123 origin main",
        "git push --force-w origin main",
        "git push --force-if-includes --force-with-lease origin main",
        "git push origin +main",
    ] {
        let d = decide(&f, command);
        assert_eq!(d.code, ResultCode::PolicyDenied, "{command}: {}", d.reason);
        assert_eq!(d.rule, "rules[0]", "{command}: {}", d.reason);
    }
    for command in [
        "git push origin main",
        "git push --follow-tags -u origin main",
        "git push --delete origin old",
    ] {
        let d = decide(&f, command);
        assert!(
            matches!(d.code, ResultCode::Ok | ResultCode::OperationFailed),
            "{command}: {} {}",
            d.code,
            d.reason
        );
    }
}

#[test]
fn an_operator_can_opt_in_one_exact_escape() {
    let f = fixture(
        "[[terminal.rules]]\ncommand = \"find\"\nallow_escapes = [\"-delete\"]\n[[terminal.rules]]\ncommand = \"python3\"\nallow_interpreter = true\n",
    );
    assert_eq!(decide(&f, "find . -delete").code, ResultCode::Ok);
    assert_eq!(
        decide(&f, "find . -exec CMD ;").code,
        ResultCode::PolicyDenied,
        "only the named escape"
    );
    assert_eq!(decide(&f, "python3 -c 1").code, ResultCode::Ok);
    assert_eq!(decide(&f, "node -e 1").code, ResultCode::PolicyDenied);
}

#[test]
fn hardening_is_injected_and_shown() {
    let f = fixture("");
    let d = decide(&f, "git status");
    let run = d.stages[0].run_argv.as_ref().unwrap();
    assert_eq!(run[1], "--no-pager");
    assert!(run.iter().any(|a| a == "core.hooksPath=/dev/null"));
    assert!(run.iter().any(|a| a == "core.fsmonitor=false"));
    assert!(
        d.stages[0]
            .env
            .iter()
            .any(|(k, v)| k == "GIT_CONFIG_GLOBAL" && v == "/dev/null")
    );
    let d = decide(&f, "sed -n 1p f");
    assert_eq!(d.stages[0].run_argv.as_ref().unwrap()[1], "--sandbox");
    let d = decide(&f, "ssh h");
    assert_eq!(
        &d.stages[0].run_argv.as_ref().unwrap()[1..3],
        ["-F", "/dev/null"]
    );
    let d = decide(&f, "man ls");
    assert_eq!(
        &d.stages[0].run_argv.as_ref().unwrap()[1..3],
        ["-C", "/dev/null"],
        "no user config (~/.manpath DEFINE lines name programs)"
    );
    let d = decide(&f, "sqlite3 db 'select 1'");
    assert_eq!(d.stages[0].run_argv.as_ref().unwrap()[1], "-safe");
    let d = decide(&f, "curl -s http://example.invalid/");
    assert_eq!(
        d.stages[0].run_argv.as_ref().unwrap()[1],
        "-q",
        "~/.curlrc is in the jail"
    );
    let d = decide(&f, "wget -q http://example.invalid/");
    assert_eq!(d.stages[0].run_argv.as_ref().unwrap()[1], "--no-config");
    let d = decide(&f, "git status");
    assert!(
        d.stages[0]
            .run_argv
            .as_ref()
            .unwrap()
            .iter()
            .any(|a| a == "safe.bareRepository=explicit")
    );
}

#[test]
fn policies_test_themselves_at_load() {
    let ok = "[[terminal.rules]]\ncommand = \"find\"\nshould_allow = [\"find . -name x\"]\nshould_deny = [\"find . -exec CMD \\\\;\"]\n[[terminal.examples]]\nshould_deny = [\"curl file:///etc/passwd\"]\nshould_allow = [\"ls\"]\n";
    fixture(ok);
    for (bad, needle) in [
        (
            "[[terminal.rules]]\ncommand = \"find\"\nshould_allow = [\"find . -delete\"]\n",
            "terminal.rules[0] (find): should_allow example `find . -delete`",
        ),
        (
            "[[terminal.examples]]\nshould_deny = [\"ls\"]\n",
            "terminal.examples[0]: should_deny example `ls`",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("jail")).unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            format!("audit_log = \"a.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [{TOOLS}]\n{bad}"),
        )
        .unwrap();
        let env = |_: &str| None;
        let err = load_policy(Some(&path), &env, Section::Terminal)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    }
}
