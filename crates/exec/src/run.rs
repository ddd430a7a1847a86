//! Running an approved plan: spawn, wire pipes, wait, kill the tree, capture capped output.
//!
//! Owns one call's processes from spawn to reap. A blocking loop polls pidfds, the output
//! pipes, the stdin pipe and a cancel pipe with the deadline as its timeout, so one thread
//! sees every event in order. Exits are observed with `waitid(WNOWAIT)` and the group is
//! killed *before* the last member is reaped: while an unreaped zombie holds the group id it
//! cannot be reused, so `killpg` can never hit a stranger's group.

use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{
    Pid, Signal, WaitId, WaitIdOptions, kill_process_group, pidfd_send_signal, waitid,
};
use safe_mcp_contract::{
    ExecFailure, ExecOutcome, ExecPlan, ExecStage, Interactive, OutputStream, Sequence,
    StageOutcome,
};

use crate::capture::Capture;
use crate::confine::{CallConfinement, Confinement};
use crate::reap;
use crate::spawn::{self, SpawnError, StageSpawn};
use crate::step::Step;

/// After the last stage exits, how long to wait for output still in flight.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

struct Stage {
    pid: Pid,
    pidfd: OwnedFd,
    /// The process group of the stage's pipeline (its first stage leads it).
    pgid: Pid,
    /// The memory of the stage's init, where it has one; freed once it is reaped.
    init: Option<spawn::InitMemory>,
    exited: bool,
    index: usize,
    /// Egress's namespace tier: the proxy serving this stage's network namespace.
    _egress: Option<Box<dyn Send>>,
    /// The exec log's watch of the stage's tree.
    watch: Option<crate::execlog::Watch>,
    /// A process session's terminal: its master, until the session takes it.
    terminal: Option<OwnedFd>,
}

/// How a stage ended: its exit code, or the signal that killed it.
struct StageExit {
    code: Option<i32>,
    signal: Option<i32>,
}

struct StdinFeed {
    fd: Option<OwnedFd>,
    data: Vec<u8>,
    written: usize,
}

impl StdinFeed {
    fn write_some(&mut self) {
        let Some(fd) = &self.fd else { return };
        while self.written < self.data.len() {
            match rustix::io::write(fd, &self.data[self.written..]) {
                Ok(n) => self.written += n,
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => continue,
                Err(_) => break, // EPIPE: the reader is gone
            }
        }
        self.fd = None; // all written (or the reader left): send EOF
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Stop {
    None,
    Timeout,
    Cancel,
    /// The output passed the plan's total bound.
    Flood,
    /// A session nobody read or wrote for its idle time.
    Idle,
}

/// What every stage of the executor may start from: `/dev/null` for a stage given no input,
/// and the namespace made ahead ([`spawn::Ahead`]), where there is one.
#[derive(Debug)]
pub(crate) struct Starts {
    pub(crate) dev_null: OwnedFd,
    pub(crate) ahead: Option<spawn::Ahead>,
}

/// Runs `plan` to completion on the calling (blocking) thread.
pub(crate) fn run_plan(
    plan: &ExecPlan,
    confinement: &Arc<Confinement>,
    call: &CallConfinement,
    starts: &Starts,
    cancel: &OwnedFd,
    gate: &OwnedFd,
    gate_writer: RawFd,
) -> Result<ExecOutcome, ExecFailure> {
    let deadline = Instant::now() + plan.timeout;
    let io = |e: std::io::Error| ExecFailure::Internal(e.to_string());
    one_program_on_a_terminal(plan)?;
    let (out_r, mut out_w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| io(e.into()))?;
    let (err_r, mut err_w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| io(e.into()))?;
    // A nested call writes where the command that asked for it writes: our pipes' write
    // ends close here, so their read ends end at once and nothing is captured.
    if let Some(given) = &plan.stdio {
        let copy = |fd: &OwnedFd| fd.try_clone().map_err(io);
        out_w = copy(&given.0[1])?;
        err_w = copy(&given.0[2])?;
    }
    for fd in [&out_r, &err_r] {
        set_nonblocking(fd).map_err(io)?;
    }
    let observed = |stream| plan.observer.clone().map(|o| (o, stream));
    let keep = plan.interactive.is_none();
    let limit = plan.capture_limit;
    let mut stdout = Capture::new(out_r, observed(OutputStream::Stdout), keep, limit);
    let mut stderr = Capture::new(err_r, observed(OutputStream::Stderr), keep, limit);
    let mut writers = Some((out_w, err_w));
    let mut feed = StdinFeed {
        fd: None,
        data: Vec::new(),
        written: 0,
    };

    let total_stages: usize = plan.pipelines.iter().map(Vec::len).sum();
    let mut outcome = ExecOutcome {
        stages: vec![StageOutcome::default(); total_stages],
        ..ExecOutcome::default()
    };
    let mut stop = Stop::None;
    let mut status: Option<i32> = None;
    let mut first_index = 0;

    for (p, pipeline) in plan.pipelines.iter().enumerate() {
        let run_it = p == 0
            || match plan.joins[p - 1] {
                Sequence::Then => true,
                Sequence::And => status == Some(0),
                Sequence::Or => status != Some(0),
            };
        let base = first_index;
        first_index += pipeline.len();
        if !run_it {
            continue;
        }
        let Some((out_w, err_w)) = &writers else {
            break;
        };
        let (stdin, session_stdin) = first_stdin(plan, p)?;
        let wiring = Wiring {
            plan,
            out_w,
            err_w,
            confinement,
            call,
            dev_null: &starts.dev_null,
            ahead: starts.ahead.as_ref(),
            gate,
            gate_writer,
        };
        let mut stages = spawn_pipeline(&wiring, pipeline, base, stdin, &mut feed)?;
        let session_stdin = match stages.first_mut().and_then(|s| s.terminal.take()) {
            Some(master) => Some(read_terminal(master, &mut stdout)?),
            None => session_stdin,
        };
        let protected = started_stages(plan, confinement, &stages, session_stdin);
        for s in &stages {
            outcome.stages[s.index].ran = true;
        }
        if p + 1 == plan.pipelines.len() {
            writers = None; // our copies must close, or the readers never see EOF
        }

        stop = wait_pipeline(
            &mut stages,
            (&mut stdout, &mut stderr),
            &mut feed,
            cancel,
            (deadline, plan.output_total_limit, plan.interactive.as_ref()),
        );
        status = settle_pipeline(&mut stages, &mut outcome)?;
        for sid in &protected {
            reap::release_session(*sid);
        }
        // With pid namespaces nothing a stage starts can be re-parented to the server (the
        // kernel's search for a subreaper stops at the namespace, whose init takes it, and
        // the namespace dies with its init), so only the host view needs the sweep; and the
        // namespace made ahead, the server's child while it waits, is no escapee.
        if !confinement.pid_namespace() {
            reap::sweep_orphans();
        }
        if stop != Stop::None {
            break;
        }
    }
    drop(writers);
    feed.fd = None;

    drain(&mut stdout, &mut stderr, deadline, stop);
    outcome.exit_code = status;
    outcome.timed_out = stop == Stop::Timeout;
    outcome.cancelled = stop == Stop::Cancel;
    outcome.flooded = stop == Stop::Flood;
    outcome.idle = stop == Stop::Idle;
    captured(&mut outcome, stdout, stderr);
    Ok(outcome)
}

/// A session on a terminal runs one program: the core refuses anything else before any
/// record, so a plan that gets here otherwise is a bug.
fn one_program_on_a_terminal(plan: &ExecPlan) -> Result<(), ExecFailure> {
    let on_terminal = plan
        .interactive
        .as_ref()
        .is_some_and(|i| i.0.terminal().is_some());
    if on_terminal && (plan.pipelines.len() != 1 || plan.pipelines[0].len() != 1) {
        return Err(ExecFailure::Internal(
            "a session on a terminal runs one program, not a pipeline or a list".into(),
        ));
    }
    Ok(())
}

/// On a terminal the session writes to its `master`, and what the program prints is read
/// from there, as standard output (in place of `stdout`'s pipe, whose write end the program
/// never had): the master, for the session.
fn read_terminal(master: OwnedFd, stdout: &mut Capture) -> Result<OwnedFd, ExecFailure> {
    let io = |e: std::io::Error| ExecFailure::Internal(e.to_string());
    set_nonblocking(&master).map_err(io)?;
    stdout.read_from(master.try_clone().map_err(io)?);
    Ok(master)
}

/// A pipeline's stages have started: a session's first stage gets its stdin, and in the
/// host view each stage leads a session of its own, and what it leaves behind (re-parented
/// to the server) is spared by other calls' sweeps while it runs (in a pid namespace its
/// init keeps them instead). The sessions so spared, to release once the stages are gone.
fn started_stages(
    plan: &ExecPlan,
    confinement: &Confinement,
    stages: &[Stage],
    session_stdin: Option<OwnedFd>,
) -> Vec<u32> {
    let protected: Vec<u32> = if plan.interactive.is_some() && !confinement.pid_namespace() {
        stages
            .iter()
            .map(|s| s.pid.as_raw_nonzero().get().unsigned_abs())
            .collect()
    } else {
        Vec::new()
    };
    for sid in &protected {
        reap::protect_session(*sid);
    }
    if let (Some(io), Some(w), Some(first)) = (&plan.interactive, session_stdin, stages.first()) {
        io.0.started(w, first.pid.as_raw_nonzero().get().unsigned_abs());
    }
    protected
}

/// The first stage's input: a pipe of the process session's (whose write end goes to the
/// session), the caller's own stdin for a nested call, the plan's bytes, or `/dev/null`.
/// Later pipelines and stages start from `/dev/null` or the pipe before them.
fn first_stdin(
    plan: &ExecPlan,
    pipeline: usize,
) -> Result<(FirstStdin<'_>, Option<OwnedFd>), ExecFailure> {
    let io = |e: std::io::Error| ExecFailure::Internal(e.to_string());
    Ok(match (&plan.interactive, pipeline) {
        // On a terminal its first stage reads the terminal instead.
        (Some(io), 0) if io.0.terminal().is_some() => (FirstStdin::Null, None),
        (Some(_), 0) => {
            let (r, w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| io(e.into()))?;
            // Writes never block the server: a full pipe takes what it can.
            set_nonblocking(&w).map_err(io)?;
            (FirstStdin::Pipe(r), Some(w))
        }
        (None, 0) => match &plan.stdio {
            Some(given) => (FirstStdin::Pipe(given.0[0].try_clone().map_err(io)?), None),
            None => (
                plan.stdin
                    .as_deref()
                    .map_or(FirstStdin::Null, FirstStdin::Bytes),
                None,
            ),
        },
        _ => (FirstStdin::Null, None),
    })
}

/// Once every stage has exited (or the call is stopping): kills the rest of the group while
/// an unreaped member still pins its id, reaps, and takes what each stage's tree executed.
/// The pipeline's status, as a shell would give it.
fn settle_pipeline(
    stages: &mut [Stage],
    outcome: &mut ExecOutcome,
) -> Result<Option<i32>, ExecFailure> {
    kill_stages(stages);
    for s in stages.iter_mut() {
        let exit = reap_stage(s).map_err(|e| ExecFailure::Internal(e.to_string()))?;
        let o = &mut outcome.stages[s.index];
        o.exit_code = exit.code;
        o.signal = exit.signal;
    }
    for s in stages.iter_mut() {
        if let Some(watch) = s.watch.take() {
            let (seen, more) = watch.finish();
            let room = crate::execlog::MAX_RECORDS.saturating_sub(outcome.executed.len());
            outcome.executed_dropped += more + seen.len().saturating_sub(room) as u64;
            outcome.executed.extend(seen.into_iter().take(room));
        }
    }
    Ok(stages.last().map(|s| {
        let o = &outcome.stages[s.index];
        o.exit_code.unwrap_or_else(|| 128 + o.signal.unwrap_or(0))
    }))
}

/// Reads what is still in the pipes; an escaped writer cannot hold the call past the grace.
fn drain(stdout: &mut Capture, stderr: &mut Capture, deadline: Instant, stop: Stop) {
    let drain_until = (Instant::now() + DRAIN_GRACE).min(deadline.max(Instant::now()));
    while stdout.fd.is_some() || stderr.fd.is_some() {
        let now = Instant::now();
        if now >= drain_until || stop != Stop::None {
            break;
        }
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        for c in [&*stdout, &*stderr] {
            if let Some(fd) = &c.fd {
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
        }
        let _ = poll(&mut fds, Some(&timespec(drain_until - now)));
        drop(fds);
        stdout.read_some();
        stderr.read_some();
    }
}

/// What the two captures hold, into the outcome.
fn captured(outcome: &mut ExecOutcome, mut stdout: Capture, mut stderr: Capture) {
    outcome.stdout_lines = stdout.lines;
    outcome.stderr_lines = stderr.lines;
    outcome.stdout_bytes = stdout.total;
    outcome.stderr_bytes = stderr.total;
    outcome.stdout_notable = std::mem::take(&mut stdout.notable);
    outcome.stderr_notable = std::mem::take(&mut stderr.notable);
    (outcome.stdout, outcome.stdout_tail) = stdout.kept();
    (outcome.stderr, outcome.stderr_tail) = stderr.kept();
}

/// What every stage of a call is wired to: the plan, the shared output pipes, the
/// confinement, /dev/null and the exec gate.
struct Wiring<'a> {
    plan: &'a ExecPlan,
    out_w: &'a OwnedFd,
    err_w: &'a OwnedFd,
    confinement: &'a Arc<Confinement>,
    call: &'a CallConfinement,
    dev_null: &'a OwnedFd,
    ahead: Option<&'a spawn::Ahead>,
    gate: &'a OwnedFd,
    gate_writer: RawFd,
}

/// Waits for a stage's exit (it has exited or been killed), reaps it, and says how its program ended: the init's record of the command's wait
/// status where the stage has an init that lived to make it, the stage's own otherwise (an
/// init killed on timeout reads as the signal that killed it, as a command would).
fn reap_stage(s: &mut Stage) -> Result<StageExit, Errno> {
    let status = loop {
        match waitid(WaitId::PidFd(s.pidfd.as_fd()), WaitIdOptions::EXITED) {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => continue,
            Err(Errno::INTR) => continue,
            Err(e) => break Err(e),
        }
    };
    reap::forget(s.pid);
    let status = status?;
    let command = s.init.take().and_then(|memory| {
        let raw = memory.command_status();
        memory.free();
        raw
    });
    Ok(match command {
        Some(raw) if libc::WIFEXITED(raw) => StageExit {
            code: Some(libc::WEXITSTATUS(raw)),
            signal: None,
        },
        Some(raw) if libc::WIFSIGNALED(raw) => StageExit {
            code: None,
            signal: Some(libc::WTERMSIG(raw)),
        },
        _ => StageExit {
            code: status.exit_status(),
            signal: status.terminating_signal(),
        },
    })
}

/// Spawns every stage of a pipeline; if any step fails, the stages already started are
/// killed and reaped before the error is returned.
/// What the first stage of a pipeline reads.
enum FirstStdin<'a> {
    Null,
    /// Bytes fed by the run loop.
    Bytes(&'a [u8]),
    /// The read end of a session's stdin pipe.
    Pipe(OwnedFd),
}

fn spawn_pipeline(
    w: &Wiring<'_>,
    pipeline: &[ExecStage],
    base: usize,
    stdin: FirstStdin<'_>,
    feed: &mut StdinFeed,
) -> Result<Vec<Stage>, ExecFailure> {
    let mut stages = Vec::with_capacity(pipeline.len());
    match spawn_stages(&mut stages, w, pipeline, base, stdin, feed) {
        Ok(()) => Ok(stages),
        Err(e) => {
            kill_started(&mut stages);
            Err(e)
        }
    }
}

fn spawn_stages(
    stages: &mut Vec<Stage>,
    w: &Wiring<'_>,
    pipeline: &[ExecStage],
    base: usize,
    stdin: FirstStdin<'_>,
    feed: &mut StdinFeed,
) -> Result<(), ExecFailure> {
    let Wiring {
        plan,
        out_w,
        err_w,
        confinement,
        call,
        dev_null,
        ahead,
        gate,
        gate_writer,
    } = *w;
    let io = |e: std::io::Error| ExecFailure::Internal(e.to_string());
    let mut next_stdin: Option<OwnedFd> = match stdin {
        FirstStdin::Pipe(r) => Some(r),
        FirstStdin::Bytes(data) => {
            let (r, w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| io(e.into()))?;
            set_nonblocking(&w).map_err(io)?;
            *feed = StdinFeed {
                fd: Some(w),
                data: data.to_vec(),
                written: 0,
            };
            Some(r)
        }
        FirstStdin::Null => None,
    };
    let mut pgid: i32 = 0;
    for (k, stage) in pipeline.iter().enumerate() {
        let last = k + 1 == pipeline.len();
        // The parent's copies of this stage's pipe ends close when these drop, after the spawn.
        let stdin = next_stdin.take();
        let pipe_out = if last {
            None
        } else {
            let (r, w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| io(e.into()))?;
            next_stdin = Some(r);
            Some(w)
        };
        let stage_env = merge_env(&plan.env, &stage.env);
        // Made before the clone: the command's own exec waits for its thread.
        let mut watch = if confinement.exec_log() {
            Some(crate::execlog::Watch::start().map_err(io)?)
        } else {
            None
        };
        let exec_log = watch.as_ref().map_or(-1, crate::execlog::Watch::child_fd);
        let spawned = reap::spawn_registered(|| {
            spawn::spawn(
                &StageSpawn {
                    program: &stage.program,
                    argv: &stage.argv,
                    env: &stage_env,
                    cwd: &plan.cwd,
                    stdio: [
                        stdin.as_ref().unwrap_or(dev_null).as_fd(),
                        pipe_out.as_ref().unwrap_or(out_w).as_fd(),
                        err_w.as_fd(),
                    ],
                    pgid,
                    new_session: plan.interactive.is_some(),
                    confinement,
                    call,
                    exec_group: confinement.exec_group(&stage.program),
                    exec_log,
                    keep_death_signal: plan.interactive.is_some(),
                    gate: gate.as_fd(),
                    gate_writer,
                    terminal: plan
                        .interactive
                        .as_ref()
                        .and_then(|io| io.0.terminal())
                        .filter(|_| base == 0 && k == 0),
                },
                ahead,
            )
        });
        if let Some(watch) = &mut watch {
            watch.spawned();
        }
        let child = match spawned {
            Ok(child) => child,
            Err(e) => return Err(spawn_failure(&stage.argv[0], &e)),
        };
        pgid = child.pgid;
        // The proxy serves the stage's own network namespace until the stage is dropped
        // (after it has been reaped); a listener without a proxy closes here.
        let egress = match (child.listener, &plan.egress) {
            (Some(listener), Some(egress)) => Some(egress.0.serve(listener)),
            _ => None,
        };
        stages.push(Stage {
            pid: child.pid,
            pidfd: child.pidfd,
            pgid: Pid::from_raw(child.pgid).unwrap_or(child.pid),
            init: child.init,
            _egress: egress,
            watch,
            exited: false,
            index: base + k,
            terminal: child.terminal,
        });
    }
    Ok(())
}

/// The plan's environment with the stage's variables over it (a later value of a name wins,
/// as with `Command::env`).
fn merge_env(base: &[(String, String)], over: &[(String, String)]) -> Vec<(String, String)> {
    let mut env = base.to_vec();
    for (name, value) in over {
        match env.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1.clone_from(value),
            None => env.push((name.clone(), value.clone())),
        }
    }
    env
}

/// What a stage that did not start means for the call.
fn spawn_failure(program: &str, e: &SpawnError) -> ExecFailure {
    match e {
        SpawnError::Child {
            step: Step::Gate,
            errno: spawn::GATE_CLOSED,
        } => ExecFailure::NotDurable,
        SpawnError::Child {
            step: Step::Sandbox,
            ..
        } => ExecFailure::Sandbox(format!(
            "the kernel refused the Landlock ruleset or seccomp filter ({e})"
        )),
        SpawnError::Child {
            step: Step::Capabilities,
            ..
        } => ExecFailure::Sandbox(format!("the capabilities could not be dropped ({e})")),
        SpawnError::Child {
            step: Step::View, ..
        } => ExecFailure::Sandbox(format!("the private view could not be entered ({e})")),
        // A failed exec, a NUL byte in a configured variable, clone refused for lack of
        // processes or memory: the command could not be started, and says why.
        SpawnError::Child { .. } | SpawnError::Parent(_) => ExecFailure::Spawn {
            program: program.to_owned(),
            message: e.to_string(),
        },
    }
}

/// Kills the group of the stages started so far (the first is its leader) and reaps them.
fn kill_started(stages: &mut [Stage]) {
    kill_stages(stages);
    for s in stages.iter_mut() {
        let _ = reap_stage(s);
    }
}

/// SIGKILLs the group (the first stage leads it) and, through its pidfd, every stage not
/// seen to exit: a stage may have left the group (`setpgid`, `setsid`), and reaping one that
/// still runs would wait for it past every deadline.
fn kill_stages(stages: &[Stage]) {
    if let Some(first) = stages.first() {
        let _ = kill_process_group(first.pgid, Signal::KILL);
    }
    for s in stages.iter().filter(|s| !s.exited) {
        let _ = pidfd_send_signal(&s.pidfd, Signal::KILL);
    }
}

/// Waits for the stages of one pipeline, reading their output and feeding their input,
/// until they exit, the deadline passes, the client cancels, or their output passes
/// `total_limit` (`(deadline, total_limit)`; 0: no bound).
fn wait_pipeline(
    stages: &mut [Stage],
    (stdout, stderr): (&mut Capture, &mut Capture),
    feed: &mut StdinFeed,
    cancel: &OwnedFd,
    (deadline, total_limit, session): (Instant, u64, Option<&Interactive>),
) -> Stop {
    feed.write_some();
    loop {
        if stages.iter().all(|s| s.exited) {
            return Stop::None;
        }
        let now = Instant::now();
        if now >= deadline {
            return Stop::Timeout;
        }
        // A session's idle time moves on with each read or write: asked again each time
        // round, it wakes the poll only when it may have passed.
        let idle_at = session.and_then(|s| s.0.idle_at());
        if idle_at.is_some_and(|at| now >= at) {
            return Stop::Idle;
        }
        let wake = idle_at.map_or(deadline, |at| at.min(deadline));
        // Far more output than anyone will read: stop now rather than at the deadline.
        if total_limit > 0 && stdout.total + stderr.total > total_limit {
            return Stop::Flood;
        }
        // Poll set layout: [cancel, stdout?, stderr?, stdin?, pidfds...]
        let mut fds: Vec<PollFd<'_>> = vec![PollFd::new(cancel, PollFlags::IN)];
        let out_at = stdout.fd.as_ref().map(|fd| {
            fds.push(PollFd::new(fd, PollFlags::IN));
            fds.len() - 1
        });
        let err_at = stderr.fd.as_ref().map(|fd| {
            fds.push(PollFd::new(fd, PollFlags::IN));
            fds.len() - 1
        });
        let in_at = feed.fd.as_ref().map(|fd| {
            fds.push(PollFd::new(fd, PollFlags::OUT));
            fds.len() - 1
        });
        let first_pid = fds.len();
        let live: Vec<usize> = (0..stages.len()).filter(|&i| !stages[i].exited).collect();
        for &i in &live {
            fds.push(PollFd::new(&stages[i].pidfd, PollFlags::IN));
        }
        match poll(&mut fds, Some(&timespec(wake - now))) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => return Stop::Timeout,
        }
        let ready = |at: Option<usize>| at.is_some_and(|i| !fds[i].revents().is_empty());
        let cancelled = !fds[0].revents().is_empty();
        let (out_ready, err_ready, in_ready) = (ready(out_at), ready(err_at), ready(in_at));
        let exited: Vec<usize> = live
            .iter()
            .enumerate()
            .filter(|(j, _)| !fds[first_pid + j].revents().is_empty())
            .map(|(_, &i)| i)
            .collect();
        drop(fds);
        if cancelled {
            return Stop::Cancel;
        }
        if out_ready {
            stdout.read_some();
        }
        if err_ready {
            stderr.read_some();
        }
        if in_ready {
            feed.write_some();
        }
        for i in exited {
            // WNOWAIT: note the exit but leave the zombie, which keeps the group id pinned.
            let opts = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
            if let Ok(Some(_)) = waitid(WaitId::PidFd(stages[i].pidfd.as_fd()), opts) {
                stages[i].exited = true;
            }
        }
    }
}

fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}
