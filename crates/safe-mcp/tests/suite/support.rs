//! Shared test support: a seeded sandbox with a policy, and a real MCP session to the binary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_safe-mcp");

/// A temporary directory holding `jail/`, `policy.toml` and the audit trail.
pub struct Sandbox {
    _dir: tempfile::TempDir,
    pub jail: PathBuf,
    pub policy: PathBuf,
    pub audit: PathBuf,
}

/// A test's jail is gone when its sandbox is: so are the profile caches a server made for it
/// beneath the real HOME (each names its jail in `jail`), which would otherwise wait for the
/// next server's start to be removed.
impl Drop for Sandbox {
    fn drop(&mut self) {
        forget_caches(&self.jail);
    }
}

/// For a test's own jail outside a [`Sandbox`]: its caches go when this does.
pub struct CachesOf(pub PathBuf);

impl Drop for CachesOf {
    fn drop(&mut self) {
        forget_caches(&self.0);
    }
}

/// Removes the profile caches beneath `$HOME/.cache/safe-mcp/jails` that name `jail`.
pub fn forget_caches(jail: &Path) {
    let (Some(home), Ok(jail)) = (std::env::var_os("HOME"), std::fs::canonicalize(jail)) else {
        return;
    };
    let jails = Path::new(&home).join(".cache/safe-mcp/jails");
    for dir in std::fs::read_dir(jails).into_iter().flatten().flatten() {
        let named = std::fs::read(dir.path().join("jail")).unwrap_or_default();
        if named == jail.as_os_str().as_encoded_bytes() {
            let _ = std::fs::remove_dir_all(dir.path());
        }
    }
}

/// The arguments of a `run_command` (or `start_process`) of `sh -c script`.
pub fn sh_call(script: &str) -> Value {
    serde_json::json!({"command": ["sh", "-c", script]})
}

/// The arguments of a `run_command` (or `start_process`) of `python3 -c program`.
pub fn py_call(program: &str) -> Value {
    serde_json::json!({"command": ["python3", "-c", program]})
}

/// A result's `detail.stdout` (which must be a string).
pub fn stdout_of(r: &Value) -> &str {
    r["detail"]["stdout"].as_str().unwrap()
}

/// A result's `detail.stderr` (which must be a string).
pub fn stderr_of(r: &Value) -> &str {
    r["detail"]["stderr"].as_str().unwrap()
}

/// A result's `detail.key` (which must be a string).
pub fn detail_str<'a>(r: &'a Value, key: &str) -> &'a str {
    r["detail"][key].as_str().unwrap()
}

/// A result's `reason` (which must be a string).
pub fn reason_of(r: &Value) -> &str {
    r["reason"].as_str().unwrap()
}

/// What the binary did when run with `args` and then `path`.
pub fn safe_mcp_on(args: &[&str], path: impl AsRef<std::ffi::OsStr>) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .arg(path)
        .output()
        .unwrap()
}

/// Checks that a finished command failed, saying `needle` on stderr.
pub fn assert_failed_saying(out: &std::process::Output, needle: &str) {
    assert!(!out.status.success(), "expected a failure: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
}

/// Checks that a finished command exited 0, showing its stderr if not.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The users a server is tried as: root's own and, when the tests run as root, nobody's.
pub fn server_uids() -> &'static [Option<u32>] {
    if rustix::process::geteuid().is_root() {
        &[None, Some(65534)]
    } else {
        &[None]
    }
}

/// The start of a policy written whole: the trail, a jail with the system's `PATH`, and the
/// `[terminal.limits]` table holding `limits`.
pub fn policy_head(limits: &str) -> String {
    format!(
        "audit_log = \"audit.jsonl\"\n\n[terminal]\njail_root = \"jail\"\npath = [\"/usr/bin\", \"/bin\"]\n\n[terminal.limits]\n{limits}\n"
    )
}

/// A `[[terminal.rules]]` table for each of `programs` that lets it run as an interpreter.
pub fn interpreter_rules(programs: &[&str]) -> String {
    programs
        .iter()
        .map(|p| format!("[[terminal.rules]]\ncommand = \"{p}\"\nallow_interpreter = true\n"))
        .collect()
}

/// The author and committer of the operator's own git commits, outside the server.
pub const OPERATOR_GIT: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "op"),
    ("GIT_AUTHOR_EMAIL", "op@example.com"),
    ("GIT_COMMITTER_NAME", "op"),
    ("GIT_COMMITTER_EMAIL", "op@example.com"),
];

/// A temporary directory named with `prefix`, and its canonical path.
pub fn temp_base(prefix: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    (dir, base)
}

/// The allowlist most tests use.
pub const DEFAULT_ALLOW: &str = r#""echo", "cat", "ls", "wc", "tr", "grep", "sleep", "true", "false", "env", "sh", "yes", "touch", "git", "head", "rm", "nonexistent-tool-xyz""#;

impl Sandbox {
    /// A sandbox whose policy is the default one plus `extra` TOML appended to `[terminal]`'s
    /// sub-tables (use full table headers in `extra`).
    pub fn new(extra: &str) -> Sandbox {
        Sandbox::with(
            DEFAULT_ALLOW,
            "timeout_seconds = 10\nmax_output_bytes = 4096",
            "closed",
            extra,
        )
    }

    pub fn with(allow: &str, limits: &str, fail_mode: &str, extra: &str) -> Sandbox {
        let (dir, base) = temp_base("safe-mcp-test-");
        let jail = base.join("jail");
        std::fs::create_dir_all(jail.join("sub")).unwrap();
        std::fs::write(jail.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
        let audit = base.join("audit.jsonl");
        let policy = base.join("policy.toml");
        let text = format!(
            r#"audit_log = "audit.jsonl"
audit_fail_mode = "{fail_mode}"

[terminal]
jail_root = "jail"

[terminal.limits]
{limits}

[terminal.allowlist]
commands = [{allow}]

[terminal.denylist]
commands = ["rm", "curl"]

[[terminal.rules]]
command = "git"
deny_args = ["push --force", "push -f"]
reason = "force-push rewrites shared history"

# The confinement tests bypass the argument checks on purpose: an interpreter opens paths on
# its own, so only the kernel stands in its way.
{interpreters}{extra}
"#,
            interpreters = interpreter_rules(&["sh", "bash", "python3", "env"]),
        );
        std::fs::write(&policy, text).unwrap();
        Sandbox {
            _dir: dir,
            jail,
            policy,
            audit,
        }
    }

    /// Lets commands start `names` without allowlisting them (`[terminal.allowlist]
    /// helpers`): the tools a test's script uses to probe another layer of the confinement,
    /// which the exec allowlist would otherwise refuse first.
    pub fn add_helpers(&self, names: &[&str]) {
        let list: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let text = std::fs::read_to_string(&self.policy).unwrap().replacen(
            "[terminal.allowlist]\n",
            &format!("[terminal.allowlist]\nhelpers = [{}]\n", list.join(", ")),
            1,
        );
        std::fs::write(&self.policy, text).unwrap();
    }

    /// Writes `contents` at `path` in the jail (its folder must be there).
    pub fn write_in_jail(&self, path: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
        std::fs::write(self.jail.join(path), contents).unwrap();
    }

    /// Adds `toml` at the end of the sandbox's policy.
    pub fn append_policy(&self, toml: &str) {
        let text = std::fs::read_to_string(&self.policy).unwrap();
        std::fs::write(&self.policy, format!("{text}\n{toml}\n")).unwrap();
    }

    /// Adds `toml` (top-level keys) at the start of the sandbox's policy.
    pub fn prepend_policy(&self, toml: &str) {
        let text = std::fs::read_to_string(&self.policy).unwrap();
        std::fs::write(&self.policy, format!("{toml}\n{text}")).unwrap();
    }

    /// Replaces every `from` (which must be there) in the policy with `to`.
    pub fn edit_policy(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.policy).unwrap();
        assert!(text.contains(from), "the policy lacks {from:?}");
        std::fs::write(&self.policy, text.replace(from, to)).unwrap();
    }

    pub fn base(&self) -> &Path {
        self.jail.parent().unwrap()
    }

    pub fn audit_records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The first record of the trail that `pred` holds for.
    pub fn find_record(&self, pred: impl FnMut(&Value) -> bool) -> Option<Value> {
        let mut pred = pred;
        self.audit_records().into_iter().find(|r| pred(r))
    }

    /// Whether the trail holds a record that `pred` holds for.
    pub fn has_record(&self, pred: impl FnMut(&Value) -> bool) -> bool {
        self.audit_records().iter().any(pred)
    }

    /// [`Sandbox::new`] with `extra`, and a session with its server.
    pub async fn started(extra: &str) -> (Sandbox, Session) {
        let sb = Sandbox::new(extra);
        let s = sb.session().await;
        (sb, s)
    }

    pub async fn session(&self) -> Session {
        Session::start(&self.policy, |_| {}).await
    }

    /// Gives the sandbox (its directory, the jail and its seeded entries, the policy) to
    /// `uid`, as an operator would for an unprivileged server.
    pub fn give_to(&self, uid: u32) {
        for entry in [
            self.base().to_path_buf(),
            self.jail.clone(),
            self.jail.join("sub"),
            self.jail.join("notes.txt"),
            self.policy.clone(),
        ] {
            std::os::unix::fs::chown(&entry, Some(uid), Some(uid)).unwrap();
        }
    }

    /// A session with the server run as `uid` (through setpriv; the caller must be root).
    pub async fn session_as(&self, uid: u32) -> Session {
        self.session_as_with_path(uid, None).await
    }

    /// [`Sandbox::session_as`], with `PATH` set for the server when given (the profiles find
    /// their toolchains through it).
    pub async fn session_as_with_path(&self, uid: u32, path: Option<&str>) -> Session {
        let path = path.map(str::to_owned);
        Session::start_with_stderr(
            &self.policy,
            |c| {
                let args: Vec<_> = c.as_std().get_args().map(|a| a.to_owned()).collect();
                let mut fresh = tokio::process::Command::from(as_user(BIN, Some(uid)));
                fresh.args(args).env_clear();
                if let Some(path) = path {
                    fresh.env("PATH", path);
                }
                *c = fresh;
            },
            None,
        )
        .await
    }
}

/// `program` as uid `uid` would run it: through setpriv (the caller must be root), with the
/// user's own uid and gid and no supplementary groups; or as it is, for `None`.
pub fn as_user(program: &str, uid: Option<u32>) -> std::process::Command {
    match uid {
        None => std::process::Command::new(program),
        Some(uid) => {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".to_owned(),
                "--".to_owned(),
                program.to_owned(),
            ]);
            c
        }
    }
}

/// A live MCP session with `safe-mcp terminal`.
pub struct Session {
    pub client: RunningService<RoleClient, ()>,
    /// What the server wrote on stderr. Expected warnings (mode off, an audit trail the test
    /// broke) stay out of a passing run; a failing test prints them.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Ok(text) = self.stderr.lock()
            && !text.is_empty()
        {
            eprintln!("--- the server's stderr ---\n{text}--- end ---");
        }
    }
}

impl Session {
    pub async fn start(policy: &Path, tweak: impl FnOnce(&mut tokio::process::Command)) -> Session {
        Session::start_with_stderr(policy, tweak, None).await
    }

    pub async fn start_with_stderr(
        policy: &Path,
        tweak: impl FnOnce(&mut tokio::process::Command),
        stderr: Option<std::process::Stdio>,
    ) -> Session {
        Session::start_server("terminal", policy, tweak, stderr).await
    }

    pub async fn start_server(
        server: &str,
        policy: &Path,
        tweak: impl FnOnce(&mut tokio::process::Command),
        stderr: Option<std::process::Stdio>,
    ) -> Session {
        let mut command = tokio::process::Command::new(BIN).configure(|c| {
            c.arg(server)
                .arg("--config")
                .arg(policy)
                .env_clear()
                .env("SECRET_SERVER_VAR", "leak-me");
        });
        tweak(&mut command);
        // `None`: captured, see `Session::stderr`.
        let (transport, child_stderr) = TokioChildProcess::builder(command)
            .stderr(stderr.unwrap_or_else(std::process::Stdio::piped))
            .spawn()
            .unwrap();
        let captured = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(mut pipe) = child_stderr {
            let sink = std::sync::Arc::clone(&captured);
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut text) = sink.lock() {
                        text.push_str(&String::from_utf8_lossy(&buf[..n]));
                    }
                }
            });
        }
        let client = match ().serve(transport).await {
            Ok(c) => c,
            Err(e) => {
                // The server's own words say why it did not start.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let said = captured.lock().map(|t| t.clone()).unwrap_or_default();
                panic!("the server did not start ({e}); its stderr:\n{said}");
            }
        };
        Session {
            client,
            stderr: captured,
        }
    }

    /// Calls a tool and returns the envelope, after checking the invariants every result
    /// must keep: structuredContent present, the text block holds the same JSON, and
    /// `isError == !ok`.
    pub async fn call(&self, tool: &str, args: Value) -> Value {
        let result = self.raw_call(tool, args).await;
        envelope_of(&result)
    }

    pub async fn raw_call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        let call = self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args));
        tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .expect("call timed out")
            .unwrap()
    }

    /// What the server has written on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|t| t.clone()).unwrap_or_default()
    }

    pub async fn run(&self, command: &str) -> Value {
        self.call("run_command", serde_json::json!({ "command": command }))
            .await
    }

    /// `run` of `command`, checking that it ended with `code`.
    pub async fn run_expecting(&self, command: &str, code: &str) -> Value {
        let r = self.run(command).await;
        assert_eq!(r["code"], code, "{command:?}: {r}");
        r
    }

    /// `run_command` with the arguments `args` (a JSON object).
    pub async fn run_with(&self, args: Value) -> Value {
        self.call("run_command", args).await
    }

    /// `write_file` of `content` to `path`.
    pub async fn write_file(&self, path: &str, content: &str) -> Value {
        let args = serde_json::json!({"path": path, "content": content});
        self.call("write_file", args).await
    }

    /// `move_file` of `src` to `dest` (the files server's tool).
    pub async fn move_file(&self, src: &str, dest: &str) -> Value {
        let args = serde_json::json!({"src": src, "dest": dest});
        self.call("move_file", args).await
    }

    /// `explain_command` of the command line `command`.
    pub async fn explain(&self, command: &str) -> Value {
        self.call("explain_command", serde_json::json!({"command": command}))
            .await
    }

    /// `run_command` of the command line `command` with `cwd` as its working directory.
    pub async fn run_in(&self, cwd: &str, command: &str) -> Value {
        self.run_with(serde_json::json!({"command": command, "cwd": cwd}))
            .await
    }

    /// `run_command` of `sh -c script`.
    pub async fn sh(&self, script: impl AsRef<str>) -> Value {
        self.run_with(sh_call(script.as_ref())).await
    }

    /// `run_command` of `python3 -c program`.
    pub async fn py(&self, program: impl AsRef<str>) -> Value {
        self.run_with(py_call(program.as_ref())).await
    }

    /// `start_process` with `args`; checks that it started and returns its handle.
    pub async fn start_process(&self, args: Value) -> String {
        let started = self.call("start_process", args).await;
        assert_eq!(started["code"], "OK", "{started}");
        started["detail"]["handle"].as_str().unwrap().to_owned()
    }

    /// `read_process_output` of `handle`, with the other fields of `args` (a JSON object).
    pub async fn read_process(&self, handle: &str, args: Value) -> Value {
        let mut args = args;
        args["handle"] = Value::from(handle);
        self.call("read_process_output", args).await
    }

    /// `start_process` of `python3 -c program`, read until it exits (waiting up to
    /// `wait_seconds`): its handle and that read.
    pub async fn py_until_exit(&self, program: &str, wait_seconds: u64) -> (String, Value) {
        let handle = self.start_process(py_call(program)).await;
        let args = serde_json::json!({"wait_seconds": wait_seconds, "until": "exit"});
        let r = self.read_process(&handle, args).await;
        (handle, r)
    }

    /// What a session printed, read until it has printed a whole line (at most `reads`
    /// reads of up to a second each).
    pub async fn first_line(&self, handle: &str, reads: usize) -> String {
        let mut out = String::new();
        for _ in 0..reads {
            let r = self
                .read_process(handle, serde_json::json!({"wait_seconds": 1}))
                .await;
            out.push_str(r["detail"]["stdout"].as_str().unwrap_or_default());
            if out.ends_with('\n') {
                break;
            }
        }
        out
    }
}

pub fn envelope_of(result: &CallToolResult) -> Value {
    let envelope = result
        .structured_content
        .clone()
        .expect("every result carries structuredContent");
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .expect("a text block");
    if envelope["action"] == "read_file"
        && envelope["code"] == "OK"
        && envelope["detail"]["content"].is_string()
    {
        // A read's text block is for a reader: the verdict, then the lines numbered.
        assert!(text.starts_with("OK: "), "{text}");
        let first = envelope["detail"]["first_line"].as_u64().unwrap();
        if envelope["detail"]["lines"].as_u64().unwrap() > 0 {
            assert!(text.contains(&format!("{first:>6}\t")), "{text}");
        }
    } else {
        let typed: safe_mcp_core::OperationResult =
            serde_json::from_value(envelope.clone()).expect("structuredContent is an envelope");
        assert_eq!(
            text,
            safe_mcp_core::reader::text(&typed),
            "the text block must be structuredContent written for a reader"
        );
    }
    let ok = envelope["ok"].as_bool().unwrap();
    assert_eq!(result.is_error, Some(!ok), "isError must be !ok");
    for key in ["ok", "code", "action", "reason", "detail", "duration_ms"] {
        assert!(
            envelope.get(key).is_some(),
            "envelope lacks {key}: {envelope}"
        );
    }
    envelope
}

/// Processes (not zombies) whose command line contains `needle`.
pub fn live_processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(needle) {
            continue;
        }
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if !zombie {
            found.push(pid);
        }
    }
    found
}

/// Waits up to `secs` for `f` to hold.
pub async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..secs * 20 {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f()
}

/// A test that cannot run its check here says why: on stderr, and in the file
/// `SAFE_MCP_SKIPS` names, which `.ci/run` prints as the skip list (and fails on, since CI's
/// machine kind has every reason removed: it runs as root with the packages installed).
/// The python of a venv under the target directory holding `packages` (pip-installed once;
/// tests run in parallel, so one makes a venv while the others wait).
pub fn venv(name: &str, packages: &[&str]) -> std::path::PathBuf {
    venv_of("python3", name, packages)
}

/// [`venv`] made by the `python` given: a venv a confined server runs needs an interpreter
/// in its view (Debian's `/usr/bin/python3`, not one under a home directory).
pub fn venv_of(interpreter: &str, name: &str, packages: &[&str]) -> std::path::PathBuf {
    static MADE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = MADE.lock().unwrap_or_else(|e| e.into_inner());
    // Canonical: pip writes this path into the venv's scripts (their `#!` line), and a
    // confined server sees only canonical paths.
    let root =
        std::fs::canonicalize(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .expect("the workspace");
    let target = root.join("target").join(name);
    let python = target.join("bin/python");
    let ready = target.join(".installed");
    if !ready.exists() {
        let status = std::process::Command::new(interpreter)
            .args(["-m", "venv"])
            .arg(&target)
            .status()
            .expect("python3 is required");
        assert!(status.success(), "python3 -m venv failed");
        let status = std::process::Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages)
            .status()
            .unwrap();
        assert!(status.success(), "pip install {packages:?} failed");
        std::fs::write(&ready, "").unwrap();
    }
    python
}

/// `git` in `dir` for a test's own setup, outside the server, without the user's config.
pub fn host_git(dir: &Path, args: &[&str]) {
    let st = std::process::Command::new("git")
        .args(["-c", "user.email=t@t", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

/// Whether `program --version` runs on this machine; if not, the skip says so.
pub fn installed(program: &str) -> bool {
    let ok = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(format!(
            "skipping: {program} is not installed on this machine"
        ));
    }
    ok
}

/// Why a test that runs the server as another user skips when not run as root.
pub const SETPRIV_NEEDS_ROOT: &str =
    "skipping: switching to an unprivileged user (setpriv --reuid=65534) needs root";

/// cgroup v1's pids hierarchy, where a root server makes its pids cgroup; `None` where the
/// tests do not run as root or there is none, and then the skip says `why`.
pub fn pids_cgroup_or_skip(why: &str) -> Option<&'static Path> {
    let root = Path::new("/sys/fs/cgroup/pids");
    if rustix::process::geteuid().is_root() && root.is_dir() {
        return Some(root);
    }
    skip(why);
    None
}

/// Whether the tests run as root; if not, the skip says `why`.
pub fn root_or_skip(why: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        skip(why);
    }
    root
}

pub fn skip(why: impl AsRef<str>) {
    let why = why.as_ref();
    eprintln!("{why}");
    if let Some(path) = std::env::var_os("SAFE_MCP_SKIPS") {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// Waits up to `secs` for `f` to hold, from a test that is not async.
pub fn eventually_blocking(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..secs * 20 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// Each record of a trail as (kind, tool, verdict or code), to compare a trail's shape.
pub fn record_shapes(records: &[Value]) -> Vec<(String, String, String)> {
    records
        .iter()
        .map(|r| {
            let code = r.get("verdict").or_else(|| r.get("code")).unwrap();
            (
                r["kind"].as_str().unwrap().to_owned(),
                r["tool"].as_str().unwrap().to_owned(),
                code.as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The attempt and the outcome of one call of `tool` that ended with `code`.
pub fn record_pair(tool: &str, code: &str) -> [(String, String, String); 2] {
    [
        ("attempt".to_owned(), tool.to_owned(), code.to_owned()),
        ("outcome".to_owned(), tool.to_owned(), code.to_owned()),
    ]
}

// What tests run on the host, outside the server, beside it: the CLI, ports, keys.
pub use super::host_tools::*;
