//! A stage made ahead of its call: a pid namespace, ready before the call that uses it.
//!
//! In a private view with pid namespaces, most of a stage's start is the same for every call:
//! entering the view, a pid, mount and ipc namespace of the stage's own (docs/CONFINEMENT.md,
//! steps 5 to 12), its init, the namespace's `/proc` and devpts. Here one such stage is made
//! while the server waits for its next call, by a thread of the executor's own (the
//! *filler*), and the next eligible stage takes it ([`Ahead::spawn`]) and sends its init what
//! only the call knows: its descriptors, over a socketpair with `SCM_RIGHTS`, and where its
//! [`Prepared`] is (the init runs in the server's memory). From there the init does what
//! every init does ([`super::child::start_command`]): holds the call's temporary directory,
//! adds its `/proc` to the call's ruleset, and vforks the command, which confines itself
//! (rlimits, capabilities, Landlock with the call's ruleset, seccomp), waits at the gate and
//! execs. So each command still gets a pid, mount and ipc namespace, a Landlock domain and a
//! seccomp filter of its own; a namespace made ahead serves exactly one stage and dies with
//! it, and nothing of an earlier call can reach it: it was made from the view's namespaces,
//! which no command can change, while the earlier call's ran in namespaces of their own.
//!
//! The filler's children run on its thread's stack copy and thread-local storage, as every
//! spawn child does on its caller's: so the filler vforks the first child and stays
//! suspended until that child exits, which it does only after the init's word that the
//! command has exec'd (or once the init is gone). While the server waits for a call, the
//! init waits in `recvmsg` with every signal blocked; if the server closes its end (the
//! executor is dropped), it exits, and the filler with it.
//!
//! A stage takes the namespace only where it needs nothing the filler could not make ahead:
//! no egress (which gives each stage a network namespace of its own), no exec log, no
//! process session. Any other stage, or one that finds the namespace still being made, is
//! started the usual way ([`super::spawn`]). No sweep for escapees runs where stages have
//! pid namespaces (`run.rs`): nothing they start can be re-parented to the server, so the
//! filler's children need no registering with the reaper.

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::event::{PollFd, PollFlags};
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{Pid, PidfdFlags, Signal};

use crate::confine::Confinement;
use crate::step::Step;

use super::ahead_child::{AheadPrepared, Control, MAX_DESCRIPTORS, MESSAGE_BYTES, first_main};
use super::child::Prepared;
use super::stage::{
    ChildStack, InitMemory, SpawnError, Spawned, StageSpawn, prepare_strings, reap, vfork,
};

/// The variable that turns stages made ahead off (`0`), for benchmarks side by side.
pub(crate) const SWITCH: &str = "SAFE_MCP_NAMESPACES_AHEAD";

/// The executor's filler and the namespace it has ready, if any.
#[derive(Debug)]
pub(crate) struct Ahead {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    ready: Mutex<Option<Slot>>,
    stopping: AtomicBool,
    /// How many stages started in a namespace made ahead.
    served: AtomicU64,
}

/// A namespace made ahead, as a call takes it.
struct Slot {
    control: Arc<Control>,
    /// The server's end of the socketpair to the init.
    socket: OwnedFd,
    /// The read end of the pipe on which the init gives its word.
    word: OwnedFd,
    /// The server's copies of the init's ends (its socket end and the word's write end),
    /// kept until the word so that no descriptor the call sends has their numbers.
    _init_ends: [OwnedFd; 2],
    init: InitMemory,
    command_stack: ChildStack,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("control", &self.control)
            .finish()
    }
}

impl Ahead {
    /// Starts the filler for `confinement`, where stages have pid namespaces and no network
    /// namespace of their own, unless [`SWITCH`] says `0`.
    pub(crate) fn start(confinement: &Arc<Confinement>) -> Option<Ahead> {
        let wanted = confinement.pid_namespace()
            && !confinement.own_network()
            && !confinement.exec_log()
            && std::env::var_os(SWITCH).is_none_or(|v| v != "0");
        if !wanted {
            return None;
        }
        let shared = Arc::new(Shared::default());
        let (filler, confinement) = (Arc::clone(&shared), Arc::clone(confinement));
        std::thread::Builder::new()
            .name("safe-mcp-ahead".into())
            .spawn(move || fill(&filler, &confinement))
            .ok()?;
        Some(Ahead { shared })
    }

    /// How many stages started in a namespace made ahead.
    pub(crate) fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// Starts `s` in the namespace made ahead, if `s` may take it and it is ready: `None`
    /// leaves `s` to the usual spawn, with nothing done.
    pub(crate) fn spawn(&self, s: &StageSpawn<'_>) -> Option<Result<Spawned, SpawnError>> {
        if s.exec_log >= 0 || s.new_session || s.keep_death_signal {
            return None;
        }
        let slot = {
            let mut ready = self.shared.ready.lock().ok()?;
            let control = &ready.as_ref()?.control;
            if !control.ready.load(Ordering::Acquire)
                || control.init_pid.load(Ordering::Acquire) <= 0
            {
                return None;
            }
            ready.take()?
        };
        let started = start(s, slot);
        if started.is_ok() {
            self.shared.served.fetch_add(1, Ordering::Relaxed);
        }
        Some(started)
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        // The init reads end-of-file and exits, then the first child, then the filler. Its
        // stacks are leaked (never unmapped under a process that may still run).
        let slot = self.shared.ready.lock().ok().and_then(|mut r| r.take());
        if let Some(slot) = slot {
            std::mem::forget(slot.command_stack);
            drop(slot.socket);
            drop(slot._init_ends);
        }
    }
}

/// The filler's life: make a namespace, wait (suspended) until a call has used it or it is
/// gone, reap what is left, again; until the executor is dropped or a namespace cannot be
/// made, after which every stage starts the usual way (and reports why it cannot, if so).
fn fill(shared: &Shared, confinement: &Confinement) {
    while !shared.stopping.load(Ordering::Acquire) {
        if make_one(shared, confinement).is_err() {
            return;
        }
    }
}

/// Makes one namespace and waits until its first child has exited. An error means the
/// namespace could not be made, or its init died before any call took it.
fn make_one(shared: &Shared, confinement: &Confinement) -> std::io::Result<()> {
    let first_stack = ChildStack::new()?;
    let init = InitMemory::new()?;
    let command_stack = ChildStack::new()?;
    let (socket, init_socket) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    let (word, init_word) = pipe_with(PipeFlags::CLOEXEC)?;
    let control = Arc::new(Control::default());
    let failure = AtomicI32::new(0);
    let prepared = AheadPrepared {
        confinement: std::ptr::from_ref(confinement),
        init_stack: init.stack_top(),
        command_stack: command_stack.top(),
        status: init.status_slot(),
        pts: confinement.private_pts(),
        socket: init_socket.as_raw_fd(),
        word: init_word.as_raw_fd(),
        control: Arc::as_ptr(&control),
        failure: std::ptr::from_ref(&failure),
        report: AtomicI32::new(-1),
    };
    if let Ok(mut ready) = shared.ready.lock() {
        *ready = Some(Slot {
            control: Arc::clone(&control),
            socket,
            word,
            _init_ends: [init_socket, init_word],
            init,
            command_stack,
        });
    }
    // SAFETY: the first child runs `first_main` on `first_stack` and reads `prepared`, both
    // alive on this frame; this thread sleeps until the child has exited, so no code of ours
    // shares its thread-local storage meanwhile. It makes raw syscalls only (`ahead_child`).
    let cloned = unsafe {
        vfork(
            first_main,
            first_stack.top(),
            std::ptr::from_ref(&prepared)
                .cast_mut()
                .cast::<libc::c_void>(),
        )
    };
    // Not taken by a call: ours to end, whatever happened.
    let left = shared.ready.lock().ok().and_then(|mut r| r.take());
    let (_, pidfd) = cloned?;
    let _ = reap(&pidfd);
    drop(first_stack);
    match left {
        // A call took it, and reaps its init: the next one.
        None => Ok(()),
        Some(slot) => {
            // Stopping, or the namespace failed before any call: its init is gone or
            // going (the first child exits only once it is), so this wait is short.
            let init_pid = Pid::from_raw(slot.control.init_pid.load(Ordering::Acquire));
            if let Some(init_pid) = init_pid
                && let Ok(fd) = rustix::process::pidfd_open(init_pid, PidfdFlags::empty())
            {
                let _ = rustix::process::pidfd_send_signal(&fd, Signal::KILL);
                if reap(&fd) {
                    slot.init.free();
                }
            }
            if shared.stopping.load(Ordering::Acquire) {
                Ok(())
            } else {
                let failure = SpawnError::from_failure(failure.load(Ordering::Acquire));
                Err(std::io::Error::other(failure.to_string()))
            }
        }
    }
}

/// Hands the call to the init of `slot` and waits for its word.
fn start(s: &StageSpawn<'_>, slot: Slot) -> Result<Spawned, SpawnError> {
    let Slot {
        control,
        socket,
        word,
        _init_ends,
        init,
        command_stack,
    } = slot;
    let init_pid = Pid::from_raw(control.init_pid.load(Ordering::Acquire))
        .ok_or_else(|| std::io::Error::other("the namespace made ahead has no init"))?;
    let init_fd = match rustix::process::pidfd_open(init_pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            // The init reads end-of-file and exits; reaped here, it leaves no zombie.
            drop((socket, _init_ends));
            let _ = rustix::process::waitpid(Some(init_pid), rustix::process::WaitOptions::empty());
            return Err(SpawnError::Parent(e.into()));
        }
    };
    let end = |failure: SpawnError, init: InitMemory| {
        let _ = rustix::process::pidfd_send_signal(&init_fd, Signal::KILL);
        if reap(&init_fd) {
            init.free();
        }
        Err(failure)
    };
    let strings = prepare_strings(s)?;
    let prepared = Prepared {
        exec: strings.exec(&s.stdio),
        pgid: 0,
        new_session: false,
        gate: s.gate.as_raw_fd(),
        // The init never had it: the first child closed what it inherited.
        gate_writer: -1,
        parent: 1,
        confinement: std::ptr::from_ref(s.confinement),
        call: std::ptr::from_ref(s.call),
        exec_group: s.exec_group,
        exec_log: -1,
        keep_death_signal: false,
        egress_channel: -1,
        failure: AtomicI32::new(0),
        pid_ns: None,
    };
    // Each descriptor the init and the command read, and the number they read it at.
    let mut fds: Vec<(BorrowedFd<'_>, RawFd)> = s
        .stdio
        .iter()
        .enumerate()
        .map(|(target, fd)| (*fd, target as RawFd))
        .collect();
    fds.push((s.gate, s.gate.as_raw_fd()));
    for fd in s.confinement.child_descriptors(s.call, s.exec_group) {
        // SAFETY: a descriptor of the confinement or the call, both alive for this call.
        fds.push((unsafe { BorrowedFd::borrow_raw(fd) }, fd));
    }
    if fds.len() > MAX_DESCRIPTORS {
        return end(
            SpawnError::Parent(std::io::Error::other("too many descriptors to hand over")),
            init,
        );
    }
    let mut message = [0u8; MESSAGE_BYTES];
    let address = std::ptr::from_ref(&prepared) as usize as u64;
    message[..8].copy_from_slice(&address.to_ne_bytes());
    message[8..12].copy_from_slice(&(fds.len() as u32).to_ne_bytes());
    for (k, (_, target)) in fds.iter().enumerate() {
        message[12 + 4 * k..16 + 4 * k].copy_from_slice(&target.to_ne_bytes());
    }
    let passed: Vec<BorrowedFd<'_>> = fds.iter().map(|(fd, _)| *fd).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_DESCRIPTORS))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&passed)) {
        return end(
            SpawnError::Parent(std::io::Error::other("the descriptors do not fit")),
            init,
        );
    }
    let iov = [std::io::IoSlice::new(&message)];
    if let Err(e) = rustix::net::sendmsg(&socket, &iov, &mut ancillary, SendFlags::NOSIGNAL) {
        return end(SpawnError::Parent(e.into()), init);
    }
    // The word (the command has exec'd, or failed and said so in `prepared.failure`), or the
    // init's end, before which nothing of `prepared` may go.
    let worded = wait_for_word(&word, &init_fd);
    drop(command_stack);
    drop((socket, word, _init_ends));
    let failure = prepared.failure.load(Ordering::Acquire);
    drop(strings);
    match (worded, failure) {
        (Ok(true), 0) => Ok(Spawned {
            pid: init_pid,
            pidfd: init_fd,
            pgid: init_pid.as_raw_nonzero().get(),
            init: Some(init),
            listener: None,
            terminal: None,
        }),
        (Ok(_), f) if f != 0 => end(SpawnError::from_failure(f), init),
        (Ok(_), _) => end(
            SpawnError::Child {
                step: Step::PidNamespace,
                errno: libc::ECHILD,
            },
            init,
        ),
        (Err(e), _) => end(SpawnError::Parent(e.into()), init),
    }
}

/// Waits until the init gives its word (true) or exits without it (false).
fn wait_for_word(word: &OwnedFd, init: &OwnedFd) -> rustix::io::Result<bool> {
    loop {
        let mut fds = [
            PollFd::new(word, PollFlags::IN),
            PollFd::new(init, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
        if !fds[0].revents().is_empty() {
            let mut byte = [0u8; 1];
            return Ok(matches!(rustix::io::read(word, &mut byte), Ok(1)));
        }
        if !fds[1].revents().is_empty() {
            return Ok(false);
        }
    }
}
