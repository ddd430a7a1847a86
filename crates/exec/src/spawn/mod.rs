//! Starting one stage: a vfork-style `clone` whose child only makes syscalls.
//!
//! Owns the step from "a prepared stage" to "a confined program is running, with a pidfd".
//! `fork` would copy the server's page tables and `exec` would tear the copy down again, which
//! costs more than the command `echo hi` itself; so, like glibc's `posix_spawn`, we clone with
//! `CLONE_VM | CLONE_VFORK`: the child borrows the server's memory on a stack of its own, and
//! the calling thread sleeps until the child has exec'd or exited. Unlike `posix_spawn` the
//! child also confines itself (pids cgroup, rlimits, capabilities, `no_new_privs`, Landlock,
//! seccomp) and then waits at the exec gate until the attempt record is durable: the steps
//! docs/CONFINEMENT.md numbers, each process's in one function of `child.rs`.
//!
//! Because the child shares the server's memory while other server threads keep running, it
//! must not allocate, take a lock or write anything of the parent's except the slots it is
//! given: every string, pointer array and descriptor is prepared here, in the parent
//! (`Prepared`), and the child (`child_main`) only reads them and makes syscalls, through
//! libc wrappers that take no lock (raw ones for read, write and the signal mask). All
//! signals are blocked across the clone and the child resets every caught signal to its
//! default before unblocking, so no server signal handler can run on the child's stack.
//!
//! In a private view with pid namespaces, one stage is three processes, all on stacks of
//! their own in the server's memory:
//! 1. the **first child** enters the view, unshares a pid and a mount namespace and starts
//! 2. the namespace's **init** (pid 1; `CLONE_PARENT`, so the server is its parent and the
//!    stage's pid is the init's), which mounts the namespace's `/proc` and vforks
//! 3. the **command**, which confines itself, waits at the gate and execs.
//!
//! The first child waits for the init's word that the command has exec'd (or failed), then
//! exits, and the server's thread resumes as with one process. The init then closes every
//! descriptor, reaps until the command exits, stores the command's wait status in a slot of
//! the server's ([`InitMemory`]) and exits; the kernel kills whatever else is left in the
//! namespace. From its word on, the init runs beside the server's threads, so it makes only
//! raw syscalls that never write the shared `errno` (rustix's, not libc's) and touches
//! nothing but its own stack and that slot, both of which the server keeps until it has
//! reaped the init.
//!
//! Steps 1 and 2 may also have been done before the call: a stage that can takes the
//! namespace made ahead (`ahead.rs`), and its init goes on from its call.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

use crate::step::Step;

mod ahead;
mod ahead_child;
mod child;
mod stage;
mod terminal;

use stage::{ChildStack, prepare_strings, reap, vfork};
pub(crate) use stage::{InitMemory, SpawnError, Spawned, StageSpawn};

use child::{PidNamespaceStage, Prepared, child_main, failure_code};

pub(crate) use ahead::Ahead;
pub(crate) use child::GATE_CLOSED;

/// Starts one stage. Returns once the program is running (or the child failed and was reaped).
/// A stage that may take the namespace `ahead` made starts there ([`Ahead::spawn`]).
pub(crate) fn spawn(s: &StageSpawn<'_>, ahead: Option<&Ahead>) -> Result<Spawned, SpawnError> {
    if s.stdio.iter().any(|fd| fd.as_raw_fd() < 3) || s.gate.as_raw_fd() < 3 {
        return Err(SpawnError::Parent(std::io::Error::other(
            "a descriptor to hand the child is below 3",
        )));
    }
    // A terminal is made by a stage's own init, in the devpts it mounts: never ahead.
    let ahead = ahead.filter(|_| s.terminal.is_none());
    if let Some(started) = ahead.and_then(|ahead| ahead.spawn(s)) {
        return started;
    }
    if s.terminal.is_some() && !(s.confinement.pid_namespace() && s.confinement.private_pts()) {
        return Err(SpawnError::Parent(std::io::Error::other(
            "a terminal needs a devpts of the command's own, which this view does not have (describe_policy: confinement.view.terminals)",
        )));
    }
    let strings = prepare_strings(s)?;
    let stack = ChildStack::new()?;
    let channel = if s.confinement.own_network() {
        Some(crate::step::Channel::new()?)
    } else {
        None
    };
    let terminal_channel = match s.terminal {
        Some(_) => Some(crate::step::Channel::new()?),
        None => None,
    };
    let server = rustix::process::getpid().as_raw_nonzero().get();
    let mut init = None;
    let mut command_stack = None;
    let pid_ns = if s.confinement.pid_namespace() {
        let memory = InitMemory::new()?;
        let command = ChildStack::new()?;
        let stage = PidNamespaceStage {
            init_stack: memory.stack_top(),
            command_stack: command.top(),
            status: memory.status_slot(),
            pts: s.confinement.private_pts(),
            init_pid: AtomicI32::new(0),
            report: AtomicI32::new(-1),
            terminal: match (&terminal_channel, s.terminal) {
                (Some(channel), Some(size)) => terminal::TerminalStage {
                    channel: channel.child.as_raw_fd(),
                    rows: size.rows,
                    cols: size.cols,
                },
                _ => terminal::TerminalStage::NONE,
            },
        };
        init = Some(memory);
        command_stack = Some(command);
        Some(stage)
    } else {
        None
    };
    let prepared = Prepared {
        exec: strings.exec(&s.stdio),
        // With a pid namespace the init leaves the group for a session of its own, so each
        // stage starts a group of its own: its init, killed through its pidfd, takes the
        // namespace down with it.
        pgid: if pid_ns.is_some() || s.new_session {
            0
        } else {
            s.pgid
        },
        new_session: s.new_session && pid_ns.is_none(),
        gate: s.gate.as_raw_fd(),
        gate_writer: s.gate_writer,
        parent: if pid_ns.is_some() { 1 } else { server },
        confinement: std::ptr::from_ref(s.confinement),
        call: std::ptr::from_ref(s.call),
        exec_group: s.exec_group,
        exec_log: s.exec_log,
        keep_death_signal: s.keep_death_signal,
        egress_channel: channel.as_ref().map_or(-1, |c| c.child.as_raw_fd()),
        failure: AtomicI32::new(0),
        pid_ns,
    };

    // SAFETY: the child runs `child_main` on `stack`, which is ours and large enough, and
    // reads `prepared`, alive on our frame; it makes only raw syscalls and writes only
    // `prepared`'s atomic slots (see `child_main`).
    let cloned = unsafe {
        vfork(
            child_main,
            stack.top(),
            std::ptr::from_ref(&prepared).cast_mut().cast::<c_void>(),
        )
    };
    drop(stack);
    drop(command_stack);
    drop(strings);
    let (pid, pidfd) = cloned?;
    let pgid = if prepared.pgid == 0 {
        pid.as_raw_nonzero().get()
    } else {
        prepared.pgid
    };
    let failure = prepared.failure.load(Ordering::Acquire);
    // The first child has sent its listener, or failed (which the failure slot says); a
    // listener that did not arrive is a failure of the network step. Likewise the init has
    // sent its terminal's master.
    let (failure, listener) = received(channel.as_ref(), failure, Step::Network);
    let (failure, terminal) = received(terminal_channel.as_ref(), failure, Step::Terminal);
    let listener = listener.map(std::net::TcpListener::from);
    let mut spawned = settle(&prepared, (pid, pidfd, pgid), failure, listener, init)?;
    spawned.terminal = terminal;
    Ok(spawned)
}

/// What a stage's child sent on `channel` (if the stage has one) when `failure` says the
/// stage got that far; a descriptor that did not arrive is a failure of `step`.
fn received(
    channel: Option<&crate::step::Channel>,
    failure: i32,
    step: Step,
) -> (i32, Option<OwnedFd>) {
    match (channel, failure) {
        (Some(channel), 0) => match channel.receive_fd(step.as_str()) {
            Ok(fd) => (0, Some(fd)),
            Err(e) => (
                failure_code(step, e.raw_os_error().unwrap_or(libc::EIO)),
                None,
            ),
        },
        (_, failure) => (failure, None),
    }
}

/// The stage once its first child has exited (or exec'd): started, or failed and cleaned
/// up. With a pid namespace the stage is its init, which left the first child's group for
/// a session of its own, so its group is the init's pid, pinned by the init itself until we
/// reap it: never a stranger's.
fn settle(
    prepared: &Prepared,
    (pid, pidfd, pgid): (Pid, OwnedFd, libc::pid_t),
    failure: i32,
    listener: Option<std::net::TcpListener>,
    init: Option<InitMemory>,
) -> Result<Spawned, SpawnError> {
    let Some(stage) = &prepared.pid_ns else {
        if failure != 0 {
            // The child has exited (or, its listener lost, runs): end it and reap it, so
            // that it leaves no zombie.
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            let _ = reap(&pidfd);
            return Err(SpawnError::from_failure(failure));
        }
        return Ok(Spawned {
            pid,
            pidfd,
            pgid,
            init: None,
            listener,
            terminal: None,
        });
    };
    // The first child has exited either way; the init, if there is one, is our child.
    let _ = reap(&pidfd);
    let init_pid = Pid::from_raw(stage.init_pid.load(Ordering::Acquire));
    let init_fd =
        init_pid.map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()));
    match (failure, init_pid, init_fd, init) {
        // The init left the first child's group for a session of its own, so its group
        // is the init's pid, pinned by the init itself until we reap it: never a stranger's.
        (0, Some(init_pid), Some(Ok(init_fd)), Some(memory)) => Ok(Spawned {
            pid: init_pid,
            pidfd: init_fd,
            pgid: init_pid.as_raw_nonzero().get(),
            init: Some(memory),
            listener,
            terminal: None,
        }),
        (failure, _, init_fd, memory) => {
            if let Some(Ok(fd)) = &init_fd {
                let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
                // Its stack is unmapped only once it is certainly gone; otherwise leaked.
                if reap(fd)
                    && let Some(memory) = memory
                {
                    memory.free();
                }
            }
            Err(match failure {
                0 => SpawnError::Child {
                    step: Step::PidNamespace,
                    errno: libc::ECHILD,
                },
                f => SpawnError::from_failure(f),
            })
        }
    }
}
