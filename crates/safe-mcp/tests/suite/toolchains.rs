//! Real developer toolchains (issue 17): a private TMPDIR per call, `write_paths`, and the
//! everyday tools that need them, over a real MCP session.

use serde_json::json;

use super::builders::{cargo_project, git_env, in_terminal_table};
use super::support::{BIN, Sandbox, reason_of, stderr_of, stdout_of};

fn sandbox() -> Sandbox {
    Sandbox::builder()
        .allow_more(&["mkdir", "dirname"])
        .roomy(20)
        .build()
}

/// Appends `[terminal.sandbox] namespaces = ...` to the sandbox's policy.
fn set_namespaces(sb: &Sandbox, namespaces: &str) {
    sb.append_policy(&format!(
        "[terminal.sandbox]\nnamespaces = \"{namespaces}\""
    ));
}

/// Each call gets its own TMPDIR (also TMP and TEMP): writable, outside the jail, unseen by
/// other calls (its parent is not even listable), removed when the call ends; `/tmp`
/// itself stays unwritable.
#[tokio::test(flavor = "multi_thread")]
async fn each_call_gets_a_private_tmpdir_that_is_removed() {
    for namespaces in ["auto", "off"] {
        let sb = sandbox();
        set_namespaces(&sb, namespaces);
        let s = sb.session().await;
        let r = s.sh("echo $TMPDIR; [ \"$TMP\" = \"$TMPDIR\" ] && [ \"$TEMP\" = \"$TMPDIR\" ] && echo same; \
                    mkdir $TMPDIR/d && echo made > $TMPDIR/d/f && cat $TMPDIR/d/f; \
                    ls \"$(dirname $TMPDIR)\" >/dev/null 2>&1 || echo parent-hidden; \
                    echo x > /tmp/safe-mcp-probe-$$ 2>/dev/null || echo tmp-unwritable").await;
        assert_eq!(r["code"], "OK", "{namespaces}: {r}");
        let out = stdout_of(&r);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            &lines[1..],
            ["same", "made", "parent-hidden", "tmp-unwritable"],
            "{namespaces}: {out}"
        );
        let tmp = std::path::Path::new(lines[0]);
        assert!(tmp.is_absolute() && !tmp.starts_with(&sb.jail), "{out}");
        assert!(
            !tmp.exists(),
            "{namespaces}: the call's TMPDIR was left behind"
        );
        let again = s.sh("echo $TMPDIR").await;
        assert_ne!(
            stdout_of(&again).trim(),
            lines[0],
            "two calls shared a TMPDIR"
        );
    }
}

/// The first thing a new user tried: `git diff` failed with "unable to create temp-file".
#[tokio::test(flavor = "multi_thread")]
async fn git_works_in_the_jail() {
    let sb = sandbox();
    in_terminal_table(&sb, &git_env("t", "t@example.com"));
    let s = sb.session().await;
    // Each quiet: no output at all.
    for command in [
        "git init -q -b main",
        "git add notes.txt",
        "git commit -q -m first",
        "git status --short",
    ] {
        let r = s.run_expecting(command, "OK").await;
        assert_eq!(r["detail"]["stdout"], "", "{command}: {r}");
    }
    sb.write_in_jail("notes.txt", "alpha\nBETA\ngamma\n");
    let r = s.run("git diff --stat").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(stdout_of(&r).contains("1 file changed"), "{r}");
    let r = s.run("git diff").await;
    assert!(stdout_of(&r).contains("+BETA"), "{r}");
    let r = s.run("git log --oneline").await;
    assert!(stdout_of(&r).contains("first"), "{r}");
}

/// A write path is writable (and its files land on the host), in either view.
#[tokio::test(flavor = "multi_thread")]
async fn write_paths_are_writable() {
    for namespaces in ["auto", "off"] {
        let sb = sandbox();
        let cache = sb.base().join("cache");
        std::fs::create_dir(&cache).unwrap();
        in_terminal_table(&sb, &format!("write_paths = [\"{}\"]", cache.display()));
        set_namespaces(&sb, namespaces);
        let s = sb.session().await;
        let r = s
            .sh(&format!(
                "echo cached > {}/entry && cat {}/entry",
                cache.display(),
                cache.display()
            ))
            .await;
        assert_eq!(r["detail"]["stdout"], "cached\n", "{namespaces}: {r}");
        assert_eq!(
            std::fs::read_to_string(cache.join("entry")).unwrap(),
            "cached\n"
        );
        let d = s.call("describe_policy", json!({"verbose": true})).await;
        let rw = d["detail"]["confinement"]["landlock"]["read_write"].to_string();
        assert!(rw.contains(cache.to_str().unwrap()), "{d}");
    }
}

/// `policy check` of the sandbox's policy with `write_paths = [path]` fails, saying `why`.
fn write_path_is_fatal(sb: &Sandbox, path: &std::path::Path, why: &str) {
    in_terminal_table(sb, &format!("write_paths = [\"{}\"]", path.display()));
    let out = std::process::Command::new(BIN)
        .args(["policy", "check", "--config", sb.policy.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}: {out:?}", path.display());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("terminal.write_paths") && stderr.contains(why),
        "{}: {stderr}",
        path.display()
    );
}

/// A write path that could change what runs next does not load: a system directory, an
/// ancestor of the jail, one holding the audit trail, the policy file or a PATH entry.
#[test]
fn dangerous_write_paths_are_fatal() {
    let sb = sandbox();
    write_path_is_fatal(
        &sb,
        std::path::Path::new("/usr/local"),
        "would let commands write /usr",
    );
    let sb = sandbox();
    write_path_is_fatal(&sb, std::path::Path::new("/"), "would let commands write");
    let sb = sandbox();
    write_path_is_fatal(&sb, sb.base(), "overlaps the jail");
    let sb = sandbox();
    let logs = sb.base().join("logs");
    std::fs::create_dir(&logs).unwrap();
    sb.edit_policy(
        "audit_log = \"audit.jsonl\"",
        "audit_log = \"logs/audit.jsonl\"",
    );
    write_path_is_fatal(&sb, &logs, "lets commands write the audit_log");
    let sb = sandbox();
    let bin = sb.base().join("bin");
    std::fs::create_dir(&bin).unwrap();
    in_terminal_table(
        &sb,
        &format!("path = [\"/usr/bin\", \"/bin\", \"{}\"]", bin.display()),
    );
    write_path_is_fatal(&sb, &bin, "holds the PATH entry");
    // The policy file in a directory of its own, which is then made writable.
    let sb = sandbox();
    let conf = sb.base().join("conf");
    std::fs::create_dir(&conf).unwrap();
    let moved = conf.join("policy.toml");
    let text = std::fs::read_to_string(&sb.policy)
        .unwrap()
        .replace("\"jail\"", &format!("\"{}\"", sb.jail.display()))
        .replace("\"audit.jsonl\"", &format!("\"{}\"", sb.audit.display()));
    let check = |text: &str| {
        std::fs::write(&moved, text).unwrap();
        std::process::Command::new(BIN)
            .args(["policy", "check", "--config", moved.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = check(&text);
    assert!(out.status.success(), "control: {out:?}");
    let out = check(&text.replacen(
        "[terminal]\n",
        &format!("[terminal]\nwrite_paths = [\"{}\"]\n", conf.display()),
        1,
    ));
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("lets commands write the policy file"),
        "{out:?}"
    );
}

/// A session whose server has this test's PATH and HOME: profiles discover the toolchains
/// from the server's environment, as they would for an operator.
async fn session_with_toolchains(sb: &Sandbox) -> super::support::Session {
    let path = std::env::var("PATH").unwrap_or_default();
    let home = std::env::var("HOME").unwrap_or_default();
    super::support::Session::start(&sb.policy, |c| {
        c.env("PATH", path).env("HOME", home);
    })
    .await
}

/// A sandbox with `profiles` and a cache directory of its own.
fn with_profiles(profiles: &[&str]) -> Sandbox {
    let sb = Sandbox::builder()
        .allow(&["echo", "cat", "ls", "sh"])
        .roomy(120)
        .build();
    let list: Vec<String> = profiles.iter().map(|p| format!("\"{p}\"")).collect();
    in_terminal_table(
        &sb,
        &format!("profiles = [{}]\ncache_dir = \"cache\"", list.join(", ")),
    );
    sb
}

/// When `program` is installed: a sandbox with `profiles` whose jail holds `files` (path,
/// text), and a session with the toolchains; `None` (the test skipped) when it is not.
async fn project_session(
    program: &str,
    profiles: &[&str],
    files: &[(&str, &str)],
) -> Option<(Sandbox, super::support::Session)> {
    if !super::support::installed(program) {
        return None;
    }
    let sb = with_profiles(profiles);
    for (path, text) in files {
        let path = sb.jail.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let s = session_with_toolchains(&sb).await;
    Some((sb, s))
}

/// `cargo build --offline` and `cargo test --offline` of a dependency-free crate, under the
/// rust profile alone: the toolchain is found through rustup's proxy, CARGO_HOME is the
/// server's cache, build output and test binaries stay in the jail.
#[tokio::test(flavor = "multi_thread")]
async fn the_rust_profile_builds_and_tests_a_crate() {
    let files = [
        (
            "hello/Cargo.toml",
            "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "hello/src/lib.rs",
            "pub fn add(a: u32, b: u32) -> u32 { a + b }\n#[cfg(test)]\nmod tests { #[test] fn adds() { assert_eq!(super::add(2, 2), 4); } }\n",
        ),
    ];
    let Some((sb, s)) = project_session("cargo", &["rust"], &files).await else {
        return;
    };
    let r = s.run_in("hello", "cargo build --offline").await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = s.run_in("hello", "cargo test --offline").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(stdout_of(&r).contains("test tests::adds ... ok"), "{r}");
    assert!(sb.jail.join("hello/target/debug").is_dir());
    // The cache belongs to this jail alone (round 3): beneath cache/jails/<jail's key>/.
    let jails: Vec<_> = std::fs::read_dir(sb.base().join("cache/jails"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(jails.len(), 1, "{jails:?}");
    assert!(jails[0].join("cargo").is_dir());
    assert_eq!(
        std::fs::metadata(jails[0].join("cargo/config.toml"))
            .unwrap()
            .len(),
        0,
        "cargo's configuration stays the empty placeholder"
    );
    // What the profile refuses: --config can name programs to run.
    let r = s
        .run_in(
            "hello",
            "cargo build --offline --config build.rustc-wrapper='x'",
        )
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
}

/// `python3 -m unittest` under the python profile, with the interpreter pyenv's shim (or the
/// system) points at.
#[tokio::test(flavor = "multi_thread")]
async fn the_python_profile_runs_unittest() {
    let test = "import unittest\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n";
    let files = [("test_math.py", test)];
    let Some((_sb, s)) = project_session("python3", &["python"], &files).await else {
        return;
    };
    let r = s.run("python3 -m unittest -v test_math").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(stderr_of(&r).contains("test_add"), "{r}");
}

/// `npm test` under the node profile: the package's own test script runs (lifecycle scripts
/// stay off), with the cache beneath the server's, per jail.
#[tokio::test(flavor = "multi_thread")]
async fn the_node_profile_runs_npm_test() {
    let files = [
        (
            "package.json",
            r#"{"name": "t", "version": "1.0.0", "scripts": {"test": "node test.js", "pretest": "node -e \"require('fs').writeFileSync('pre-ran', '')\""}}"#,
        ),
        (
            "test.js",
            "const assert = require('assert');\nassert.strictEqual(1 + 1, 2);\nconsole.log('node test ok');\n",
        ),
    ];
    let Some((sb, s)) = project_session("npm", &["node"], &files).await else {
        return;
    };
    let r = s.run("npm test").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(stdout_of(&r).contains("node test ok"), "{r}");
    assert!(!sb.jail.join("pre-ran").exists(), "a lifecycle script ran");
}

/// The git profile alone: init, add, commit, status, diff, log, with identity from
/// [terminal.env] and no pager; a force push is refused by its rule.
#[tokio::test(flavor = "multi_thread")]
async fn the_git_profile_commits_and_diffs() {
    let sb = with_profiles(&["git"]);
    sb.append_policy(&git_env("t", "t@example.com"));
    let s = session_with_toolchains(&sb).await;
    for command in [
        "git init -q -b main",
        "git add notes.txt",
        "git commit -q -m first",
    ] {
        s.run_expecting(command, "OK").await;
    }
    sb.write_in_jail("notes.txt", "changed\n");
    let r = s.run("git status --short").await;
    assert_eq!(r["detail"]["stdout"], " M notes.txt\n", "{r}");
    let r = s.run("git diff").await;
    assert!(stdout_of(&r).contains("+changed"), "{r}");
    let r = s.run("git log --oneline").await;
    assert!(stdout_of(&r).contains("first"), "{r}");
    // The sandbox's own git rule and the profile's combine (issue 49): both deny.
    let r = s.run("git push --force origin").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let r = s.run("git push --mirror origin").await;
    assert_eq!(
        r["code"], "POLICY_DENIED",
        "the profile's rule holds beside the operator's: {r}"
    );
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["profiles"][0]["name"], "git", "{d}");
}

/// The environment a command sees holds what the policy and its profiles name, and nothing
/// else of the server's.
#[tokio::test(flavor = "multi_thread")]
async fn env_passthrough_shows_only_what_was_named() {
    let sb = Sandbox::allowing(&["env"], "timeout_seconds = 10");
    in_terminal_table(
        &sb,
        "[terminal.env]\npass = [\"PASSED_ON\", \"NOT_SET_ANYWHERE\"]\nset = { FIXED = \"1\" }",
    );
    let s = super::support::Session::start(&sb.policy, |c| {
        c.env("PASSED_ON", "yes").env("KEPT_BACK", "no");
    })
    .await;
    let r = s.run("env").await;
    let out = stdout_of(&r);
    assert!(
        out.contains("PASSED_ON=yes\n") && out.contains("FIXED=1\n"),
        "{out}"
    );
    assert!(
        !out.contains("KEPT_BACK") && !out.contains("NOT_SET_ANYWHERE"),
        "{out}"
    );
}

fn policy_check(sb: &Sandbox) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["policy", "check", "--config", sb.policy.to_str().unwrap()])
        .output()
        .unwrap()
}

/// A repository's `.safe-mcp.toml` narrows: it removes a command, adds a deny rule and
/// lowers a limit, and the server says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_project_file_narrows_the_policy() {
    let sb = sandbox();
    sb.write_in_jail(".safe-mcp.toml", "[terminal]\nremove_commands = [\"touch\"]\n[terminal.limits]\ntimeout_seconds = 5\n[[terminal.rules]]\ncommand = \"git\"\ndeny_args = [\"push\"]\nreason = \"this repository is pushed by CI only\"\n");
    let out = policy_check(&sb);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("project file"),
        "{out:?}"
    );
    let s = sb.session().await;
    let r = s.run("touch made.txt").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let r = s.run("git push origin main").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("pushed by CI only"), "{r}");
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["limits"]["timeout_seconds"], 5, "{d}");
    assert_eq!(d["detail"]["project_policy"]["removed"][0], "touch", "{d}");
    let r = s.run("echo still").await;
    assert_eq!(r["detail"]["stdout"], "still\n", "{r}");
}

/// A project file that would widen anything does not load, and the error names the key.
#[test]
fn a_widening_project_file_is_fatal() {
    for (text, key) in [
        (
            "[terminal.allowlist]\ncommands = [\"curl\"]\n",
            "terminal.allowlist",
        ),
        (
            "[terminal.limits]\ntimeout_seconds = 999\n",
            "terminal.limits.timeout_seconds",
        ),
        (
            "[[terminal.rules]]\ncommand = \"sh\"\ndeny_args = [\"x\"]\nallow_interpreter = true\n",
            "terminal.rules[0].allow_interpreter",
        ),
        ("[terminal.sandbox]\nnetwork = true\n", "terminal.sandbox"),
        ("audit_log = \"elsewhere.jsonl\"\n", "audit_log"),
        ("[terminal]\nprofiles = [\"rust\"]\n", "terminal.profiles"),
    ] {
        let sb = sandbox();
        sb.write_in_jail(".safe-mcp.toml", text);
        let out = policy_check(&sb);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}: {out:?}");
        assert!(
            stderr.contains(&format!(".safe-mcp.toml: {key}")) && stderr.contains("only narrow"),
            "{text}: {stderr}"
        );
    }
    // A symlink in its place is refused, not followed.
    let sb = sandbox();
    let elsewhere = sb.base().join("elsewhere.toml");
    std::fs::write(&elsewhere, "[terminal]\nremove_commands = [\"ls\"]\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, sb.jail.join(".safe-mcp.toml")).unwrap();
    let out = policy_check(&sb);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symlink is refused"),
        "{out:?}"
    );
}

/// A git worktree in the jail whose git directory is outside it: refused with the remedy,
/// and working once the main repository is a write path, in the private view too.
#[tokio::test(flavor = "multi_thread")]
async fn a_worktree_needs_its_gitdir_in_write_paths() {
    let git = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    for writable in [false, true] {
        let sb = sandbox();
        let main = sb.base().join("main");
        std::fs::create_dir(&main).unwrap();
        git(&main, &["init", "-q", "-b", "main"]);
        std::fs::write(main.join("a.txt"), "a\n").unwrap();
        git(&main, &["add", "a.txt"]);
        git(&main, &["commit", "-q", "-m", "first"]);
        git(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                sb.jail.join("wt").to_str().unwrap(),
            ],
        );
        if writable {
            in_terminal_table(&sb, &format!("write_paths = [\"{}\"]", main.display()));
        }
        let s = sb.session().await;
        let r = s.run_in("wt", "git status --short --branch").await;
        if writable {
            assert_eq!(r["code"], "OK", "{r}");
            assert!(stdout_of(&r).starts_with("## wt"), "{r}");
        } else {
            assert_eq!(r["code"], "PATH_ESCAPE", "{r}");
            assert!(reason_of(&r).contains("write_paths"), "{r}");
        }
    }
}

/// The first hour with `init`: `safe-mcp init --profile rust --profile git --jail proj`
/// writes a policy that, unedited, lets an MCP client build, test, diff and commit the
/// project; a second init refuses to overwrite it.
#[tokio::test(flavor = "multi_thread")]
async fn init_writes_a_policy_that_builds_tests_and_commits() {
    if !super::support::installed("cargo") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let proj = base.join("proj");
    cargo_project(&proj);
    let policy = base.join("conf/proj.toml");
    let init = |extra: &[&str]| {
        std::process::Command::new(BIN)
            .args(["init", "--profile", "rust", "--profile", "git", "--jail"])
            .arg(&proj)
            .arg("--output")
            .arg(&policy)
            .args(extra)
            .env("XDG_CACHE_HOME", base.join("cache"))
            .output()
            .unwrap()
    };
    let out = init(&[]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"mcpServers\"") && stdout.contains("terminal"),
        "{stdout}"
    );
    let again = init(&[]);
    assert!(!again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("never overwrites"),
        "{again:?}"
    );

    let (path, home) = (
        std::env::var("PATH").unwrap_or_default(),
        std::env::var("HOME").unwrap_or_default(),
    );
    let cache = base.join("cache");
    let s = super::support::Session::start(&policy, |c| {
        c.env("PATH", path)
            .env("HOME", home)
            .env("XDG_CACHE_HOME", cache);
    })
    .await;
    for command in [
        "cargo build --offline",
        "cargo test --offline",
        "git init -q -b main",
        "git add .gitignore Cargo.toml src/lib.rs",
        "git commit -q -m start",
    ] {
        let r = s.run_expecting(command, "OK").await;
        assert_eq!(r["detail"]["exit_code"], 0, "{command}: {r}");
    }
    std::fs::write(proj.join("src/lib.rs"), "pub fn two() -> u32 { 1 + 1 }\n").unwrap();
    let r = s.run("git diff").await;
    assert!(
        stdout_of(&r).contains("+pub fn two() -> u32 { 1 + 1 }"),
        "{r}"
    );
    let r = s.run("git log --oneline").await;
    assert!(stdout_of(&r).contains("start"), "{r}");
}

/// The rust profile tells cargo to work offline only when commands have no network: with
/// egress on, cargo must be free to fetch through the proxy from the names allowed.
#[tokio::test(flavor = "multi_thread")]
async fn the_rust_profile_is_offline_only_without_network() {
    let probe = json!({"command": ["sh", "-c", "echo ${CARGO_NET_OFFLINE-unset}"]});
    let sb = with_profiles(&["rust"]);
    let s = session_with_toolchains(&sb).await;
    let r = s.run_with(probe.clone()).await;
    assert_eq!(r["detail"]["stdout"], "true\n", "{r}");
    drop(s);

    let sb = with_profiles(&["rust"]);
    sb.append_policy("[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"index.crates.io\", \"static.crates.io\"]");
    let s = session_with_toolchains(&sb).await;
    let r = s.run_with(probe).await;
    if r["code"] == "SANDBOX_UNAVAILABLE" {
        super::support::skip(format!(
            "skipping the egress half: no egress tier here (no namespaces and Landlock ABI < 4): {r}"
        ));
        return;
    }
    assert_eq!(r["detail"]["stdout"], "unset\n", "{r}");
}
