//! The first hour, again (issue 28): `init` as a new user runs it, as root with the real HOME
//! and as an unprivileged user, then the server started exactly as the printed client
//! configuration says, over a real MCP session.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::builders::cargo_project;
use super::support::{
    BIN, Session, assert_failed_saying, detail_str, reason_of, root_or_skip, stdout_of,
};

/// Runs `safe-mcp init` with `args` (as `uid` through setpriv, when given) in `env` only, and
/// returns the client configuration it printed.
fn init(args: &[&str], env: &[(&str, &str)], uid: Option<u32>) -> Value {
    let mut c = super::support::as_user(BIN, uid);
    c.arg("init").args(args).env_clear();
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "init: {out:?}");
    let json = &stdout[stdout.find('{').expect("a client configuration")..];
    // The first JSON document (the mcpServers one); the VS Code one follows it.
    serde_json::Deserializer::from_str(json)
        .into_iter::<Value>()
        .next()
        .unwrap()
        .unwrap()
}

/// `init`'s arguments: `--profile` for each of `profiles`, then `jail` and `output`.
fn with_profiles<'a>(profiles: &[&'a str], jail: &[&'a str], output: &[&'a str]) -> Vec<&'a str> {
    let named = profiles.iter().flat_map(|p| ["--profile", p]);
    named
        .chain(jail.iter().copied())
        .chain(output.iter().copied())
        .collect()
}

/// A session with the server started as `config` (one `mcpServers` entry) says: its command,
/// its args, its env and nothing else.
async fn session_as_configured(config: &Value, uid: Option<u32>) -> Session {
    let server = config["mcpServers"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let env: Vec<(String, String)> = server["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let command = server["command"].as_str().unwrap().to_owned();
    let policy = PathBuf::from(&args[2]);
    Session::start(&policy, move |c| {
        let mut fresh = tokio::process::Command::from(super::support::as_user(&command, uid));
        fresh.args(&args).env_clear().envs(env);
        *c = fresh;
    })
    .await
}

async fn all_succeed(s: &Session, commands: &[&str]) {
    for command in commands {
        let r = s.run_expecting(command, "OK").await;
        assert_eq!(r["detail"]["exit_code"], 0, "{command}: {r}");
    }
}

/// Item 1: root, with its real HOME (`/root`) and nothing else of a shell's environment:
/// `init --profile rust --profile git --profile python --profile node` writes a policy that
/// loads where the client starts the server (the caches beneath root's own home), and that
/// server builds and tests the project (cargo, unittest, npm) and commits it, no hand edit.
#[tokio::test(flavor = "multi_thread")]
async fn init_as_root_with_the_real_home_builds_tests_and_commits() {
    let home = std::env::var("HOME").unwrap_or_default();
    let path = std::env::var("PATH").unwrap_or_default();
    if !rustix::process::geteuid().is_root() || home.is_empty() {
        super::support::skip(
            "skipping: this test is for a root user with a HOME (CI runs as root)",
        );
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let proj = base.join("proj");
    cargo_project(&proj);
    let _caches = super::support::CachesOf(proj.clone());
    let policy = base.join("conf/proj.toml");
    std::fs::write(
        proj.join("test_two.py"),
        "import unittest\nclass T(unittest.TestCase):\n    def test_two(self):\n        self.assertEqual(1 + 1, 2)\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("package.json"),
        r#"{"name": "proj", "version": "1.0.0", "scripts": {"test": "node -e \"console.log('node ok')\""}}"#,
    )
    .unwrap();
    let config = init(
        &with_profiles(
            &["rust", "git", "python", "node"],
            &["--jail", proj.to_str().unwrap()],
            &["--output", policy.to_str().unwrap()],
        ),
        &[("PATH", &path), ("HOME", &home)],
        None,
    );
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(
        text.contains(&format!("cache_dir = \"{home}/.cache/safe-mcp\"")),
        "{text}"
    );
    // Issue 49: a bound on what the jail and the caches hold, in whole GiB, 1 to 16.
    let bound: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("jail_bytes = "))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no jail_bytes in:\n{text}"));
    assert!(
        bound.is_multiple_of(1 << 30) && (1 << 30..=16 << 30).contains(&bound),
        "{bound}"
    );
    let s = session_as_configured(&config, None).await;
    let described = s
        .call("describe_policy", serde_json::json!({"verbose": true}))
        .await;
    assert!(
        described
            .to_string()
            .contains(&format!("\"jail_bytes\":{bound}")),
        "{described}"
    );
    all_succeed(
        &s,
        &[
            "cargo build --offline",
            "cargo test --offline",
            "python3 -m unittest test_two",
            "npm test",
            "git init -q -b main",
            "git add .gitignore Cargo.toml src/lib.rs",
            "git commit -q -m start",
        ],
    )
    .await;
    // The loop a coding agent runs, through the server alone: read, edit, test, diff, commit.
    let r = s
        .call("read_file", serde_json::json!({"path": "src/lib.rs"}))
        .await;
    assert!(
        detail_str(&r, "content").contains("pub fn two() -> u32 { 2 }"),
        "{r}"
    );
    let r = s
        .call(
            "edit_file",
            serde_json::json!({"path": "src/lib.rs", "edits": [{"old_text": "{ 2 }", "new_text": "{ 1 + 1 }"}]}),
        )
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    all_succeed(&s, &["cargo test --offline"]).await;
    let r = s.run("git diff").await;
    assert!(
        stdout_of(&r).contains("+pub fn two() -> u32 { 1 + 1 }"),
        "{r}"
    );
    all_succeed(&s, &["git commit -q -a -m two"]).await;
}

/// Item 1, as an unprivileged user with a home of its own: `init --profile python --profile
/// git`, then the configured server runs the project's tests and commits.
#[tokio::test(flavor = "multi_thread")]
async fn init_as_an_unprivileged_user_tests_and_commits() {
    if !root_or_skip("skipping: the unprivileged user is made by a root test (CI runs as root)") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let (home, proj) = (base.join("home"), base.join("proj"));
    for d in [&base, &home, &proj] {
        std::fs::create_dir_all(d).unwrap();
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    let test = proj.join("test_two.py");
    std::fs::write(
        &test,
        "import unittest\nclass T(unittest.TestCase):\n    def test_two(self):\n        self.assertEqual(1 + 1, 2)\n",
    )
    .unwrap();
    std::os::unix::fs::chown(&test, Some(65534), Some(65534)).unwrap();
    let home_s = home.to_str().unwrap();
    let config = init(
        &with_profiles(&["python", "git"], &["--jail", proj.to_str().unwrap()], &[]),
        &[("PATH", "/usr/bin:/bin"), ("HOME", home_s)],
        Some(65534),
    );
    let s = session_as_configured(&config, Some(65534)).await;
    all_succeed(
        &s,
        &[
            "python3 -m unittest test_two",
            "git init -q -b main",
            "git add test_two.py",
            "git commit -q -m start",
        ],
    )
    .await;
}

/// Items 2 and 3: a glob inside an option's value reaches the program as a shell would pass
/// it (a bare `*.txt` operand is still refused, with the teaching reason); an integral
/// number sent as a float (`2.0`) is a number, a fraction is a clear INVALID_REQUEST.
#[tokio::test(flavor = "multi_thread")]
async fn option_globs_pass_and_integral_floats_are_numbers() {
    let sb = super::support::Sandbox::new("");
    let s = sb.session().await;
    let r = s.run("grep -rn --include=*.txt alpha .").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["stdout"], "./notes.txt:1:alpha\n", "{r}");
    let r = s.run("grep -rn --include=*.rs alpha .").await;
    assert_eq!(
        (r["code"].as_str(), r["detail"]["exit_code"].as_i64()),
        (Some("OK"), Some(1)),
        "{r}"
    );
    let r = s.run("ls *.txt").await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("not expanded"), "{r}");

    let handle = s
        .start_process(serde_json::json!({"command": "echo hi", "timeout_seconds": 10.0}))
        .await;
    let wait = |secs: f64| s.read_process(&handle, serde_json::json!({"wait_seconds": secs}));
    let r = wait(2.0).await;
    assert_eq!(r["code"], "OK", "{r}");
    let r = wait(2.5).await;
    assert_eq!(r["code"], "INVALID_REQUEST", "{r}");
    assert!(reason_of(&r).contains("whole number"), "{r}");
    let r = s
        .run_with(serde_json::json!({"command": "echo x", "timeout_seconds": 5.0}))
        .await;
    assert_eq!(r["detail"]["stdout"], "x\n", "{r}");
}

/// Item 4: a write path can be named in arguments (the kernel lets commands write there);
/// a read path too, by a program that only reads it, and is refused, with the reason, to one
/// that could write it.
#[tokio::test(flavor = "multi_thread")]
async fn write_paths_and_read_paths_can_be_named_in_arguments() {
    let sb =
        super::support::Sandbox::allowing(&["touch", "cat", "ls", "cp"], "timeout_seconds = 10");
    let cache = sb.base().join("cache");
    let docs = sb.base().join("docs");
    std::fs::create_dir(&cache).unwrap();
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("os-release"), "ID=test\n").unwrap();
    let text = std::fs::read_to_string(&sb.policy).unwrap().replacen(
        "jail_root = \"jail\"",
        &format!(
            "jail_root = \"jail\"\nwrite_paths = [\"{}\"]",
            cache.display()
        ),
        1,
    );
    let default_reads: Vec<String> = [
        "/usr",
        "/bin",
        "/lib",
        "/lib64",
        "/etc/ld.so.cache",
        "/dev/null",
    ]
    .iter()
    .map(|p| format!("\"{p}\""))
    .collect();
    let text = format!(
        "{text}\n[terminal.sandbox]\nread_paths = [{}, \"{}\"]\n",
        default_reads.join(", "),
        docs.display()
    );
    std::fs::write(&sb.policy, text).unwrap();
    let s = sb.session().await;
    let r = s.run(&format!("touch {}/made", cache.display())).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(cache.join("made").exists());
    let r = s.run(&format!("ls {}", cache.display())).await;
    assert_eq!(r["detail"]["stdout"], "made\n", "{r}");
    let release = docs.join("os-release");
    let release = release.display();
    let r = s.run(&format!("cat {release}")).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(stdout_of(&r).contains("ID="), "{r}");
    let r = s
        .run(&format!("cp {release} {}/copy", docs.display()))
        .await;
    assert_eq!(r["code"], "PATH_ESCAPE", "{r}");
    assert!(reason_of(&r).contains("read path"), "{r}");
    // The default read paths are what programs need, not what a model names.
    let r = s.run("cat /etc/passwd").await;
    assert_eq!(r["code"], "PATH_ESCAPE", "{r}");
}

/// Item 5: `describe_policy` says where the network goes: the mode and every allowed and
/// denied domain.
#[tokio::test(flavor = "multi_thread")]
async fn describe_policy_names_the_network_and_its_domains() {
    let sb = super::support::Sandbox::new(
        "[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"crates.io\", \"*.github.com\"]\ndeny_domains = [\"gist.github.com\"]\n",
    );
    let s = sb.session().await;
    let d = s
        .call("describe_policy", serde_json::json!({"verbose": true}))
        .await;
    let n = &d["detail"]["network"];
    assert_eq!(n["mode"], "allowlist", "{d}");
    assert_eq!(
        n["allow_domains"],
        serde_json::json!(["crates.io", "*.github.com"]),
        "{n}"
    );
    assert_eq!(
        n["deny_domains"],
        serde_json::json!(["gist.github.com"]),
        "{n}"
    );
}

/// Item 8: a policy `init` writes checks clean (what its profiles chose is noted under them,
/// not warned about); `policy check` makes nothing on disk, not even a cache it then refuses;
/// and it reads `[http.auth]`'s key file as a server would.
#[test]
fn policy_check_of_an_init_policy_is_clean_and_changes_nothing() {
    let home = std::env::var("HOME").unwrap_or_default();
    let path = std::env::var("PATH").unwrap_or_default();
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let (proj, cache) = (base.join("proj"), base.join("cache"));
    std::fs::create_dir_all(&proj).unwrap();
    let policy = base.join("conf/p.toml");
    init(
        &with_profiles(
            &["rust", "git", "python"],
            &["--jail", proj.to_str().unwrap()],
            &["--output", policy.to_str().unwrap()],
        ),
        &[("PATH", &path), ("HOME", &home)],
        None,
    );
    // Point the caches somewhere that does not exist yet.
    let text = std::fs::read_to_string(&policy).unwrap();
    let start = text.find("cache_dir = ").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    let text = format!(
        "{}cache_dir = \"{}\"{}",
        &text[..start],
        cache.display(),
        &text[end..]
    );
    std::fs::write(&policy, &text).unwrap();
    let check = |p: &Path| {
        std::process::Command::new(BIN)
            .args(["policy", "check", "--config"])
            .arg(p)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .output()
            .unwrap()
    };
    let out = check(&policy);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !stdout.contains("warning:"),
        "a policy init writes checks clean: {stdout}"
    );
    assert!(stdout.contains("profile rust chose:"), "{stdout}");
    assert!(!cache.exists(), "policy check made {}", cache.display());
    // A cache it refuses is not made either, and the refusal names the key.
    let refused = base.join("refused.toml");
    std::fs::write(
        &refused,
        text.replace(&cache.display().to_string(), "/var/lib/safe-mcp-x"),
    )
    .unwrap();
    let out = check(&refused);
    assert_failed_saying(&out, "terminal.cache_dir");
    assert!(!Path::new("/var/lib/safe-mcp-x").exists());
    // [http.auth]: a key file that is not there fails the check, as it would fail --http.
    let http = base.join("http.toml");
    std::fs::write(
        &http,
        format!("{text}\n[http.auth]\nmode = \"oauth\"\nissuer = \"https://auth.example\"\naudience = \"https://mcp.example/mcp\"\njwks_file = \"{}/nope.json\"\n", base.display()),
    )
    .unwrap();
    let out = check(&http);
    assert_failed_saying(&out, "jwks_file");
}

/// Item 7: the README's client configuration is what `init` prints (for a user `you`
/// whose project is `~/proj`), line for line: one story in both, for every client.
#[test]
fn the_readme_shows_what_init_prints() {
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    std::fs::create_dir_all(base.join("proj")).unwrap();
    let policy = base.join("conf/proj.toml");
    let out = std::process::Command::new(BIN)
        .args(["init", "--profile", "readonly", "--jail"])
        .arg(base.join("proj"))
        .arg("--output")
        .arg(&policy)
        .env_clear()
        .env("PATH", "/home/you/.cargo/bin:/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/home/you")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout)
        .replace(BIN, "/usr/local/bin/safe-mcp")
        .replace(
            policy.to_str().unwrap(),
            "/home/you/.config/safe-mcp/proj.toml",
        );
    let block = &printed[printed.find("MCP client configuration").unwrap()..];
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    assert!(
        readme.contains(block.trim_end()),
        "the README's client configuration is not what init prints:\n{block}"
    );
    // And the demo points at init too.
    let demo = std::process::Command::new(BIN)
        .arg("demo")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&demo.stdout).contains("safe-mcp init --profile"));
}

/// Issue 37: `terminal --jail DIR`, the way a bundle or a registry entry starts the server
/// with nothing but a directory. As root with the real HOME (the caches beneath it), the
/// first start writes init's policy for DIR at the default place and serves it over a real
/// session; the next start serves the same file unchanged; a second project of the same
/// name is refused rather than served the first one's policy; and --jail beside --config is
/// refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_jail_alone_starts_the_server_with_the_policy_init_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let jail = tmp.path().join("proj");
    std::fs::create_dir_all(&jail).unwrap();
    let _caches = super::support::CachesOf(jail.clone());
    let config_home = tmp.path().join("config");
    let home = std::env::var("HOME").unwrap();
    let path = std::env::var("PATH").unwrap();
    let env = [
        ("HOME", home.as_str()),
        ("PATH", path.as_str()),
        ("XDG_CONFIG_HOME", config_home.to_str().unwrap()),
    ];
    let policy = config_home.join("safe-mcp/proj.toml");
    let start = |jail: &Path| {
        let (jail, env) = (jail.to_path_buf(), env.map(|(k, v)| (k, v.to_owned())));
        move |c: &mut tokio::process::Command| {
            let mut fresh = tokio::process::Command::new(BIN);
            fresh.arg("terminal").arg("--jail").arg(&jail).env_clear();
            fresh.envs(env);
            *c = fresh;
        }
    };

    let s = Session::start(&policy, start(&jail)).await;
    let r = s.run("echo hello").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["stdout"], "hello\n", "{r}");
    let written = std::fs::read_to_string(&policy).unwrap();
    let canonical = std::fs::canonicalize(&jail).unwrap();
    assert!(
        written.contains(&format!("jail_root = {:?}", canonical.to_str().unwrap())),
        "{written}"
    );
    drop(s);

    let s = Session::start(&policy, start(&jail)).await;
    assert_eq!(s.run("echo again").await["code"], "OK");
    drop(s);
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), written);

    let other = tmp.path().join("elsewhere/proj");
    std::fs::create_dir_all(&other).unwrap();
    let out = super::cli::run(&["terminal", "--jail", other.to_str().unwrap()], &env);
    super::cli::assert_fatal(&out, "is the policy of another jail");
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), written);

    let out = super::cli::run(
        &[
            "terminal",
            "--jail",
            jail.to_str().unwrap(),
            "--config",
            policy.to_str().unwrap(),
        ],
        &env,
    );
    super::cli::assert_fatal(&out, "--jail and a policy file");
    let missing = tmp.path().join("missing");
    let out = super::cli::run(&["terminal", "--jail", missing.to_str().unwrap()], &env);
    super::cli::assert_fatal(&out, "not an existing directory");
}

/// Issue 50, item 5: two projects `init`ed on one machine get their own server names, their
/// own trails and so their own approval desks: both servers run at once, each with a desk.
#[tokio::test(flavor = "multi_thread")]
async fn two_projects_on_one_machine_do_not_collide() {
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let home = base.join("home");
    let mut printed = Vec::new();
    let mut policies = Vec::new();
    for project in ["alpha", "beta"] {
        std::fs::create_dir_all(base.join(project)).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let out = std::process::Command::new(BIN)
            .args(["init", "--profile", "readonly", "--jail"])
            .arg(base.join(project))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        printed.push(String::from_utf8_lossy(&out.stdout).into_owned());
        policies.push(home.join(format!(".config/safe-mcp/{project}.toml")));
    }
    for (out, project) in printed.iter().zip(["alpha", "beta"]) {
        let add = format!("claude mcp add --scope user safe-terminal-{project} ");
        assert!(out.contains(&add), "{out}");
    }
    let mut sessions = Vec::new();
    for policy in &policies {
        let home = home.clone();
        sessions.push(
            super::support::Session::start(policy, move |c| {
                c.env("PATH", std::env::var("PATH").unwrap_or_default())
                    .env("HOME", home);
            })
            .await,
        );
    }
    for s in &sessions {
        assert_eq!(s.run("ls").await["code"], "OK");
    }
    for (policy, project) in policies.iter().zip(["alpha", "beta"]) {
        let trail = policy.with_file_name(format!("{project}.audit.jsonl"));
        let desk = policy.with_file_name(format!("{project}.audit.jsonl.approvals.sock"));
        assert!(
            super::support::eventually(10, || trail.exists() && desk.exists()).await,
            "{project}: its own trail and desk"
        );
    }
}
