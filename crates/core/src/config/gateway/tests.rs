//! The loader's reading of `[[gateway.servers]]`: a server's policy is the terminal's
//! narrowed to its entry, and every entry the gateway could not hold is refused with the key.

use super::super::{ConfigError, Policy, Section};

fn load(extra: &str) -> (tempfile::TempDir, Result<Policy, ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    let extra = extra.replace(
        "JAIL",
        &std::fs::canonicalize(dir.path())
            .unwrap()
            .join("jail")
            .display()
            .to_string(),
    );
    std::fs::create_dir(dir.path().join("jail")).unwrap();
    std::fs::create_dir(dir.path().join("srv")).unwrap();
    std::fs::write(dir.path().join("srv/server.js"), "").unwrap();
    let text = format!(
        r#"audit_log = "audit.jsonl"
[terminal]
jail_root = "jail"
[terminal.allowlist]
commands = ["ls", "git"]
[[terminal.rules]]
command = "git"
deny_args = ["push"]
{extra}
"#
    );
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).unwrap();
    let env = |_: &str| None;
    let loaded = super::super::read(Some(&path), &env, Section::Terminal);
    (dir, loaded)
}

fn entry(name: &str, command: &str, more: &str) -> String {
    format!("[[gateway.servers]]\nname = \"{name}\"\ncommand = {command}\n{more}\n")
}

fn refusal(extra: &str) -> String {
    let (_dir, loaded) = load(extra);
    match loaded {
        Ok(_) => panic!("loaded: {extra}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_server_runs_under_the_terminal_policy_narrowed_to_its_entry() {
    let (dir, loaded) = load(&entry(
        "fs",
        "[\"node\", \"SRV/server.js\", \"--stdio\"]",
        "exec = [\"git\"]\n[gateway.servers.tools]\nallow = [\"read_*\"]\nconfirm = [\"read_secret\"]\n[[gateway.servers.tools.args]]\ntool = \"*\"\npointer = \"/path\"\nkind = \"path\"",
    )
    .replace("SRV", "/nonexistent"));
    // A path operand that does not exist is still taken: the server may make it.
    let policy = loaded.unwrap();
    let server = &policy.gateway[0];
    assert_eq!(server.name, "fs");
    assert_eq!(server.tools.args.len(), 1);
    assert!(server.tools.lists("read_file"));
    assert!(server.tools.needs_approval("read_secret"));
    let narrowed = server.policy.terminal.as_ref().unwrap();
    // Only the program, its exec list and its profile's: not the terminal's `ls`.
    assert!(narrowed.allow.contains("node") && narrowed.allow.contains("git"));
    assert!(!narrowed.allow.contains("ls"));
    // The terminal's rules are not the server's; its own program may interpret.
    assert!(
        narrowed
            .rules
            .iter()
            .all(|r| r.command != "git" || r.deny_args.is_empty())
    );
    assert!(
        narrowed
            .rules
            .iter()
            .any(|r| r.command == "node" && r.allow_interpreter)
    );
    // The same jail, and the terminal itself unchanged.
    let terminal = policy.terminal.as_ref().unwrap();
    assert_eq!(narrowed.jail_root, terminal.jail_root);
    assert!(terminal.allow.contains("ls") && !terminal.allow.contains("node"));
    assert!(policy.gateway[0].policy.gateway.is_empty());
    drop(dir);
}

#[test]
fn an_entry_the_gateway_could_not_hold_is_refused_with_its_key() {
    let cases = [
        (
            entry("Bad_Name", "[\"node\"]", ""),
            "gateway.servers[0].name",
        ),
        (
            entry("a", "[\"node\"]", "") + &entry("a", "[\"node\"]", ""),
            "names two servers",
        ),
        (entry("a", "[\"bin/node\"]", ""), "bare name"),
        (
            entry("a", "[\"node\", \"srv/server.js\"]", ""),
            "absolute path",
        ),
        (entry("a", "[]", ""), "program first"),
        (entry("a", "[\"node\"]", "mystery = 1"), "unknown field"),
        (
            entry(
                "a",
                "[\"node\"]",
                "[gateway.servers.tools]\n[[gateway.servers.tools.args]]\ntool = \"*\"\npointer = \"path\"\nkind = \"path\"",
            ),
            "JSON pointer",
        ),
        (
            entry(
                "a",
                "[\"node\"]",
                "[gateway.servers.tools]\n[[gateway.servers.tools.args]]\ntool = \"*\"\npointer = \"/p\"\nkind = \"glob\"",
            ),
            "the kinds are",
        ),
        (
            entry(
                "a",
                "[\"node\"]",
                "[gateway.servers.tools]\n[[gateway.servers.tools.args]]\ntool = \"*\"\npointer = \"/p\"\nkind = \"refuse\"\npattern = \"(\"",
            ),
            "does not compile",
        ),
        (
            entry("a", "[\"node\"]", "write_paths = [\"srv\"]"),
            "outside the jail",
        ),
    ];
    for (extra, needle) in cases {
        let said = refusal(&extra);
        assert!(said.contains(needle), "{extra}\n=> {said}");
    }
}

#[test]
fn a_server_whose_code_lies_where_commands_write_is_refused() {
    let said = refusal(&entry("a", "[\"node\", \"JAIL/server.js\"]", ""));
    assert!(said.contains("out of the model's reach"), "{said}");
}

#[test]
fn a_server_read_path_holding_a_terminal_secret_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _) = load("");
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let token = keys.join("token");
    std::fs::write(&token, "secret-value-1234567890\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let text = format!(
        r#"audit_log = "audit.jsonl"
[terminal]
jail_root = "jail"
[terminal.allowlist]
commands = ["ls"]
[terminal.network]
mode = "allowlist"
allow_domains = ["api.example.com"]
[[terminal.credentials]]
name = "API_TOKEN"
from = "file:{}"
hosts = ["api.example.com"]
inject = {{ header = "Authorization", format = "Bearer {{}}" }}
{}"#,
        token.display(),
        entry(
            "a",
            "[\"node\"]",
            &format!("read_paths = [\"{}\"]", keys.display())
        )
    );
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).unwrap();
    let env = |_: &str| None;
    let said = match super::super::read(Some(&path), &env, Section::Terminal) {
        Ok(_) => panic!("loaded a server that can read the terminal's token"),
        Err(e) => e.to_string(),
    };
    assert!(said.contains("a secret of the terminal's"), "{said}");
}
