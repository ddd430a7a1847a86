//! The seccomp filter every confined command runs under (DESIGN §5), assembled by hand.
//!
//! One short classic-BPF program, read top to bottom:
//!
//! 1. a syscall made through another ABI than the server's (i386 `int 0x80` on x86_64) kills
//!    the process: the numbers below would mean other syscalls there;
//! 2. on x86_64, the x32 syscall range (numbers with bit 30 set, which alias the x86_64
//!    ones) answers ENOSYS, as a kernel built without x32 does;
//! 3. `clone3` answers ENOSYS, so libc falls back to `clone`: `clone3` passes its flags in
//!    memory, where a filter cannot look;
//! 4. `clone` with any `CLONE_NEW*` flag fails with EPERM, like `unshare`;
//! 5. `socket` follows the two switches: without network only AF_UNIX is allowed (nothing
//!    at all when unix sockets are off too); with network, anything but AF_UNIX when unix
//!    sockets are off; with egress ([`Inet::Tcp`]), AF_INET and AF_INET6 only as TCP
//!    streams (type SOCK_STREAM, protocol 0 or IPPROTO_TCP): no UDP, no raw socket, no
//!    SCTP, nothing Landlock's TCP rules would not see;
//! 6. a mode with the setuid or setgid bit fails with EPERM, in every call that sets one
//!    the kernel keeps (the chmod family, `open`/`openat`/`creat`, `mknod`/`mknodat`), and
//!    so does a `mknod` of a character or block device: a root server's command must not
//!    leave a setuid-root program or a raw device behind (the capability drop and
//!    Landlock refuse the same things again). `openat2` answers ENOSYS, since it passes its
//!    mode in memory, and libc falls back to `openat`; `execveat` of a descriptor itself
//!    (`AT_EMPTY_PATH`, as `fexecve` does) fails with EPERM, since a memfd the command wrote
//!    would run past every mount's `noexec`;
//! 7. `ioctl` with a request that pushes input into a terminal or reaches another one
//!    ([`TERMINAL_IOCTLS`]: `TIOCSTI`, `TIOCLINUX`, `TIOCCONS`, `TIOCSETD`) fails with
//!    EPERM: a command that can open a terminal (the server's own, when it was started from
//!    one, or a pty of its own) must not type into it what runs after the call;
//! 8. the deny-list fails with EPERM; everything else is allowed.
//!
//! We assemble it ourselves instead of using seccompiler for two reasons. Every command
//! installs the filter, and the kernel's cost of installing one grows with its length (it
//! translates and JIT-compiles it and emulates it once per syscall number to build its
//! allow-cache, walking the program for each): seccompiler's two programs for fewer rules
//! were 207 instructions; this one, with the argument checks of steps 6 and 7, is 118 (126
//! with egress's TCP checks), and since steps 3 to 8 are one binary search over syscall
//! numbers ([`search`]), no number walks more than 16 of them. And seccompiler cannot express step 2.

use std::collections::HashMap;

/// A classic-BPF program, ready for `seccomp(SECCOMP_SET_MODE_FILTER)`.
pub(crate) type Program = Vec<libc::sock_filter>;

/// Syscalls no command needs and every escape wants (DESIGN §5).
pub(crate) const DENIED_SYSCALLS: &[(&str, libc::c_long)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("bpf", libc::SYS_bpf),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("pivot_root", libc::SYS_pivot_root),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    // The rest of the new mount API, beside fsopen/fsmount/move_mount/open_tree above.
    ("fspick", libc::SYS_fspick),
    ("fsconfig", libc::SYS_fsconfig),
    ("mount_setattr", libc::SYS_mount_setattr),
    // Another process's descriptors or memory; a file by handle, past every path check.
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("process_madvise", libc::SYS_process_madvise),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    // The machine itself: what a root server's commands could otherwise reach.
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    // Ownership: a command never needs to give a file away, and Landlock does not mediate
    // chown, so a symlink moved by an earlier stage could aim it outside the jail.
    ("fchown", libc::SYS_fchown),
    ("fchownat", libc::SYS_fchownat),
];

/// x86 only: raw I/O port access, and the legacy chown calls (aarch64 has only fchownat).
#[cfg(target_arch = "x86_64")]
pub(crate) const DENIED_X86: &[(&str, libc::c_long)] = &[
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("chown", libc::SYS_chown),
    ("lchown", libc::SYS_lchown),
];
#[cfg(not(target_arch = "x86_64"))]
pub(crate) const DENIED_X86: &[(&str, libc::c_long)] = &[];

/// System V IPC: objects that live in the ipc namespace, not in any file Landlock sees. A
/// command with an ipc namespace of its own (each command of the private view) may use
/// them; one that shares the host's (or the view's, with no pid namespace per command) could
/// read and overwrite another process's segments and leave its own behind, so there they are
/// refused.
pub(crate) const SYSV_IPC: &[(&str, libc::c_long)] = &[
    ("shmget", libc::SYS_shmget),
    ("shmat", libc::SYS_shmat),
    ("shmdt", libc::SYS_shmdt),
    ("shmctl", libc::SYS_shmctl),
    ("msgget", libc::SYS_msgget),
    ("msgsnd", libc::SYS_msgsnd),
    ("msgrcv", libc::SYS_msgrcv),
    ("msgctl", libc::SYS_msgctl),
    ("semget", libc::SYS_semget),
    ("semop", libc::SYS_semop),
    ("semtimedop", libc::SYS_semtimedop),
    ("semctl", libc::SYS_semctl),
];

/// Every syscall the filter refuses with EPERM, whatever its arguments.
pub(crate) fn denied() -> impl Iterator<Item = &'static (&'static str, libc::c_long)> {
    DENIED_SYSCALLS.iter().chain(DENIED_X86)
}

/// Every namespace flag of `clone`. All live in the low 32 bits of its first argument.
const CLONE_NEW_ANY: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u32;

/// The setuid and setgid bits of a mode.
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// Calls that set a file's mode, with the index of their mode argument. A mode with
/// [`SET_ID_BITS`] is refused in each.
#[cfg(target_arch = "x86_64")]
const MODE_SETTERS: &[(&str, libc::c_long, u32)] = &[
    ("chmod", libc::SYS_chmod, 1),
    ("fchmod", libc::SYS_fchmod, 1),
    ("fchmodat", libc::SYS_fchmodat, 2),
    ("fchmodat2", libc::SYS_fchmodat2, 2),
    ("creat", libc::SYS_creat, 1),
    ("open", libc::SYS_open, 2),
    ("openat", libc::SYS_openat, 3),
];
#[cfg(not(target_arch = "x86_64"))]
const MODE_SETTERS: &[(&str, libc::c_long, u32)] = &[
    ("fchmod", libc::SYS_fchmod, 1),
    ("fchmodat", libc::SYS_fchmodat, 2),
    ("fchmodat2", libc::SYS_fchmodat2, 2),
    ("openat", libc::SYS_openat, 3),
];

/// `mknod` and `mknodat`, with the index of their mode argument: refused for set-id bits
/// and for character and block devices.
#[cfg(target_arch = "x86_64")]
const NODE_MAKERS: &[(&str, libc::c_long, u32)] = &[
    ("mknod", libc::SYS_mknod, 1),
    ("mknodat", libc::SYS_mknodat, 2),
];
#[cfg(not(target_arch = "x86_64"))]
const NODE_MAKERS: &[(&str, libc::c_long, u32)] = &[("mknodat", libc::SYS_mknodat, 2)];

/// Terminal `ioctl` requests refused, by name: each pushes input into a terminal (`TIOCSTI`
/// types a character; `TIOCLINUX` pastes a console selection), sends a console's output to
/// another terminal (`TIOCCONS`), or swaps the line discipline, the kernel's code a
/// terminal's bytes run through (`TIOCSETD`). The kernel reads an ioctl's request as an
/// `unsigned int`, so the low 32 bits are all there is to compare.
pub(crate) const TERMINAL_IOCTLS: &[(&str, u32)] = &[
    ("TIOCSTI", libc::TIOCSTI as u32),
    ("TIOCLINUX", libc::TIOCLINUX as u32),
    ("TIOCCONS", libc::TIOCCONS as u32),
    ("TIOCSETD", libc::TIOCSETD as u32),
];

/// The calls refused for a set-id mode, for the confinement report.
pub(crate) fn refused_by_argument() -> impl Iterator<Item = &'static str> {
    MODE_SETTERS
        .iter()
        .map(|(name, _, _)| *name)
        .chain(device_node_calls())
}

/// The calls refused for a character or block device, for the confinement report.
pub(crate) fn device_node_calls() -> impl Iterator<Item = &'static str> {
    NODE_MAKERS.iter().map(|(name, _, _)| *name)
}

/// `AUDIT_ARCH_*` of the architecture we were built for (EM_* | 64-bit | little-endian).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;

/// Offsets into `struct seccomp_data`: the syscall number, the architecture, and the low
/// 32 bits of the first argument (little-endian); each argument is 8 bytes.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

/// The offset of the low 32 bits of argument `index`: every argument checked here is an
/// `int` or a `mode_t`, which the kernel reads from the low half.
const fn arg_low(index: u32) -> u32 {
    ARG0_LOW + 8 * index
}

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
/// The exec log: the server's thread is told, and lets the call go on (`crate::execlog`).
const RET_NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;

/// Where a conditional jump goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Label {
    Next,
    Allow,
    Kill,
    Eperm,
    Enosys,
    Clone,
    Socket,
    /// An AF_INET or AF_INET6 socket under [`Inet::Tcp`]: only a TCP stream.
    Inet,
    /// The type and protocol check of such a socket.
    InetType,
    /// Refuse set-id bits in the mode at this argument index.
    Mode(u32),
    /// As `Mode`, and refuse device nodes.
    Node(u32),
    /// `execveat` of a descriptor itself (`AT_EMPTY_PATH`).
    ExecFd,
    /// `memfd_create` without `MFD_NOEXEC_SEAL`, refused where jail files may not run.
    MemfdNoexec,
    /// An `ioctl`: refused for the [`TERMINAL_IOCTLS`].
    Ioctl,
    /// An exec the exec log is told of.
    Notify,
    /// A node of the search over syscall numbers.
    Branch(u16),
}

enum Insn {
    /// A = the 32-bit word of `seccomp_data` at this offset.
    Load(u32),
    /// A &= k.
    And(u32),
    /// if (A op k) goto then else goto otherwise; `op` is BPF_JEQ, BPF_JGE or BPF_JSET.
    Jump {
        op: u32,
        k: u32,
        then: Label,
        otherwise: Label,
    },
    Return(u32),
    /// Names the next instruction.
    Mark(Label),
}

/// Which sockets other than AF_UNIX a command may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inet {
    /// None (no network).
    None,
    /// TCP over IPv4 or IPv6 only (egress: the proxy is a TCP address).
    Tcp,
    /// Any family and type (network open).
    Any,
}

/// What the filter lets a command do beyond the fixed rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Switches {
    /// Sockets other than AF_UNIX.
    pub(crate) inet: Inet,
    /// AF_UNIX sockets.
    pub(crate) unix_sockets: bool,
    /// System V IPC: only where each command has an ipc namespace of its own
    /// ([`SYSV_IPC`]).
    pub(crate) sysv_ipc: bool,
    /// Executable memfds: only where the command may run programs it wrote anyway
    /// (`exec_in_jail`). Otherwise `memfd_create` must ask for `MFD_NOEXEC_SEAL`: a memfd
    /// lives on no mount whose `noexec` we set, and Landlock does not see it, so an
    /// executable one would run what the command wrote past `exec_in_jail = false`
    /// (`execve("/proc/self/fd/N")`).
    pub(crate) memfd_exec: bool,
    /// The exec log: `execve` and `execveat` (the ones not refused) are told to the
    /// server's thread before they go on.
    pub(crate) exec_log: bool,
}

/// `MFD_NOEXEC_SEAL` (Linux 6.3): the memfd is not executable and can never become so.
const MFD_NOEXEC_SEAL: u32 = 0x0008;

/// Builds the filter for a sandbox with these switches: the architecture checked, x32
/// refused, a binary search over the syscalls with a verdict of their own
/// ([`special_verdicts`]), then the argument checks those verdicts jump to.
pub(crate) fn build(switches: Switches) -> Result<Program, String> {
    use Insn::{Jump, Load, Mark, Return};
    let mut code = vec![
        Load(ARCH),
        Jump {
            op: libc::BPF_JEQ,
            k: AUDIT_ARCH,
            then: Label::Next,
            otherwise: Label::Kill,
        },
        Load(NR),
    ];
    if cfg!(target_arch = "x86_64") {
        code.push(Jump {
            op: libc::BPF_JGE,
            k: 0x4000_0000, // __X32_SYSCALL_BIT
            then: Label::Enosys,
            otherwise: Label::Next,
        });
    }
    // Where socket(domain, …) goes for AF_UNIX and for any other domain.
    let sockets = (
        if switches.unix_sockets {
            Label::Allow
        } else {
            Label::Eperm
        },
        match switches.inet {
            Inet::Any => Label::Allow,
            Inet::Tcp => Label::Inet,
            Inet::None => Label::Eperm,
        },
    );
    let special = special_verdicts(&switches, sockets)?;
    search(&special, &mut code, &mut 0);
    argument_checks(&mut code, &switches);
    socket_checks(&mut code, switches.inet, sockets);
    code.extend([
        Mark(Label::Allow),
        Return(RET_ALLOW),
        Mark(Label::Eperm),
        Return(RET_EPERM),
        Mark(Label::Enosys),
        Return(RET_ENOSYS),
        Mark(Label::Kill),
        Return(RET_KILL),
    ]);
    if switches.exec_log {
        code.extend([Mark(Label::Notify), Return(RET_NOTIFY)]);
    }
    assemble(&code)
}

/// Every syscall number with a verdict of its own, sorted; the rest are allowed. Two
/// verdicts for one number are an error.
fn special_verdicts(
    switches: &Switches,
    sockets: (Label, Label),
) -> Result<Vec<(u32, Label)>, String> {
    let nr = |n: libc::c_long| u32::try_from(n).map_err(|_| format!("syscall number {n}"));
    let mut special = vec![
        (nr(libc::SYS_clone3)?, Label::Enosys),
        (nr(libc::SYS_clone)?, Label::Clone),
    ];
    if sockets != (Label::Allow, Label::Allow) {
        special.push((nr(libc::SYS_socket)?, Label::Socket));
    }
    special.push((nr(libc::SYS_openat2)?, Label::Enosys));
    special.push((nr(libc::SYS_ioctl)?, Label::Ioctl));
    special.push((nr(libc::SYS_execveat)?, Label::ExecFd));
    if switches.exec_log {
        special.push((nr(libc::SYS_execve)?, Label::Notify));
    }
    for &(_, n, arg) in MODE_SETTERS {
        special.push((nr(n)?, Label::Mode(arg)));
    }
    for &(_, n, arg) in NODE_MAKERS {
        special.push((nr(n)?, Label::Node(arg)));
    }
    for &(_, n) in denied() {
        special.push((nr(n)?, Label::Eperm));
    }
    if !switches.sysv_ipc {
        for &(_, n) in SYSV_IPC {
            special.push((nr(n)?, Label::Eperm));
        }
    }
    if !switches.memfd_exec {
        special.push((nr(libc::SYS_memfd_create)?, Label::MemfdNoexec));
    }
    special.sort_unstable_by_key(|&(n, _)| n);
    if special.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("a syscall number has two verdicts".into());
    }
    Ok(special)
}

/// The checks on arguments: no set-id bit in a mode, no device node, no execveat of a
/// descriptor, no executable memfd (unless allowed), no namespace from clone.
fn argument_checks(code: &mut Vec<Insn>, switches: &Switches) {
    use Insn::{Jump, Load, Mark};
    let exec = if switches.exec_log {
        Label::Notify
    } else {
        Label::Allow
    };
    let set_id = |then_ok: Label| Jump {
        op: libc::BPF_JSET,
        k: SET_ID_BITS,
        then: Label::Eperm,
        otherwise: then_ok,
    };
    // A device node: a type of S_IFCHR (0o020000) or S_IFBLK (0o060000), the two with the
    // 0o020000 bit that mknod makes (the others with it, S_IFLNK and 0o160000, it refuses
    // itself), so one bit test needs no mask of the type.
    for &(_, _, arg) in NODE_MAKERS {
        code.extend([
            Mark(Label::Node(arg)),
            Load(arg_low(arg)),
            set_id(Label::Next),
            Jump {
                op: libc::BPF_JSET,
                k: libc::S_IFCHR,
                then: Label::Eperm,
                otherwise: Label::Allow,
            },
        ]);
    }
    let mut mode_args: Vec<u32> = MODE_SETTERS.iter().map(|m| m.2).collect();
    mode_args.sort_unstable();
    mode_args.dedup();
    for arg in mode_args {
        code.extend([
            Mark(Label::Mode(arg)),
            Load(arg_low(arg)),
            set_id(Label::Allow),
        ]);
    }
    // execveat(fd, "", …, AT_EMPTY_PATH) runs whatever the descriptor holds: a memfd the
    // command filled, which no mount's noexec and no Landlock rule covers.
    code.extend([
        Mark(Label::ExecFd),
        Load(arg_low(4)),
        Jump {
            op: libc::BPF_JSET,
            k: libc::AT_EMPTY_PATH as u32,
            then: Label::Eperm,
            otherwise: exec,
        },
    ]);
    if !switches.memfd_exec {
        code.extend([
            Mark(Label::MemfdNoexec),
            Load(arg_low(1)),
            Jump {
                op: libc::BPF_JSET,
                k: MFD_NOEXEC_SEAL,
                then: Label::Allow,
                otherwise: Label::Eperm,
            },
        ]);
    }
    code.extend([Mark(Label::Ioctl), Load(arg_low(1))]);
    let refused: Vec<(u32, Label)> = TERMINAL_IOCTLS
        .iter()
        .map(|&(_, request)| (request, Label::Eperm))
        .collect();
    equal_to_one_of(&refused, code);
    code.extend([
        Mark(Label::Clone),
        Load(ARG0_LOW),
        Jump {
            op: libc::BPF_JSET,
            k: CLONE_NEW_ANY,
            then: Label::Eperm,
            otherwise: Label::Allow,
        },
    ]);
}

/// socket(domain, type, protocol): AF_UNIX to `unix`, any other domain to `other`; under
/// [`Inet::Tcp`], IPv4 and IPv6 TCP streams only.
fn socket_checks(code: &mut Vec<Insn>, inet: Inet, (unix, other): (Label, Label)) {
    use Insn::{And, Jump, Load, Mark};
    code.extend([
        Mark(Label::Socket),
        Load(ARG0_LOW),
        Jump {
            op: libc::BPF_JEQ,
            k: libc::AF_UNIX as u32,
            then: unix,
            otherwise: other,
        },
    ]);
    if inet == Inet::Tcp {
        code.extend([
            Mark(Label::Inet),
            eq(libc::AF_INET as u32, Label::InetType),
            Jump {
                op: libc::BPF_JEQ,
                k: libc::AF_INET6 as u32,
                then: Label::Next,
                otherwise: Label::Eperm,
            },
            Mark(Label::InetType),
            // The type without SOCK_NONBLOCK and SOCK_CLOEXEC (SOCK_TYPE_MASK).
            Load(arg_low(1)),
            And(0xf),
            Jump {
                op: libc::BPF_JEQ,
                k: libc::SOCK_STREAM as u32,
                then: Label::Next,
                otherwise: Label::Eperm,
            },
            Load(arg_low(2)),
            eq(0, Label::Allow),
            Jump {
                op: libc::BPF_JEQ,
                k: libc::IPPROTO_TCP as u32,
                then: Label::Allow,
                otherwise: Label::Eperm,
            },
        ]);
    }
}

/// A jump to `then` when A equals `k`, else on to the next instruction.
fn eq(k: u32, then: Label) -> Insn {
    Insn::Jump {
        op: libc::BPF_JEQ,
        k,
        then,
        otherwise: Label::Next,
    }
}

/// Appends a binary search over `entries` (sorted by syscall number, A holding the number):
/// each number jumps to its label, any other is allowed. The kernel emulates the filter once
/// per syscall number to build its allow-cache, under a lock with interrupts off, for every
/// command: a search walks ~8 instructions where a list walked ~60 (a twentieth of the
/// server's CPU per run_command went there, profiled).
fn search(entries: &[(u32, Label)], code: &mut Vec<Insn>, branches: &mut u16) {
    use Insn::{Jump, Mark};
    if entries.len() <= 3 {
        equal_to_one_of(entries, code);
        return;
    }
    let (low, high) = entries.split_at(entries.len() / 2);
    *branches += 1;
    let upper = Label::Branch(*branches);
    code.push(Jump {
        op: libc::BPF_JGE,
        k: high[0].0,
        then: upper,
        otherwise: Label::Next,
    });
    search(low, code, branches);
    code.push(Mark(upper));
    search(high, code, branches);
}

/// A's value compared with each entry's in turn, jumping to the entry's label on a match;
/// no match allows the call.
fn equal_to_one_of(entries: &[(u32, Label)], code: &mut Vec<Insn>) {
    for (i, &(k, then)) in entries.iter().enumerate() {
        let last = i + 1 == entries.len();
        code.push(Insn::Jump {
            op: libc::BPF_JEQ,
            k,
            then,
            otherwise: if last { Label::Allow } else { Label::Next },
        });
    }
    if entries.is_empty() {
        code.push(Insn::Return(RET_ALLOW));
    }
}

/// Resolves labels into the forward jump offsets classic BPF wants (0..=255), and checks the
/// program fits the kernel's limit (and so the 16-bit length the child passes).
fn assemble(code: &[Insn]) -> Result<Program, String> {
    let mut at: HashMap<Label, usize> = HashMap::new();
    let mut pc = 0;
    for insn in code {
        match insn {
            Insn::Mark(label) => {
                at.insert(*label, pc);
            }
            _ => pc += 1,
        }
    }
    let mut program = Program::with_capacity(pc);
    for insn in code {
        let here = program.len();
        let offset = |label: Label| -> Result<u8, String> {
            if label == Label::Next {
                return Ok(0);
            }
            let target = at
                .get(&label)
                .ok_or_else(|| format!("jump to an unplaced {label:?}"))?;
            target
                .checked_sub(here + 1)
                .and_then(|d| u8::try_from(d).ok())
                .ok_or_else(|| format!("jump to {label:?} out of range"))
        };
        let filter = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        };
        program.push(match *insn {
            Insn::Load(offset) => filter(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, offset),
            Insn::And(k) => filter(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, 0, 0, k),
            Insn::Jump {
                op,
                k,
                then,
                otherwise,
            } => filter(
                libc::BPF_JMP | op | libc::BPF_K,
                offset(then)?,
                offset(otherwise)?,
                k,
            ),
            Insn::Return(action) => filter(libc::BPF_RET | libc::BPF_K, 0, 0, action),
            Insn::Mark(_) => continue,
        });
    }
    if program.len() > libc::BPF_MAXINSNS as usize {
        return Err("the program is longer than BPF_MAXINSNS".into());
    }
    Ok(program)
}

#[cfg(test)]
mod tests;
