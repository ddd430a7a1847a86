//! The exec allowlist (issue 35): Landlock grants execute only on the allowlisted programs,
//! their helpers and what those need to start, so nothing a command starts escapes the
//! list, over real MCP sessions with real toolchains.

use serde_json::{Value, json};

use super::builders::{git_env, stderr, stdout};
use super::support::{
    SETPRIV_NEEDS_ROOT, Sandbox, Session, host_git, installed as present, reason_of, root_or_skip,
    stderr_of, stdout_of,
};

/// A sandbox allowing `allow` with `profiles`, a cache of its own and `sandbox` lines in
/// `[terminal.sandbox]`.
fn sandbox(allow: &[&str], profiles: &[&str], sandbox: &str) -> Sandbox {
    Sandbox::builder()
        .allow(allow)
        .roomy(120)
        .sandbox(sandbox)
        .profiles(profiles, "cache")
        .build()
}

/// A session whose server has this test's PATH and HOME, where the profiles find their
/// toolchains.
pub(super) async fn session(sb: &Sandbox) -> Session {
    let path = std::env::var("PATH").unwrap_or_default();
    let home = std::env::var("HOME").unwrap_or_default();
    Session::start(&sb.policy, |c| {
        c.env("PATH", path).env("HOME", home);
    })
    .await
}

/// Where cargo is installed: a sandbox allowing `echo` under the rust profile, with `extra`
/// TOML, whose jail holds `files` (path, text); `None` (the test skipped) where it is not.
fn cargo_sandbox(extra: &str, files: &[(&str, &str)]) -> Option<Sandbox> {
    if !present("cargo") {
        return None;
    }
    let sb = sandbox(&["echo"], &["rust"], extra);
    for (path, text) in files {
        put(&sb, path, text);
    }
    Some(sb)
}

/// Writes `text` at `path` in the jail, with its directories.
fn put(sb: &Sandbox, path: &str, text: &str) {
    let path = sb.jail.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A Python script that tries each program and prints `name ran CODE` or `name refused
/// ERRNO` (or `name missing`).
const TRY_EACH: &str = r#"
import subprocess, sys
for argv in (["rm", "-rf", "src"], ["curl", "--version"], ["sh", "-c", "echo from-sh"], ["ls"]):
    try:
        r = subprocess.run(argv, capture_output=True)
        print(argv[0], "ran", r.returncode)
    except PermissionError as e:
        print(argv[0], "refused", e.errno)
    except FileNotFoundError:
        print(argv[0], "missing")
subprocess.run(["rm", "-rf", "src"])
"#;

fn python(script: &str) -> Value {
    json!({"command": ["python3", "-c", script]})
}

/// With the python profile, what a script starts is held to the list: `rm` and `curl`
/// (denylisted) and `sh` (not listed) fail at exec while the allowlisted `ls` runs; the
/// result names the refused program and the key that would allow it. With the list off the
/// same script deletes `src`: it would have run.
#[tokio::test(flavor = "multi_thread")]
async fn what_an_interpreter_starts_is_held_to_the_allowlist() {
    if !present("python3") {
        return;
    }
    let sb = sandbox(&["echo", "ls"], &["python"], "");
    std::fs::create_dir_all(sb.jail.join("src")).unwrap();
    sb.write_in_jail("src/main.py", "print(1)\n");
    let s = session(&sb).await;
    let r = s.run_with(python(TRY_EACH)).await;
    assert_eq!(r["code"], "OK", "{r}");
    let out = stdout_of(&r);
    assert!(out.contains("rm refused 13"), "{out}");
    assert!(out.contains("sh refused 13"), "{out}");
    assert!(out.contains("ls ran 0"), "{out}");
    if std::path::Path::new("/usr/bin/curl").exists() {
        assert!(out.contains("curl refused 13"), "{out}");
    }
    assert!(sb.jail.join("src/main.py").exists(), "rm ran: {out}");

    // A run that fails on it says which program and what key would allow it.
    let r = s
        .run_with(python(
            "import subprocess; subprocess.run(['rm', '-rf', 'src'])",
        ))
        .await;
    let reason = reason_of(&r);
    assert_eq!(r["detail"]["not_executable"], json!(["rm"]), "{r}");
    assert!(
        reason.contains("`rm` could not be executed") && reason.contains("inferred"),
        "{reason}"
    );
    assert!(reason.contains("[terminal.allowlist]"), "{reason}");
    // The model reads it in the text block, under the exit line.
    let raw = s
        .raw_call(
            "run_command",
            python("import subprocess; subprocess.run(['rm', '-rf', 'src'])"),
        )
        .await;
    let text = raw.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default();
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("note: it looks like `rm` could not be executed")),
        "{text}"
    );

    // explain_command lists what python3 may execute: itself and its loader, not rm.
    let e = s.explain("python3 -c pass").await;
    let may: Vec<&str> = e["detail"]["may_execute"]
        .as_array()
        .unwrap_or_else(|| panic!("{e}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(may.iter().any(|p| p.contains("python3")), "{may:?}");
    assert!(may.iter().any(|p| p.contains("ld-linux")), "{may:?}");
    assert!(!may.iter().any(|p| p.ends_with("/rm")), "{may:?}");
    let d = s.call("describe_policy", json!({})).await;
    let line = d["detail"]["confinement"].as_str().unwrap();
    assert!(line.contains("only allowlisted programs"), "{line}");
    drop(s);

    // The same script with the list off: rm runs (the denylist binds the model's own
    // commands only).
    let off = sandbox(&["echo", "ls"], &["python"], "exec_allowlist = false");
    std::fs::create_dir_all(off.jail.join("src")).unwrap();
    let s = session(&off).await;
    let r = s.run_with(python(TRY_EACH)).await;
    let out = stdout_of(&r);
    assert!(out.contains("rm ran 0"), "{r}");
    assert!(!off.jail.join("src").exists(), "{out}");
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(
        d["detail"]["confinement"]["landlock"]["execute"]["mode"], "read-paths",
        "{d}"
    );
}

/// A crate whose build script runs `curl`: the build fails at that exec. One with a build
/// script and a proc macro (a path dependency, offline) builds and tests.
#[tokio::test(flavor = "multi_thread")]
async fn the_rust_profile_builds_proc_macros_and_build_scripts_but_not_curl() {
    let files = [
        (
            "ws/Cargo.toml",
            "[workspace]\nmembers = [\"app\", \"answer\"]\nresolver = \"2\"\n",
        ),
        (
            "ws/answer/Cargo.toml",
            "[package]\nname = \"answer\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
        ),
        (
            "ws/answer/src/lib.rs",
            "use proc_macro::TokenStream;\n#[proc_macro]\npub fn answer(_: TokenStream) -> TokenStream { \"42\".parse().unwrap() }\n",
        ),
        (
            "ws/app/Cargo.toml",
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nanswer = { path = \"../answer\" }\n",
        ),
        (
            "ws/app/build.rs",
            "fn main() { println!(\"cargo:rustc-env=BUILT_BY=build-script\"); }\n",
        ),
        (
            "ws/app/src/lib.rs",
            "/// ```\n/// assert_eq!(app::value(), 42);\n/// ```\npub fn value() -> u32 { answer::answer!() }\npub const BY: &str = env!(\"BUILT_BY\");\n#[test]\nfn macro_and_script() { assert_eq!(value(), 42); assert_eq!(BY, \"build-script\"); }\n",
        ),
        (
            "bad/Cargo.toml",
            "[package]\nname = \"bad\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "bad/build.rs",
            "fn main() { let r = std::process::Command::new(\"curl\").arg(\"--version\").status(); println!(\"cargo:warning=curl: {r:?}\"); if r.is_err() { panic!(\"curl did not start: {r:?}\"); } }\n",
        ),
        ("bad/src/lib.rs", "pub fn f() {}\n"),
    ];
    let Some(sb) = cargo_sandbox("", &files) else {
        return;
    };
    let s = session(&sb).await;
    let r = s.run_in("ws", "cargo test --offline").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(
        stdout_of(&r).contains("test macro_and_script ... ok"),
        "{r}"
    );
    // The doctest: rustdoc compiles, links and runs it from the call's TMPDIR.
    assert!(
        stdout_of(&r).contains("src/lib.rs - value (line 1) ... ok"),
        "{r}"
    );
    if std::path::Path::new("/usr/bin/curl").exists() {
        let r = s.run_in("bad", "cargo build --offline").await;
        assert_ne!(r["detail"]["exit_code"], 0, "{r}");
        let stderr = stderr_of(&r);
        assert!(stderr.contains("Permission denied"), "{stderr}");
        assert_eq!(r["detail"]["not_executable"], json!(["curl"]), "{r}");
    }
}

/// git with its helpers: clone, fetch and push to a local remote (git-upload-pack and
/// git-receive-pack, through sh) under the git profile.
#[tokio::test(flavor = "multi_thread")]
async fn git_clones_fetches_and_pushes_a_local_remote() {
    if !present("git") {
        return;
    }
    let sb = sandbox(&["echo"], &["git"], "");
    sb.append_policy(&git_env("t", "t@example.com"));
    let s = session(&sb).await;
    let git = |cmd: &str, cwd: &str| {
        let args = json!({"command": cmd, "cwd": cwd});
        let s = &s;
        async move { s.run_with(args).await }
    };
    for (cmd, cwd) in [
        ("git init --bare -b main remote.git", "."),
        ("git clone --no-local remote.git one", "."),
        ("git commit --allow-empty -m first", "one"),
        ("git push origin HEAD:main", "one"),
        ("git clone --no-local remote.git two", "."),
        ("git commit --allow-empty -m second", "two"),
        ("git push origin HEAD:main", "two"),
        ("git fetch origin", "one"),
        ("git log --oneline origin/main", "one"),
    ] {
        let r = git(cmd, cwd).await;
        assert_eq!(r["code"], "OK", "{cmd}: {r}");
        assert_eq!(r["detail"]["exit_code"], 0, "{cmd}: {r}");
        if cmd.starts_with("git log") {
            let out = stdout_of(&r);
            assert!(out.contains("second") && out.contains("first"), "{out}");
        }
    }
}

/// The same list binds a server run by an unprivileged user (uid 65534, in a user namespace
/// of its own), with the system's python3.
#[tokio::test(flavor = "multi_thread")]
async fn an_unprivileged_server_holds_the_same_list() {
    if !root_or_skip(SETPRIV_NEEDS_ROOT) {
        return;
    }
    let sb = Sandbox::builder()
        .allow(&["python3", "ls", "git"])
        .roomy(20)
        .extra("[terminal.audit]\nexec_log = true\n")
        .build();
    std::fs::create_dir_all(sb.jail.join("src")).unwrap();
    sb.give_to(65534);
    std::os::unix::fs::chown(sb.jail.join("src"), Some(65534), Some(65534)).unwrap();
    let s = sb.session_as(65534).await;
    let r = s.run_with(python(TRY_EACH)).await;
    let out = stdout(&r);
    assert!(out.contains("rm refused 13"), "{r}");
    assert!(out.contains("sh refused 13"), "{r}");
    assert!(out.contains("ls ran 0"), "{r}");
    assert!(sb.jail.join("src").exists());
    assert_eq!(r["detail"]["not_executable"], json!(["rm"]), "{r}");
    // A nested call reaches this server too: git (ruled by the sandbox's force-push rule)
    // from a script runs through it, and its forced push is refused.
    let jail = sb.jail.display().to_string();
    let version = s.run_with(nested_git(&jail, &["--version"])).await;
    let out = stdout(&version);
    assert!(
        out.contains("git version") && out.contains("exit 0"),
        "{version}"
    );
    let forced = s.run_with(nested_git(&jail, &["push", "--force"])).await;
    assert!(stdout(&forced).contains("exit 126"), "{forced}");
    // The exec log sees into the server's user namespace too: python3, then ls.
    drop(s);
    let outcome = sb
        .find_record(|r| r["kind"] == "outcome" && r["tool"] == "run_command")
        .unwrap();
    let argv0: Vec<&str> = outcome["executed"]["programs"]
        .as_array()
        .unwrap_or_else(|| panic!("{outcome}"))
        .iter()
        .map(|p| p["argv0"].as_str().unwrap())
        .collect();
    assert_eq!(argv0.first(), Some(&"python3"), "{argv0:?}");
    assert!(argv0.contains(&"ls"), "{argv0:?}");
}

/// A jail with `remote.git` (bare, one commit on main) and `work`, its clone with one commit
/// more, for a nested push.
fn with_remote(sb: &Sandbox) -> String {
    host_git(&sb.jail, &["init", "-q", "--bare", "remote.git"]);
    host_git(&sb.jail, &["clone", "-q", "remote.git", "work"]);
    let work = sb.jail.join("work");
    host_git(&work, &["commit", "-q", "--allow-empty", "-m", "first"]);
    host_git(&work, &["push", "-q", "origin", "HEAD:main"]);
    host_git(&work, &["commit", "-q", "--allow-empty", "-m", "second"]);
    work.display().to_string()
}

/// The remote's main, as the host's git reads it.
fn remote_head(sb: &Sandbox) -> String {
    let out = std::process::Command::new("git")
        .args(["--git-dir", "remote.git", "log", "--format=%s", "main"])
        .current_dir(&sb.jail)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A Python script that runs `git <args>` from `work` and prints what it exited with.
fn nested_git(work: &str, args: &[&str]) -> Value {
    let argv: Vec<String> = std::iter::once("git")
        .chain(args.iter().copied())
        .map(|a| format!("{a:?}"))
        .collect();
    let script = format!(
        "import subprocess, sys\nr = subprocess.run([{}], cwd={work:?})\nprint('exit', r.returncode)\n",
        argv.join(", ")
    );
    json!({"command": ["python3", "-c", script]})
}

/// Item 2: a program with argument rules (git: `push --force` denied, `push` confirmed) is
/// reached from inside a command only through the server. A Python script's `git push
/// --force` meets the deny rule, its `git push` waits for the person (the client's form) and
/// runs once approved, and both are recorded as nested calls of the script's call. With the
/// list off, the same forced push goes through: what the shim closes.
#[tokio::test(flavor = "multi_thread")]
async fn nested_calls_meet_the_rules_and_approvals_of_a_call() {
    use super::approvals::{Client, Reply};
    if !present("git") || !present("python3") {
        return;
    }
    let rules = "[[terminal.rules]]\ncommand = \"git\"\nconfirm_args = [\"push\"]\nreason = \"a push needs a person\"\n";
    // The python and git profiles; the sandbox's own rule refuses `push --force`.
    let sb = sandbox(
        &["echo", "git", "find"],
        &["python", "git"],
        &format!("\n{rules}"),
    );
    let work = with_remote(&sb);
    let c = Client::start(&sb, Reply::Accept(true), true, false).await;

    let forced = c
        .run_with(nested_git(
            &work,
            &["push", "--force", "origin", "HEAD:main"],
        ))
        .await;
    let stderr = stderr(&forced);
    assert!(stdout(&forced).contains("exit 126"), "{forced}");
    assert!(
        stderr.contains("`git` was not run (POLICY_DENIED)"),
        "{stderr}"
    );
    assert!(stderr.contains("push --force"), "{stderr}");
    assert_eq!(remote_head(&sb).lines().next(), Some("first"));
    assert!(c.asked().is_empty(), "a denied push asks nobody");
    // Started by another tool's escape (find -exec, by name on PATH), it meets the same rule.
    let script = format!(
        "import subprocess\nsubprocess.run(['find', '.', '-maxdepth', '0', '-exec', 'git', 'push', '--force', 'origin', 'HEAD:main', ';'], cwd={work:?})\n"
    );
    let escaped = c.py(script).await;
    let stderr = super::builders::stderr(&escaped);
    assert!(
        stderr.contains("`git` was not run (POLICY_DENIED)"),
        "{escaped}"
    );
    assert_eq!(remote_head(&sb).lines().next(), Some("first"));

    let pushed = c
        .run_with(nested_git(&work, &["push", "origin", "HEAD:main"]))
        .await;
    assert!(stdout(&pushed).contains("exit 0"), "{pushed}");
    assert_eq!(c.asked().len(), 1, "the person was asked once");
    assert_eq!(remote_head(&sb).lines().next(), Some("second"));

    // The trail: each nested call is an attempt of its own, naming the script's call.
    let records = sb.audit_records();
    let scripts: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "attempt" && r["argv"][0][0] == "python3")
        .collect();
    let nested: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "attempt" && r["argv"][0][0] == "git")
        .collect();
    assert_eq!(nested.len(), 3, "{nested:?}");
    for (k, verdict) in ["POLICY_DENIED", "POLICY_DENIED", "OK"].iter().enumerate() {
        assert_eq!(nested[k]["parent"], scripts[k]["call"], "{nested:?}");
        assert_eq!(nested[k]["verdict"], *verdict, "{:?}", nested[k]);
    }
    assert_eq!(
        nested[2]["approval"]["decision"], "approved",
        "{:?}",
        nested[2]
    );

    the_nested_socket_holds(&c, &work).await;
    drop(c);

    // On MCP 2026-07-28 a call is approved in its own rounds, which a nested call has none
    // of: it is refused with what to do instead, and the script's call ends as it would.
    let newer = Client::start_newer(&sb, Reply::Accept(true), true).await;
    let r = newer
        .run_with(nested_git(&work, &["push", "origin", "HEAD:main"]))
        .await;
    let stderr = super::builders::stderr(&r);
    assert!(stdout(&r).contains("exit 126"), "{r}");
    assert!(stderr.contains("Run it as a call of its own"), "{stderr}");
    drop(newer);

    without_the_list_a_forced_push_goes_through(rules).await;
}

/// The socket takes one request's three descriptors and no more: a client that sends more
/// (on a second message) is cut off unanswered, and the next nested call is served as
/// before. A name that is not a shim's is refused; git by its path is not executable.
async fn the_nested_socket_holds(c: &super::approvals::Client, work: &str) {
    let flood = r#"
import os, socket, array, subprocess
token, path = os.environ['SAFE_MCP_NESTED'].split('@', 1)
import json
fds = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [0, 1, 2]))]
request = json.dumps({'token': token, 'argv': ['git', '--version'], 'cwd': WORK}).encode() + b'\n'
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.sendmsg([b' '], fds)
s.sendmsg([request], fds)
s.settimeout(10)
print('answer', repr(s.recv(4096)))
r = subprocess.run(['git', '--version'], cwd=WORK)
print('exit', r.returncode)
shim = os.path.join(os.path.dirname(path), 'bin', 'git')
r = subprocess.run(['ls'], executable=shim, cwd=WORK)
print('ls exit', r.returncode)
"#
    .replace("WORK", &format!("{work:?}"));
    let flooded = c.py(flood).await;
    let out = stdout(&flooded);
    let stderr = stderr(&flooded);
    assert!(
        out.contains("answer b''"),
        "descriptors on a second message must end the connection unanswered: {flooded}"
    );
    assert!(out.contains("exit 0"), "{flooded}");
    assert!(out.contains("ls exit 126"), "{flooded}");
    assert!(
        stderr.contains("only the programs with argument rules"),
        "{stderr}"
    );

    // git itself by its path, not its name, is not executable in the script's tree.
    let git = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let git = String::from_utf8_lossy(&git.stdout).trim().to_owned();
    let direct = c
        .py(format!(
            "import subprocess; subprocess.run([{git:?}, 'status'])"
        ))
        .await;
    assert!(
        super::builders::stderr(&direct).contains("Permission denied"),
        "{direct}"
    );
}

/// The control: with the list off nothing routes git, and the forced push goes through.
async fn without_the_list_a_forced_push_goes_through(rules: &str) {
    use super::approvals::{Client, Reply};
    let off = sandbox(
        &["echo", "git"],
        &["python", "git"],
        &format!("exec_allowlist = false\n{rules}"),
    );
    let work = with_remote(&off);
    host_git(
        std::path::Path::new(&work),
        &[
            "commit",
            "-q",
            "--amend",
            "--allow-empty",
            "-m",
            "rewritten",
        ],
    );
    let c = Client::start(&off, Reply::Accept(true), true, false).await;
    let forced = c
        .run_with(nested_git(
            &work,
            &["push", "--force", "-q", "origin", "HEAD:main"],
        ))
        .await;
    assert!(stdout(&forced).contains("exit 0"), "{forced}");
    assert_eq!(remote_head(&off).lines().next(), Some("rewritten"));
}

/// Item 4: with `[terminal.audit] exec_log = true` each call's outcome record lists what its
/// tree executed (pid in its namespace, path, argv[0]): for a build, cargo, the compiler,
/// the linker and the build script. Without it, the record has no list.
#[tokio::test(flavor = "multi_thread")]
async fn the_exec_log_lists_a_builds_compiler_and_linker() {
    let files = [
        (
            "app/Cargo.toml",
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("app/build.rs", "fn main() {}\n"),
        ("app/src/main.rs", "fn main() { println!(\"hi\"); }\n"),
    ];
    let Some(sb) = cargo_sandbox("\n[terminal.audit]\nexec_log = true", &files) else {
        return;
    };
    let s = session(&sb).await;
    let r = s.run_in("app", "cargo build --offline").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    let e = s.run("echo done").await;
    assert_eq!(e["code"], "OK", "{e}");
    drop(s);
    let outcomes: Vec<Value> = sb
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "outcome" && r["tool"] == "run_command")
        .collect();
    let programs = outcomes[0]["executed"]["programs"]
        .as_array()
        .unwrap_or_else(|| panic!("{:?}", outcomes[0]))
        .clone();
    let paths: Vec<String> = programs
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_owned())
        .collect();
    let has = |what: &dyn Fn(&str) -> bool| paths.iter().any(|p| what(p));
    assert!(has(&|p| p.ends_with("/cargo")), "{paths:?}");
    assert!(has(&|p| p.ends_with("/rustc")), "{paths:?}");
    assert!(has(&|p| p.ends_with("/cc")), "the linker driver: {paths:?}");
    assert!(
        has(&|p| p.contains("collect2") || p.ends_with("ld") || p.contains("lld")),
        "the linker: {paths:?}"
    );
    assert!(has(&|p| p.contains("build-script-build")), "{paths:?}");
    assert!(
        programs
            .iter()
            .all(|p| p["pid"].as_i64().is_some_and(|n| n > 0))
    );
    // The second call ran echo alone.
    let echo = outcomes[1]["executed"]["programs"].as_array().unwrap();
    assert_eq!(echo.len(), 1, "{echo:?}");
    assert!(
        echo[0]["path"].as_str().unwrap().ends_with("/echo"),
        "{echo:?}"
    );
    assert_eq!(echo[0]["argv0"], "echo");

    // Without the key, no list.
    let plain = sandbox(&["echo"], &[], "");
    let s = session(&plain).await;
    s.run("echo hi").await;
    drop(s);
    let outcome = plain
        .find_record(|r| r["kind"] == "outcome" && r["tool"] == "run_command")
        .unwrap();
    assert!(outcome.get("executed").is_none(), "{outcome}");
}

/// Item 5: git's HTTPS helper runs, through the proxy. `git ls-remote` of a name the
/// network policy does not allow reaches the proxy through `git-remote-https` (its curl says
/// the CONNECT was refused), never fails to start it.
#[tokio::test(flavor = "multi_thread")]
async fn git_starts_its_https_helper_through_the_proxy() {
    if !present("git") {
        return;
    }
    let sb = sandbox(
        &["echo"],
        &["git"],
        "\n[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"example.com\"]",
    );
    let s = session(&sb).await;
    let r = s
        .run("git ls-remote https://denied.example.org/repo.git")
        .await;
    let stderr = stderr(&r);
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(stderr.contains("CONNECT") && stderr.contains("403"), "{r}");
    assert!(!stderr.contains("Permission denied"), "{r}");
    let refused = r["detail"]["network_refused"][0]
        .as_str()
        .unwrap_or_default();
    assert!(refused.contains("denied.example.org"), "{r}");
}

/// Without a private view (`namespaces = "off"`, as where no namespace can be made) the same
/// list binds, and a ruled program is still reached through the server: the shim and its
/// socket are on the host's filesystem then.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_view_holds_the_same_list_and_routes_nested_calls() {
    if !present("python3") || !present("git") {
        return;
    }
    let sb = sandbox(&["echo", "ls", "git"], &["python"], "namespaces = \"off\"");
    std::fs::create_dir_all(sb.jail.join("src")).unwrap();
    let s = session(&sb).await;
    let r = s.run_with(python(TRY_EACH)).await;
    let out = stdout(&r);
    assert!(
        out.contains("rm refused 13") && out.contains("ls ran 0"),
        "{r}"
    );
    assert!(sb.jail.join("src").exists(), "{r}");
    let d = s.call("describe_policy", json!({"verbose": true})).await;
    assert_eq!(d["detail"]["confinement"]["view"]["view"], "host", "{d}");
    let jail = sb.jail.display().to_string();
    let forced = s.run_with(nested_git(&jail, &["push", "--force"])).await;
    let stderr = stderr(&forced);
    assert!(
        stderr.contains("`git` was not run (POLICY_DENIED)"),
        "{forced}"
    );
}
