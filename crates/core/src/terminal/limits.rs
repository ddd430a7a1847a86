//! Which limit stopped a command (issue 32, item 5), named with the policy key that sets it,
//! so that a kill by the CPU, file-size, memory or process limit, or by the timeout, does
//! not reach the model as a bare exit status.
//!
//! The CPU and file-size limits announce themselves: the kernel sends SIGXCPU (the executor
//! sets the soft CPU limit one second below the hard one) and SIGXFSZ, seen as a stage's
//! signal or as a shell's exit status of 128 plus it. Running out of address space or of
//! processes shows only in what the program says, so those two are read from stderr and
//! said as "looks like".

use libc::{SIGXCPU, SIGXFSZ};
use safe_mcp_contract::ExecOutcome;

use crate::config::Limits;

/// What programs print when an allocation fails under RLIMIT_AS.
const OUT_OF_MEMORY: &[&str] = &[
    "memory allocation of",
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "std::bad_alloc",
    "Out of memory",
];

/// What programs print when RLIMIT_NPROC (or the pids cgroup) refuses a fork.
const NO_MORE_PROCESSES: &[&str] = &[
    "fork: Resource temporarily unavailable",
    "fork: retry",
    "Cannot fork",
    "can't fork",
    "Resource temporarily unavailable (os error 11)",
];

/// What programs print when seccomp or Landlock refuses them a TCP socket, bind or connect.
const NO_SOCKET: &[&str] = &[
    "[Errno 1] Operation not permitted",
    "listen EPERM",
    "connect EPERM",
    "bind EPERM",
    "Operation not permitted (os error 1)",
    "socket: Operation not permitted",
    "Couldn't connect to server",
];

/// What programs print when a name does not resolve (the view has no resolver at all).
const NO_RESOLVER: &[&str] = &[
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "getaddrinfo ENOTFOUND",
    "getaddrinfo EAI_AGAIN",
    "failed to lookup address information",
    "No address associated with hostname",
];

/// Why a failed run that could not resolve a name could not: the policy gives commands no
/// network, and the key that would allow a domain.
pub(super) fn no_network(out: &ExecOutcome, stderr: &str, off: bool) -> Option<String> {
    let failed = out.exit_code != Some(0);
    (failed && off && NO_RESOLVER.iter().any(|p| stderr.contains(p))).then(|| {
        "the policy gives commands no network ([terminal.network] mode = \"off\"): no name resolves and nothing beyond the sandbox is reached; if the task needs a site, the operator allows its domain with [terminal.network] mode = \"allowlist\" and allow_domains = [\"example.com\"]".to_owned()
    })
}

/// Why a failed run that looks refused a socket was: only where commands have no TCP at
/// all (`tcp` is the confinement summary's word for it).
pub(super) fn socket_refused(
    out: &ExecOutcome,
    stderr: &str,
    tcp: safe_mcp_contract::TcpReach,
) -> Option<String> {
    let failed = out.exit_code != Some(0);
    // Landlock refuses a TCP bind or connect with EACCES, which Python prints as a bare
    // PermissionError: only with a socket in the traceback is it taken for one.
    let python_socket =
        stderr.contains("[Errno 13] Permission denied") && stderr.contains("socket");
    let refused = NO_SOCKET.iter().any(|p| stderr.contains(p)) || python_socket;
    (failed && tcp == safe_mcp_contract::TcpReach::None && refused).then(|| {
        "it looks like a process was refused a network socket: with no private view here commands share the host's network, so listening and connecting are refused; [terminal.network] listen_ports names ports a dev server may use".to_owned()
    })
}

/// The limit that stopped the run, as its policy key and a sentence saying so, if one did.
pub(super) fn limit_hit(
    out: &ExecOutcome,
    stderr: &str,
    limits: &Limits,
) -> Option<(&'static str, String)> {
    if out.timed_out {
        return Some((
            "timeout_seconds",
            format!(
                "the call's wall-clock limit is [terminal.limits] timeout_seconds = {}; work that takes longer runs as a process session (start_process)",
                limits.timeout_seconds
            ),
        ));
    }
    if out.memory_limit_hit {
        return Some((
            "memory_bytes",
            format!(
                "a process used more memory than the limit and the kernel killed it: [terminal.limits] memory_bytes = {} for the whole command (its memory cgroup)",
                limits.memory_bytes
            ),
        ));
    }
    let signals = out.stages.iter().filter_map(|s| {
        s.signal.or_else(|| {
            s.exit_code
                .filter(|c| (129..=159).contains(c))
                .map(|c| c - 128)
        })
    });
    for signal in signals {
        match signal {
            SIGXCPU => {
                return Some((
                    "cpu_seconds",
                    format!(
                        "a process used up its CPU time and was stopped: [terminal.limits] cpu_seconds = {} per process",
                        limits.cpu_seconds
                    ),
                ));
            }
            SIGXFSZ => {
                return Some((
                    "file_size_bytes",
                    format!(
                        "a process wrote a file past the size limit and was stopped: [terminal.limits] file_size_bytes = {}",
                        limits.file_size_bytes
                    ),
                ));
            }
            _ => {}
        }
    }
    let failed = out.exit_code != Some(0);
    if failed && OUT_OF_MEMORY.iter().any(|p| stderr.contains(p)) {
        return Some((
            "memory_bytes",
            format!(
                "it looks like a process ran out of memory: [terminal.limits] memory_bytes = {} bounds each process's address space",
                limits.memory_bytes
            ),
        ));
    }
    if failed && NO_MORE_PROCESSES.iter().any(|p| stderr.contains(p)) {
        return Some((
            "processes",
            format!(
                "it looks like a process could not start another: [terminal.limits] processes = {}",
                limits.processes
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use safe_mcp_contract::{ExecOutcome, StageOutcome};

    use super::limit_hit;
    use crate::config::Limits;

    fn ended(exit_code: Option<i32>, signal: Option<i32>) -> ExecOutcome {
        ExecOutcome {
            stages: vec![StageOutcome {
                ran: true,
                exit_code,
                signal,
            }],
            exit_code: exit_code.or(signal.map(|s| 128 + s)),
            ..ExecOutcome::default()
        }
    }

    #[test]
    fn each_limit_is_named_by_its_key() {
        let limits = Limits::default();
        let key = |out: &ExecOutcome, stderr: &str| limit_hit(out, stderr, &limits).map(|l| l.0);
        assert_eq!(key(&ended(None, Some(24)), ""), Some("cpu_seconds"));
        assert_eq!(
            key(&ended(Some(152), None), ""),
            Some("cpu_seconds"),
            "a shell's 128 + SIGXCPU"
        );
        assert_eq!(key(&ended(None, Some(25)), ""), Some("file_size_bytes"));
        assert_eq!(
            key(&ended(Some(1), None), "MemoryError\n"),
            Some("memory_bytes")
        );
        assert_eq!(
            key(&ended(Some(2), None), "sh: 1: Cannot fork\n"),
            Some("processes")
        );
        let mut slow = ended(None, Some(9));
        slow.timed_out = true;
        assert_eq!(key(&slow, ""), Some("timeout_seconds"));
        // A plain failure, or a success that mentions memory, names no limit.
        assert_eq!(key(&ended(Some(1), None), "error: no such file\n"), None);
        assert_eq!(
            key(&ended(Some(0), None), "out of memory (handled)\n"),
            None
        );
        assert_eq!(key(&ended(None, Some(9)), ""), None);
        let (_, why) = limit_hit(&ended(None, Some(24)), "", &limits).unwrap();
        assert!(why.contains("cpu_seconds = 60"), "{why}");
    }
}
