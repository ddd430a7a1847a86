//! The executor as a library, with real processes: what a plan the core approved gets from
//! the kernel, with no server around it. Each test builds a `LocalExecutor` for a fresh jail
//! under `enforce` (the private view where this user can make it, as a server would), runs
//! real programs, and checks what they could and could not do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use safe_mcp_contract::{
    ConfinementSpec, ExecFailure, ExecOutcome, ExecPlan, ExecStage, Executor, NamespaceMode,
    ProcessLimits, SandboxMode, Sequence,
};
use safe_mcp_exec::LocalExecutor;

fn spec(jail: &Path) -> ConfinementSpec {
    ConfinementSpec {
        jail_root: jail.to_path_buf(),
        mode: SandboxMode::Enforce,
        network: false,
        egress: false,
        unix_sockets: false,
        listen_ports: Vec::new(),
        executables: None,
        read_paths: ["/usr", "/bin", "/lib", "/lib64", "/etc"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
        write_paths: Vec::new(),
        read_only_files: Vec::new(),
        pinned_dirs: Vec::new(),
        exec_in_jail: false,
        exec_log: false,
        namespaces: NamespaceMode::Auto,
        home: None,
        limits: ProcessLimits {
            cpu_seconds: 30,
            memory_bytes: 4 << 30,
            file_size_bytes: 1 << 30,
            open_files: 1024,
            processes: 256,
        },
    }
}

/// One stage: `argv[0]` found on the usual PATH.
fn stage(argv: &[&str]) -> ExecStage {
    let program = ["/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(argv[0]))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{} is not installed", argv[0]));
    ExecStage {
        program,
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        env: Vec::new(),
    }
}

fn plan(jail: &Path, pipelines: Vec<Vec<ExecStage>>, joins: Vec<Sequence>) -> ExecPlan {
    ExecPlan {
        pipelines,
        joins,
        cwd: jail.to_path_buf(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ],
        stdin: None,
        timeout: Duration::from_secs(20),
        capture_limit: 1 << 20,
        output_total_limit: 0,
        observer: None,
        interactive: None,
        stdio: None,
        egress: None,
    }
}

/// Runs `plan` with a durable attempt (or not) and no cancellation.
fn run(
    executor: &LocalExecutor,
    plan: ExecPlan,
    durable: bool,
) -> Result<ExecOutcome, ExecFailure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(executor.execute(
        plan,
        Box::pin(std::future::pending()),
        Box::pin(async move { durable }),
    ))
}

/// Runs one command (`argv`) in `jail`, its attempt durable.
fn run_one(executor: &LocalExecutor, jail: &Path, argv: &[&str]) -> ExecOutcome {
    run(executor, plan(jail, vec![vec![stage(argv)]], vec![]), true).unwrap()
}

/// Asserts `out` exited 0, showing its stderr if not.
fn assert_exited_0(out: &ExecOutcome) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.exit_code, Some(0), "{stderr}");
}

fn jail() -> (tempfile::TempDir, PathBuf, LocalExecutor) {
    let dir = tempfile::tempdir().unwrap();
    let jail = dir.path().join("jail");
    std::fs::create_dir(&jail).unwrap();
    let jail = jail.canonicalize().unwrap();
    let executor = LocalExecutor::new(&spec(&jail)).expect("confinement for enforce");
    (dir, jail, executor)
}

#[test]
fn a_stage_runs_and_its_output_and_status_come_back() {
    let (_dir, jail, executor) = jail();
    let out = run_one(&executor, &jail, &["echo", "hi"]);
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, b"hi\n");
    assert_eq!(out.stdout_bytes, 3);
    assert!(out.stages[0].ran);
    assert!(!out.timed_out && !out.cancelled);
}

#[test]
fn a_pipeline_is_wired_and_a_failed_and_skips_the_rest() {
    let (_dir, jail, executor) = jail();
    let pipe = vec![stage(&["printf", "a\\nb\\n"]), stage(&["wc", "-l"])];
    let out = run(&executor, plan(&jail, vec![pipe], vec![]), true).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2");
    let list = vec![vec![stage(&["false"])], vec![stage(&["echo", "never"])]];
    let out = run(&executor, plan(&jail, list, vec![Sequence::And]), true).unwrap();
    assert_eq!(out.exit_code, Some(1));
    assert!(out.stdout.is_empty());
    assert!(!out.stages[1].ran, "{:?}", out.stages);
}

#[test]
fn nothing_runs_when_the_attempt_is_not_durable() {
    let (_dir, jail, executor) = jail();
    let marker = jail.join("ran");
    let touch = stage(&["touch", marker.to_str().unwrap()]);
    let failed = run(
        &executor,
        plan(&jail, vec![vec![touch.clone()]], vec![]),
        false,
    );
    assert!(matches!(failed, Err(ExecFailure::NotDurable)), "{failed:?}");
    assert!(
        !marker.exists(),
        "a command ran before its attempt was durable"
    );
    // The positive control: the same stage, durable, does run.
    run(&executor, plan(&jail, vec![vec![touch]], vec![]), true).unwrap();
    assert!(marker.exists());
}

#[test]
fn the_jail_is_writable_and_outside_it_is_not() {
    let (dir, jail, executor) = jail();
    let inside = jail.join("inside");
    let outside = dir.path().join("outside");
    let out = run_one(&executor, &jail, &["touch", inside.to_str().unwrap()]);
    assert_exited_0(&out);
    assert!(inside.exists());
    let out = run_one(&executor, &jail, &["touch", outside.to_str().unwrap()]);
    assert_ne!(out.exit_code, Some(0));
    assert!(!outside.exists(), "a command wrote outside its jail");
}

#[test]
fn the_environment_is_the_plans_and_nothing_of_the_servers() {
    // SAFETY: set before any executor thread of this test runs; no other test reads it.
    unsafe { std::env::set_var("SAFE_MCP_EXEC_TEST_SERVER_ONLY", "leaked") };
    let (_dir, jail, executor) = jail();
    let out = run_one(&executor, &jail, &["env"]);
    let env = String::from_utf8_lossy(&out.stdout);
    assert!(env.contains("PATH=/usr/bin:/bin"), "{env}");
    assert!(
        env.contains("TMPDIR="),
        "each call gets its own TMPDIR: {env}"
    );
    assert!(!env.contains("SAFE_MCP_EXEC_TEST_SERVER_ONLY"), "{env}");
}

#[test]
fn a_namespace_cannot_be_made_by_a_command() {
    let (_dir, jail, executor) = jail();
    let out = run_one(&executor, &jail, &["unshare", "--user", "true"]);
    assert_ne!(out.exit_code, Some(0), "seccomp lets a command unshare");
    // The positive control: the same program runs, and exits 0, when it makes no syscall
    // the filter refuses.
    let out = run_one(&executor, &jail, &["unshare", "--help"]);
    assert_exited_0(&out);
}

#[test]
fn a_deadline_kills_the_tree_and_a_flood_keeps_its_head_and_tail() {
    let (_dir, jail, executor) = jail();
    let mut slow = plan(&jail, vec![vec![stage(&["sleep", "30"])]], vec![]);
    slow.timeout = Duration::from_millis(300);
    let out = run(&executor, slow, true).unwrap();
    assert!(out.timed_out);
    assert_eq!(
        out.stages[0].signal,
        Some(libc::SIGKILL),
        "{:?}",
        out.stages
    );
    // Printing much stops nothing: `yes` runs to the deadline; a quarter of the limit is
    // kept from the start, the rest from the end, and every byte and line is counted.
    let mut flood = plan(&jail, vec![vec![stage(&["yes"])]], vec![]);
    flood.capture_limit = 4096;
    flood.timeout = Duration::from_millis(300);
    let out = run(&executor, flood, true).unwrap();
    assert!(out.timed_out);
    assert_eq!((out.stdout.len(), out.stdout_tail.len()), (1024, 3072));
    assert!(out.stdout.starts_with(b"y\ny\n") && out.stdout_tail.ends_with(b"y\n"));
    assert!(out.stdout_bytes > 1 << 20, "{}", out.stdout_bytes);
    assert!(
        (out.stdout_bytes / 2).abs_diff(out.stdout_lines) <= 1,
        "{}",
        out.stdout_lines
    );
    // Within the limit, the stream comes back whole, as one part.
    let small = plan(&jail, vec![vec![stage(&["echo", "hi"])]], vec![]);
    let out = run(&executor, small, true).unwrap();
    assert_eq!(
        (out.stdout.as_slice(), out.stdout_tail.len()),
        (&b"hi\n"[..], 0)
    );
}

#[test]
fn a_cancelled_call_is_killed_and_says_so() {
    let (_dir, jail, executor) = jail();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime
        .block_on(executor.execute(
            plan(&jail, vec![vec![stage(&["sleep", "30"])]], vec![]),
            Box::pin(async { tokio::time::sleep(Duration::from_millis(200)).await }),
            Box::pin(async { true }),
        ))
        .unwrap();
    assert!(out.cancelled);
    assert!(!out.timed_out);
}

/// Whether this machine gives commands pid namespaces of their own (the private view).
fn pid_namespaces(executor: &LocalExecutor) -> bool {
    executor.confinement().view.namespaces.contains(&"pid")
}

/// Stages made ahead of their call (issue 39): consecutive commands each run in a pid,
/// mount and ipc namespace of their own, with a `/proc` of their own tree only and an empty
/// temporary directory, though most of them started in a namespace made while the executor
/// waited. A command that fails in one is reported as failing, and the next runs.
#[test]
fn a_namespace_made_ahead_serves_one_command_and_nothing_crosses() {
    let (_dir, jail, executor) = jail();
    if !pid_namespaces(&executor) {
        eprintln!("skipping: no pid namespaces for commands here");
        return;
    }
    // Its pid, the processes its /proc lists, the files in its temporary directory, and
    // the System V segments it sees after making one.
    let script = "echo $$; ls /proc | grep -c '^[0-9]'; ls -A \"$TMPDIR\" | wc -l; \
                  touch \"$TMPDIR/left\"; ipcmk -M 4096 >/dev/null; ipcs -m | grep -c '^0x'";
    let calls = 8;
    for k in 0..calls {
        // The filler makes the next namespace while the server waits for a call.
        std::thread::sleep(Duration::from_millis(30));
        let out = run_one(&executor, &jail, &["sh", "-c", script]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.exit_code, Some(0), "call {k}: {text} {:?}", out.stderr);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "2", "call {k}: not its init's child: {text}");
        let processes: u32 = lines[1].parse().unwrap();
        assert!((3..=5).contains(&processes), "call {k} sees others: {text}");
        assert_eq!(lines[2], "0", "call {k}: an earlier call's file: {text}");
        assert_eq!(lines[3], "1", "call {k}: an earlier call's segment: {text}");
    }
    let ahead = executor.stages_made_ahead();
    assert!(
        ahead >= calls - 2,
        "only {ahead} of {calls} stages started in a namespace made ahead"
    );
    // A stage that fails in a namespace made ahead (its cwd is gone) fails as any would,
    // and the next one runs.
    let before = executor.stages_made_ahead();
    std::thread::sleep(Duration::from_millis(30));
    let mut gone = plan(&jail, vec![vec![stage(&["true"])]], vec![]);
    gone.cwd = jail.join("missing");
    let failed = run(&executor, gone, true);
    assert!(
        matches!(&failed, Err(ExecFailure::Spawn { .. })),
        "{failed:?}"
    );
    std::thread::sleep(Duration::from_millis(30));
    let out = run_one(&executor, &jail, &["echo", "next"]);
    assert_eq!(out.stdout, b"next\n");
    assert!(
        executor.stages_made_ahead() > before,
        "the next call did not take one"
    );
    // Nothing runs in one when the attempt is not durable: the gate stays shut.
    std::thread::sleep(Duration::from_millis(30));
    let marker = jail.join("ran");
    let denied = run(
        &executor,
        plan(
            &jail,
            vec![vec![stage(&["touch", marker.to_str().unwrap()])]],
            vec![],
        ),
        false,
    );
    assert!(denied.is_err(), "{denied:?}");
    assert!(
        !marker.exists(),
        "a command ran before its attempt was durable"
    );
}

/// Many stages at once, some of them taking the namespace made ahead as it becomes ready:
/// every one runs (a call once took a namespace whose init's pid was not yet known).
#[test]
fn stages_at_once_all_run_whether_made_ahead_or_not() {
    let (_dir, jail, executor) = jail();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (executor, jail) = (executor.clone(), jail.clone());
            std::thread::spawn(move || {
                (0..12)
                    .map(|_| {
                        let out = run(
                            &executor,
                            plan(&jail, vec![vec![stage(&["echo", "hi"])]], vec![]),
                            true,
                        );
                        out.map(|o| o.stdout)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for t in threads {
        for out in t.join().unwrap() {
            assert_eq!(out.unwrap(), b"hi\n");
        }
    }
}

/// A session as the core keeps one: idle once nobody has touched it for `after`.
struct Touched {
    last: std::sync::Mutex<std::time::Instant>,
    after: Duration,
    stdin: std::sync::Mutex<Option<std::os::fd::OwnedFd>>,
}

impl safe_mcp_contract::InteractiveIo for Touched {
    fn started(&self, stdin: std::os::fd::OwnedFd, _pid: u32) {
        *self.stdin.lock().unwrap() = Some(stdin);
    }

    fn idle_at(&self) -> Option<std::time::Instant> {
        Some(*self.last.lock().unwrap() + self.after)
    }
}

/// A session nobody reads or writes is stopped once its idle time has passed, and each
/// touch moves that time on: touched every 100 ms for 900 ms with an idle time of 300 ms,
/// it lives past the 900 ms, then stops as idle, not at its 20 s deadline.
#[test]
fn an_idle_session_is_stopped_and_a_touched_one_is_not() {
    let (_dir, jail, executor) = jail();
    let session = std::sync::Arc::new(Touched {
        last: std::sync::Mutex::new(std::time::Instant::now()),
        after: Duration::from_millis(300),
        stdin: std::sync::Mutex::new(None),
    });
    let mut p = plan(&jail, vec![vec![stage(&["sleep", "30"])]], vec![]);
    p.interactive = Some(safe_mcp_contract::Interactive(
        std::sync::Arc::clone(&session) as _,
    ));
    let toucher = std::sync::Arc::clone(&session);
    let touching = std::thread::spawn(move || {
        for _ in 0..9 {
            std::thread::sleep(Duration::from_millis(100));
            *toucher.last.lock().unwrap() = std::time::Instant::now();
        }
    });
    let started = std::time::Instant::now();
    let out = run(&executor, p, true).unwrap();
    touching.join().unwrap();
    assert!(out.idle, "{out:?}");
    assert!(!out.timed_out && !out.cancelled, "{out:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "the touches kept it alive: {:?}",
        started.elapsed()
    );
    assert_eq!(out.exit_code, Some(128 + 9), "{out:?}");
}

/// A session on a terminal, as the core keeps one: what the program prints arrives as
/// standard output, and the master to write to arrives at the start.
struct OnTerminal {
    size: safe_mcp_contract::TerminalSize,
    master: std::sync::Mutex<Option<std::os::fd::OwnedFd>>,
    seen: std::sync::Mutex<Vec<u8>>,
}

impl safe_mcp_contract::InteractiveIo for OnTerminal {
    fn started(&self, master: std::os::fd::OwnedFd, _pid: u32) {
        *self.master.lock().unwrap() = Some(master);
    }

    fn idle_at(&self) -> Option<std::time::Instant> {
        None
    }

    fn terminal(&self) -> Option<safe_mcp_contract::TerminalSize> {
        Some(self.size)
    }
}

impl safe_mcp_contract::OutputObserver for OnTerminal {
    fn output(&self, stream: safe_mcp_contract::OutputStream, bytes: &[u8]) {
        assert_eq!(stream, safe_mcp_contract::OutputStream::Stdout);
        self.seen.lock().unwrap().extend_from_slice(bytes);
    }
}

/// Issue 55: a session's program runs on a pty of its own devpts, at the size asked, as the
/// leader of its own session with that pty as its controlling terminal (`/proc/self/stat`'s
/// tty_nr and session), where `/dev/tty` works and `stty` sets modes (Landlock's IOCTL_DEV on
/// /dev/tty); a line written to the master is read by the program.
#[test]
fn a_session_on_a_terminal_gets_its_own_controlling_pty() {
    let (_dir, jail, executor) = jail();
    if !executor.confinement().view.terminals {
        // A view without a pid namespace of each command's own (no user namespaces for this
        // user) has no devpts to make a terminal in: said in the skip list CI prints.
        let why = format!("no terminal here: {}", executor.confinement().view.detail);
        eprintln!("{why}");
        if let Some(path) = std::env::var_os("SAFE_MCP_SKIPS") {
            use std::io::Write;
            let mut list = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .unwrap();
            writeln!(
                list,
                "a_session_on_a_terminal_gets_its_own_controlling_pty: {why}"
            )
            .unwrap();
        }
        return;
    }
    let session = std::sync::Arc::new(OnTerminal {
        size: safe_mcp_contract::TerminalSize {
            rows: 30,
            cols: 100,
        },
        master: std::sync::Mutex::new(None),
        seen: std::sync::Mutex::new(Vec::new()),
    });
    let script = "tty; stty size; read -r _ _ _ _ _ sid tty _ < /proc/self/stat; \
                  echo \"sid=$sid self=$$ tty_nr=$tty\"; stty -echo < /dev/tty && echo modes-set; \
                  read -r line; echo \"got $line\"";
    let mut p = plan(&jail, vec![vec![stage(&["sh", "-c", script])]], vec![]);
    p.interactive = Some(safe_mcp_contract::Interactive(
        std::sync::Arc::clone(&session) as _,
    ));
    p.observer = Some(safe_mcp_contract::Observer(
        std::sync::Arc::clone(&session) as _
    ));
    let writer = std::sync::Arc::clone(&session);
    let typing = std::thread::spawn(move || {
        for _ in 0..200 {
            let seen = String::from_utf8_lossy(&writer.seen.lock().unwrap()).into_owned();
            if seen.contains("modes-set") {
                let master = writer.master.lock().unwrap();
                let written = rustix::io::write(master.as_ref().unwrap(), b"hello\n");
                assert_eq!(written, Ok(6));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let out = run(&executor, p, true).unwrap();
    typing.join().unwrap();
    let seen = String::from_utf8_lossy(&session.seen.lock().unwrap()).into_owned();
    assert_eq!(out.exit_code, Some(0), "{seen}");
    assert!(
        seen.contains("/dev/pts/0\r\n"),
        "its own devpts's first pty: {seen}"
    );
    assert!(seen.contains("30 100\r\n"), "the size asked: {seen}");
    let fields: Vec<&str> = seen
        .lines()
        .find(|l| l.starts_with("sid="))
        .unwrap()
        .split_whitespace()
        .collect();
    let value = |k: &str| {
        fields
            .iter()
            .find_map(|f| f.strip_prefix(k))
            .unwrap()
            .trim()
    };
    assert_eq!(
        value("sid="),
        value("self="),
        "it leads its session: {seen}"
    );
    assert_ne!(value("tty_nr="), "0", "with a controlling terminal: {seen}");
    assert!(seen.contains("got hello"), "{seen}");
    assert!(
        !seen.contains("hello\r\ngot"),
        "the echo was off after stty: {seen}"
    );
}
