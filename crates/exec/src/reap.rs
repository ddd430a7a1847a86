//! Process-tree control: the server is a child subreaper, and escapees die.
//!
//! Owns the rule that no process a command started outlives its call. A `setsid` or
//! double-forked grandchild leaves its process group, so `killpg` misses it; but because the
//! server is a child subreaper (`PR_SET_CHILD_SUBREAPER`), every orphan in a command's tree is
//! re-parented to the server instead of to init. Any child of the server that is not a stage
//! we spawned is therefore an escapee: it and its whole subtree are killed and reaped. Stage
//! pids are registered under a lock that the sweep also takes, so a sweep can never mistake a
//! just-started stage for an escapee.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, RwLock};

use rustix::process::{Pid, Signal, WaitOptions, kill_process, waitpid};

use crate::spawn::{SpawnError, Spawned};

/// Stage pids currently owned by a call (spawned, not yet reaped), with a count: a pid freed
/// by one call's reap can be reused by another call's stage before the first forgets it.
static STAGES: Mutex<Option<HashMap<u32, usize>>> = Mutex::new(None);
/// Spawners hold it shared from clone to registration; the sweep holds it exclusively.
static SPAWNING: RwLock<()> = RwLock::new(());
/// The session ids of live process sessions in the host view (each stage leads a session
/// of its own there): an orphan in one of them belongs to a session that still runs, and
/// is spared until that session ends.
static LIVE_SESSIONS: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// Spares the orphans of session `sid` from every sweep until [`release_session`].
pub(crate) fn protect_session(sid: u32) {
    let mut live = LIVE_SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    live.get_or_insert_with(HashSet::new).insert(sid);
}

/// Ends the protection of session `sid`: the next sweep kills what it left behind.
pub(crate) fn release_session(sid: u32) {
    let mut live = LIVE_SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(set) = live.as_mut() {
        set.remove(&sid);
    }
}

/// The session id of `pid`, from `/proc/<pid>/stat`.
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name's closing parenthesis: state, ppid, pgrp, session.
    stat.rsplit_once(") ")?.1.split(' ').nth(3)?.parse().ok()
}

/// Makes this process the subreaper of everything it starts. Call once, at server start.
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// Runs `spawn` and registers the child's pid before any sweep can look.
pub(crate) fn spawn_registered(
    spawn: impl FnOnce() -> Result<Spawned, SpawnError>,
) -> Result<Spawned, SpawnError> {
    let _guard = SPAWNING.read().unwrap_or_else(|e| e.into_inner());
    let child = spawn()?;
    let mut stages = STAGES.lock().unwrap_or_else(|e| e.into_inner());
    *stages
        .get_or_insert_with(HashMap::new)
        .entry(child.pid.as_raw_nonzero().get().unsigned_abs())
        .or_insert(0) += 1;
    Ok(child)
}

/// Runs `fork` (which returns the child's pid in the parent, or -1) and registers the child
/// for good, before any sweep can look: a helper of the server's own (the socket helper of
/// [`crate::inner`]), which lives as long as the server and is no escapee.
pub(crate) fn fork_kept(fork: impl FnOnce() -> libc::pid_t) -> libc::pid_t {
    let _guard = SPAWNING.read().unwrap_or_else(|e| e.into_inner());
    let pid = fork();
    if pid > 0 {
        let mut stages = STAGES.lock().unwrap_or_else(|e| e.into_inner());
        *stages
            .get_or_insert_with(HashMap::new)
            .entry(pid.unsigned_abs())
            .or_insert(0) += 1;
    }
    pid
}

/// Forgets a stage once it has been reaped.
pub(crate) fn forget(pid: Pid) {
    let mut stages = STAGES.lock().unwrap_or_else(|e| e.into_inner());
    let pid = pid.as_raw_nonzero().get().unsigned_abs();
    if let Some(map) = stages.as_mut()
        && let Some(count) = map.get_mut(&pid)
    {
        *count -= 1;
        if *count == 0 {
            map.remove(&pid);
        }
    }
}

/// True when this process has no child at all, running or exited: nothing can need a sweep.
/// One syscall, so the common case (the call's stages are reaped, nothing escaped) stays cheap.
fn no_children() -> bool {
    // SAFETY: an all-zero siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: WNOHANG|WNOWAIT only reports and reaps nothing; __WALL also counts children
    // with another exit signal, and every thread's children count (no __WNOTHREAD).
    let rc = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    rc == -1 && crate::step::errno() == libc::ECHILD
}

/// Kills and reaps every child of ours that is not a registered stage, with its subtree.
/// Repeats until none is left, since a dying escapee's own children are re-parented to us.
pub fn sweep_orphans() {
    let _guard = SPAWNING.write().unwrap_or_else(|e| e.into_inner());
    if no_children() {
        return;
    }
    for _ in 0..64 {
        let known: HashSet<u32> = STAGES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default();
        let live: HashSet<u32> = LIVE_SESSIONS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default();
        let orphans: Vec<u32> = children_of("self")
            .into_iter()
            .filter(|p| !known.contains(p))
            .filter(|p| live.is_empty() || !session_of(*p).is_some_and(|sid| live.contains(&sid)))
            .collect();
        if orphans.is_empty() {
            return;
        }
        for &orphan in &orphans {
            kill_tree(orphan);
        }
        for orphan in orphans {
            if let Some(pid) = Pid::from_raw(orphan as i32) {
                // Our child, killed above: this returns promptly, and reaping frees the pid.
                let _ = waitpid(Some(pid), WaitOptions::empty());
            }
        }
    }
}

/// SIGKILLs `root` and every descendant found through `/proc/<pid>/task/*/children`.
/// Stopped first, so that none can fork while the tree is being walked.
fn kill_tree(root: u32) {
    let mut seen: Vec<u32> = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        if seen.contains(&pid) {
            continue;
        }
        if let Some(p) = Pid::from_raw(pid as i32) {
            let _ = kill_process(p, Signal::STOP);
        }
        seen.push(pid);
        queue.extend(children_of(&pid.to_string()));
    }
    for pid in seen {
        if let Some(p) = Pid::from_raw(pid as i32) {
            let _ = kill_process(p, Signal::KILL);
        }
    }
}

/// Children of `proc_id` (`self` or a pid), from every one of its threads.
fn children_of(proc_id: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{proc_id}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}
