//! The executor of safe-mcp: the only crate with `unsafe`.
//!
//! It runs an [`ExecPlan`] that the core already approved, and nothing else: it starts each
//! stage with a vfork-style clone (`spawn`) in its own process group and private view, with
//! the plan's environment, and confines it in the child ([`confine`]) in the order
//! docs/CONFINEMENT.md writes down; it wires the pipes itself, enforces the deadline, caps
//! output, and kills and reaps the whole tree, `setsid` escapees included ([`reap`]). It
//! never decides *whether* something may run.
//!
//! It depends on the small contract crate (`safe-mcp-contract`: plan, stage, outcome,
//! report) and on the kernel, not on the policy parser of the core.
//!
//! ```no_run
//! # fn demo(spec: &safe_mcp_contract::ConfinementSpec) -> Result<(), Box<dyn std::error::Error>> {
//! use safe_mcp_contract::Executor;
//! let executor = safe_mcp_exec::LocalExecutor::new(spec)?;
//! println!("{}", executor.confinement().landlock.enforced);
//! # Ok(()) }
//! ```

#![deny(
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block
)]

mod capture;
pub mod confine;
mod egress;
mod execlog;
mod fault;
mod inner;
pub mod reap;
mod run;
mod rundir;
mod seccomp;
mod spawn;
mod step;
mod tmp;
mod view;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use rustix::pipe::{PipeFlags, pipe_with};
use safe_mcp_contract::{
    CALL_TMP_VARIABLES, Cancel, ConfinementReport, ConfinementSpec, ConfinementSummary, Durable,
    ExecFailure, ExecFuture, ExecPlan, Executor, KernelReport, NO_PROXY_VARIABLES, PROXY_VARIABLES,
};

pub use confine::{ConfineError, Confinement, capability_report, landlock_abi, planned_report};

/// Runs approved plans on this machine, confined.
#[derive(Debug, Clone)]
pub struct LocalExecutor {
    confinement: Arc<Confinement>,
    /// Standard input of stages that are given none, and the namespace made ahead.
    starts: Arc<run::Starts>,
    /// The helper that makes sockets in the view's network namespace, made on first use.
    inner: Arc<std::sync::OnceLock<Result<inner::SocketFactory, String>>>,
}

impl LocalExecutor {
    /// Builds the confinement for `spec` and makes this process a child subreaper.
    pub fn new(spec: &ConfinementSpec) -> Result<Self, ConfineError> {
        reap::become_subreaper().map_err(|source| ConfineError::Process {
            what: "becoming the children's subreaper",
            source,
        })?;
        let dev_null =
            std::fs::File::open("/dev/null").map_err(|source| ConfineError::Process {
                what: "opening /dev/null",
                source,
            })?;
        let confinement = Arc::new(Confinement::new(spec)?);
        let ahead = spawn::Ahead::start(&confinement);
        Ok(LocalExecutor {
            confinement,
            starts: Arc::new(run::Starts {
                dev_null: dev_null.into(),
                ahead,
            }),
            inner: Arc::default(),
        })
    }

    /// How many stages started in a pid namespace made ahead of their call (for tests and
    /// benchmarks: the rest started the usual way).
    pub fn stages_made_ahead(&self) -> u64 {
        self.starts.ahead.as_ref().map_or(0, spawn::Ahead::served)
    }
}

impl Executor for LocalExecutor {
    fn inner_socket(&self, v6: bool) -> Result<OwnedFd, String> {
        match self.confinement.shared_network()? {
            Some(namespaces) => self
                .inner
                .get_or_init(|| inner::SocketFactory::start(&namespaces))
                .as_ref()
                .map_err(Clone::clone)?
                .socket(v6),
            None => inner::host_socket(v6),
        }
    }

    fn confinement(&self) -> &ConfinementReport {
        self.confinement.report()
    }

    fn close(&self) {
        self.confinement.remove_cgroups();
    }

    fn scratch_root(&self) -> Option<&std::path::Path> {
        Some(self.confinement.tmp_root())
    }

    fn confinement_summary(&self) -> &ConfinementSummary {
        self.confinement.summary()
    }

    fn execute<'a>(
        &'a self,
        plan: ExecPlan,
        cancel: Cancel,
        durable: Durable<'a>,
    ) -> ExecFuture<'a> {
        let confinement = Arc::clone(&self.confinement);
        let starts = Arc::clone(&self.starts);
        Box::pin(async move {
            let mut plan = plan;
            // The call's own temporary directory and the ruleset that lets it write there;
            // removed when this future ends, after the whole tree is gone.
            let programs = plan.pipelines.iter().flatten().map(|s| s.program.as_path());
            let mut call = confinement
                .for_call(programs)
                .map_err(|e| ExecFailure::Sandbox(e.to_string()))?;
            let tmp = call.tmp().to_string_lossy().into_owned();
            for name in CALL_TMP_VARIABLES {
                set_env(&mut plan.env, name, &tmp);
            }
            // Egress: the proxy's address for every tool that reads the usual variables. A
            // call without a proxy has no way out at all, and is refused rather than run
            // with a network that silently fails.
            let mut serving = None;
            if let Some(port) = call.proxy_port {
                let Some(egress) = plan.egress.clone() else {
                    return Err(ExecFailure::Sandbox(
                        "egress is on but the call has no proxy".into(),
                    ));
                };
                let proxy = format!("http://127.0.0.1:{port}");
                for name in PROXY_VARIABLES {
                    set_env(&mut plan.env, name, &proxy);
                }
                for name in NO_PROXY_VARIABLES {
                    set_env(&mut plan.env, name, "");
                }
                // The landlock tier's listener is the call's; the namespace tier's come
                // with each stage (see `run`).
                serving = call.listener.take().map(|l| egress.0.serve(l));
            }
            let internal = |e: rustix::io::Errno| ExecFailure::Internal(e.to_string());
            // The blocking loop polls the read end. Closing the write end (on cancel, or when
            // this future is dropped mid-call) wakes it with POLLHUP, and the tree is killed.
            let (cancel_r, cancel_w) = pipe_with(PipeFlags::CLOEXEC).map_err(internal)?;
            // Each child reads one byte from the gate as the last step before exec: cloning
            // and confining overlap the attempt record's fsync, but no program runs before it.
            let (gate_r, gate_w) = pipe_with(PipeFlags::CLOEXEC).map_err(internal)?;
            let gate_writer = gate_w.as_raw_fd();
            let stages: usize = plan.pipelines.iter().map(Vec::len).sum();
            let mut task = tokio::task::spawn_blocking(move || {
                let outcome = run::run_plan(
                    &plan,
                    &confinement,
                    &call,
                    &starts,
                    &cancel_r,
                    &gate_r,
                    gate_writer,
                );
                // Every process of the call is gone: its temporary directory (and its memory
                // cgroup, once read) can go.
                let memory_limit_hit = call.memory_limit_hit();
                drop(call);
                outcome.map(|mut o| {
                    o.memory_limit_hit = memory_limit_hit;
                    o
                })
            });
            let released = durable.await;
            // One ticket per stage: 1 lets it exec, 0 sends it away. A ticket is written either
            // way, since every cloned child holds a copy of the write end and would never see
            // end-of-file.
            let tickets = vec![u8::from(released); stages.max(1)];
            match rustix::io::write(&gate_w, &tickets) {
                Ok(n) if n == tickets.len() => {}
                // No reader is left: a stage failed to start and the executor has returned.
                Err(rustix::io::Errno::PIPE) => {}
                Ok(_) => {
                    return Err(ExecFailure::Internal(
                        "the gate pipe took a short write".into(),
                    ));
                }
                Err(e) => return Err(internal(e)),
            }
            drop(gate_w);
            let joined = tokio::select! {
                joined = &mut task => joined,
                () = cancel => {
                    drop(cancel_w);
                    task.await
                }
            };
            // The proxy stops serving the call once its processes are gone.
            drop(serving);
            let outcome =
                joined.map_err(|e| ExecFailure::Internal(format!("executor task failed: {e}")))?;
            if !released {
                return Err(ExecFailure::NotDurable);
            }
            outcome
        })
    }
}

/// Sets `name` in `env`, replacing any value it had.
fn set_env(env: &mut Vec<(String, String)>, name: &str, value: &str) {
    env.retain(|(n, _)| n != name);
    env.push((name.to_owned(), value.to_owned()));
}

/// What this kernel can enforce, for `safe-mcp doctor`.
pub fn kernel_report() -> KernelReport {
    let subreaper = rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_ok();
    let openat2 = std::fs::File::open("/").is_ok_and(|root| {
        rustix::fs::openat2(
            &root,
            "proc",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
            rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS,
        )
        .is_ok()
    });
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp:")));
    // SAFETY: getpid through the x32 syscall range takes no arguments and has no effect; it
    // only tells whether this kernel accepts x32 syscalls at all (ENOSYS when it does not).
    let x32 = unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) } >= 0;
    let abi = landlock_abi();
    KernelReport {
        x32_abi: if x32 {
            "enabled (the seccomp filter answers x32 syscall numbers with ENOSYS)"
        } else {
            "disabled"
        },
        landlock_abi: abi,
        landlock: if abi >= 6 {
            "full (ABI >= 6: filesystem, TCP, scoping)"
        } else if abi > 0 {
            "partial"
        } else {
            "unavailable"
        },
        seccomp_filter: seccomp,
        openat2_resolve_beneath: openat2,
        child_subreaper: subreaper,
        proc_children: std::path::Path::new("/proc/self/task").exists(),
        euid: rustix::process::geteuid().as_raw(),
        command_capabilities: capability_report(),
        egress_tier: confine::egress_tier_here(),
        private_view: confine::namespaces_possible(),
    }
}
