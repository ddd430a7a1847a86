//! The filter's unit tests: the program run by a small emulator of classic BPF, against
//! the tables, for every syscall number and the argument checks.

use super::*;

/// Runs `program` the way the kernel would, for the subset of classic BPF it uses.
fn run(program: &Program, arch: u32, nr: u32, arg0: u64) -> u32 {
    run_args(program, arch, nr, [arg0, 0, 0, 0, 0, 0])
}

fn run_args(program: &Program, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    run_counted(program, arch, nr, args).0
}

/// The verdict, and how many instructions the kernel runs to reach it.
fn run_counted(program: &Program, arch: u32, nr: u32, args: [u64; 6]) -> (u32, usize) {
    let word = |offset: u32| match offset {
        NR => nr,
        ARCH => arch,
        o if o >= ARG0_LOW && (o - ARG0_LOW).is_multiple_of(8) => {
            args[((o - ARG0_LOW) / 8) as usize] as u32
        }
        other => panic!("load from offset {other}"),
    };
    let (mut pc, mut a, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let insn = program[pc];
        let code = u32::from(insn.code);
        steps += 1;
        match code {
            c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => a = word(insn.k),
            c if c == libc::BPF_RET | libc::BPF_K => return (insn.k, steps),
            c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= insn.k,
            c if c & 0x07 == libc::BPF_JMP => {
                let taken = match c & 0xf0 {
                    op if op == libc::BPF_JEQ => a == insn.k,
                    op if op == libc::BPF_JGE => a >= insn.k,
                    op if op == libc::BPF_JSET => a & insn.k != 0,
                    op => panic!("jump op {op:#x}"),
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            other => panic!("opcode {other:#x}"),
        }
        pc += 1;
    }
}

fn nr(n: libc::c_long) -> u32 {
    n as u32
}

/// The switches of a view with an ipc namespace per command and exec_in_jail on: the
/// fixed rules only, besides the sockets.
fn switches(inet: Inet, unix_sockets: bool) -> Switches {
    Switches {
        inet,
        unix_sockets,
        sysv_ipc: true,
        memfd_exec: true,
        exec_log: false,
    }
}

#[test]
fn the_exec_log_is_told_of_each_exec_that_is_not_refused() {
    let logged = build(Switches {
        exec_log: true,
        ..switches(Inet::None, true)
    })
    .unwrap();
    let plain = build(switches(Inet::None, true)).unwrap();
    let execve = nr(libc::SYS_execve);
    let execveat = nr(libc::SYS_execveat);
    assert_eq!(run(&logged, AUDIT_ARCH, execve, 0), RET_NOTIFY);
    assert_eq!(run(&plain, AUDIT_ARCH, execve, 0), RET_ALLOW);
    assert_eq!(
        run_args(&logged, AUDIT_ARCH, execveat, [3, 0, 0, 0, 0, 0]),
        RET_NOTIFY
    );
    // A descriptor itself stays refused, logged or not.
    let empty_path = [3, 0, 0, 0, libc::AT_EMPTY_PATH as u64, 0];
    assert_eq!(
        run_args(&logged, AUDIT_ARCH, execveat, empty_path),
        RET_EPERM
    );
    // Everything else is as without it.
    assert_eq!(run(&logged, AUDIT_ARCH, nr(libc::SYS_getpid), 0), RET_ALLOW);
}

#[test]
fn sysv_ipc_is_refused_without_an_ipc_namespace_of_the_commands_own() {
    let shared = build(Switches {
        sysv_ipc: false,
        ..switches(Inet::None, true)
    })
    .unwrap();
    let own = build(switches(Inet::None, true)).unwrap();
    for (name, n) in SYSV_IPC {
        assert_eq!(run(&shared, AUDIT_ARCH, nr(*n), 0), RET_EPERM, "{name}");
        assert_eq!(run(&own, AUDIT_ARCH, nr(*n), 0), RET_ALLOW, "{name}");
    }
}

#[test]
fn memfds_must_be_sealed_against_exec_unless_jail_programs_may_run() {
    let sealed = build(Switches {
        memfd_exec: false,
        ..switches(Inet::None, true)
    })
    .unwrap();
    let memfd = nr(libc::SYS_memfd_create);
    let args = |flags: u64| [0, flags, 0, 0, 0, 0];
    let cloexec = libc::MFD_CLOEXEC as u64;
    for flags in [0, cloexec, cloexec | 0x10 /* MFD_EXEC */] {
        assert_eq!(
            run_args(&sealed, AUDIT_ARCH, memfd, args(flags)),
            RET_EPERM,
            "{flags:#x}"
        );
    }
    let noexec = cloexec | u64::from(MFD_NOEXEC_SEAL);
    assert_eq!(
        run_args(&sealed, AUDIT_ARCH, memfd, args(noexec)),
        RET_ALLOW
    );
    let open = build(switches(Inet::None, true)).unwrap();
    assert_eq!(run_args(&open, AUDIT_ARCH, memfd, args(cloexec)), RET_ALLOW);
}

/// What installing the filter costs the kernel: its length (translated and compiled
/// once), and the path of each syscall number with no arguments to check (emulated
/// once per number for the allow-cache, and run on every call of the command).
#[test]
fn the_program_is_short_and_every_path_through_it_is_shorter() {
    for (inet, unix) in [(Inet::None, true), (Inet::Tcp, true), (Inet::Any, false)] {
        let program = build(switches(inet, unix)).unwrap();
        assert!(program.len() <= 128, "{} instructions", program.len());
        let longest = (0..1024)
            .map(|n| run_counted(&program, AUDIT_ARCH, n, [0; 6]).1)
            .max()
            .unwrap();
        assert!(
            longest <= 16,
            "{longest} instructions for one syscall number"
        );
    }
}

/// The search gives each syscall number the verdict the tables give it, and allows
/// every other number.
#[test]
fn every_syscall_number_gets_its_tables_verdict() {
    let program = build(switches(Inet::None, true)).unwrap();
    let mut verdicts: HashMap<u32, u32> = denied().map(|&(_, n)| (nr(n), RET_EPERM)).collect();
    verdicts.insert(nr(libc::SYS_clone3), RET_ENOSYS);
    verdicts.insert(nr(libc::SYS_openat2), RET_ENOSYS);
    for n in 0..1024 {
        let expected = verdicts.get(&n).copied().unwrap_or(RET_ALLOW);
        // Zero arguments: no namespace flag, no set-id bit, no device, AF_UNIX (0 is
        // AF_UNSPEC, refused without network), no AT_EMPTY_PATH.
        let got = run(&program, AUDIT_ARCH, n, 0);
        if n == nr(libc::SYS_socket) {
            assert_eq!(got, RET_EPERM, "socket(AF_UNSPEC) without network");
        } else {
            assert_eq!(got, expected, "syscall {n}");
        }
    }
}

#[test]
fn everyday_syscalls_are_allowed_and_the_deny_list_is_refused() {
    for (inet, unix) in [
        (Inet::None, true),
        (Inet::None, false),
        (Inet::Any, true),
        (Inet::Tcp, true),
    ] {
        let p = build(switches(inet, unix)).unwrap();
        for n in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_getpid,
            libc::SYS_socketpair,
            libc::SYS_wait4,
        ] {
            assert_eq!(run(&p, AUDIT_ARCH, nr(n), 0), RET_ALLOW, "syscall {n}");
        }
        for (name, n) in denied() {
            assert_eq!(run(&p, AUDIT_ARCH, nr(*n), 0), RET_EPERM, "{name}");
        }
    }
}

#[test]
fn a_foreign_abi_is_killed_and_x32_is_absent() {
    let p = build(switches(Inet::None, true)).unwrap();
    const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
    assert_eq!(run(&p, AUDIT_ARCH_I386, 26, 0), RET_KILL); // i386 ptrace
    if cfg!(target_arch = "x86_64") {
        for n in [libc::SYS_ptrace, libc::SYS_getpid, libc::SYS_read] {
            assert_eq!(run(&p, AUDIT_ARCH, 0x4000_0000 | nr(n), 0), RET_ENOSYS);
        }
    }
}

#[test]
fn clone_may_not_make_namespaces_and_clone3_is_absent() {
    let p = build(switches(Inet::None, true)).unwrap();
    let plain = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64;
    assert_eq!(run(&p, AUDIT_ARCH, nr(libc::SYS_clone), plain), RET_ALLOW);
    for flag in [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
    ] {
        let flags = plain | flag as u64;
        assert_eq!(run(&p, AUDIT_ARCH, nr(libc::SYS_clone), flags), RET_EPERM);
    }
    assert_eq!(run(&p, AUDIT_ARCH, nr(libc::SYS_clone3), 0), RET_ENOSYS);
}

#[test]
fn sockets_follow_the_network_and_unix_socket_switches() {
    let socket = nr(libc::SYS_socket);
    let (unix, inet) = (libc::AF_UNIX as u64, libc::AF_INET as u64);
    let p = build(switches(Inet::None, true)).unwrap();
    assert_eq!(run(&p, AUDIT_ARCH, socket, unix), RET_ALLOW);
    assert_eq!(run(&p, AUDIT_ARCH, socket, inet), RET_EPERM);
    // A high word cannot smuggle AF_UNIX past the check: the kernel reads an int.
    assert_eq!(run(&p, AUDIT_ARCH, socket, (1 << 32) | inet), RET_EPERM);
    let p = build(switches(Inet::None, false)).unwrap();
    assert_eq!(run(&p, AUDIT_ARCH, socket, unix), RET_EPERM);
    let p = build(switches(Inet::Any, true)).unwrap();
    assert_eq!(run(&p, AUDIT_ARCH, socket, inet), RET_ALLOW);
    assert_eq!(run(&p, AUDIT_ARCH, socket, unix), RET_ALLOW);
    let p = build(switches(Inet::Any, false)).unwrap();
    assert_eq!(run(&p, AUDIT_ARCH, socket, inet), RET_ALLOW);
    assert_eq!(run(&p, AUDIT_ARCH, socket, unix), RET_EPERM);
}

#[test]
fn egress_allows_tcp_streams_only() {
    let p = build(switches(Inet::Tcp, true)).unwrap();
    let socket = |domain: i32, kind: i32, protocol: i32| {
        run_args(
            &p,
            AUDIT_ARCH,
            nr(libc::SYS_socket),
            [domain as u64, kind as u64, protocol as u64, 0, 0, 0],
        )
    };
    let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    for domain in [libc::AF_INET, libc::AF_INET6] {
        assert_eq!(socket(domain, stream, 0), RET_ALLOW);
        assert_eq!(
            socket(domain, libc::SOCK_STREAM, libc::IPPROTO_TCP),
            RET_ALLOW
        );
        assert_eq!(socket(domain, libc::SOCK_DGRAM, 0), RET_EPERM, "UDP");
        assert_eq!(
            socket(domain, libc::SOCK_RAW, libc::IPPROTO_ICMP),
            RET_EPERM
        );
        assert_eq!(socket(domain, libc::SOCK_SEQPACKET, 0), RET_EPERM);
        // SCTP and MPTCP streams are not TCP to Landlock's port rules.
        assert_eq!(
            socket(domain, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
            RET_EPERM
        );
        assert_eq!(socket(domain, libc::SOCK_STREAM, 262), RET_EPERM);
    }
    for domain in [libc::AF_NETLINK, libc::AF_PACKET, libc::AF_VSOCK] {
        assert_eq!(socket(domain, libc::SOCK_STREAM, 0), RET_EPERM);
    }
    assert_eq!(socket(libc::AF_UNIX, libc::SOCK_STREAM, 0), RET_ALLOW);
}

#[test]
fn set_id_modes_and_device_nodes_are_refused() {
    let p = build(switches(Inet::None, true)).unwrap();
    let with_mode = |arg: u32, mode: u64| {
        let mut args = [0u64; 6];
        args[arg as usize] = mode;
        args
    };
    for &(name, n, arg) in MODE_SETTERS {
        for mode in [0o4755, 0o2755, 0o6777, 0o104755] {
            assert_eq!(
                run_args(&p, AUDIT_ARCH, nr(n), with_mode(arg, mode)),
                RET_EPERM,
                "{name} {mode:o}"
            );
        }
        for mode in [0, 0o644, 0o755, 0o1777, 0o100644] {
            assert_eq!(
                run_args(&p, AUDIT_ARCH, nr(n), with_mode(arg, mode)),
                RET_ALLOW,
                "{name} {mode:o}"
            );
        }
    }
    let (chr, blk) = (u64::from(libc::S_IFCHR), u64::from(libc::S_IFBLK));
    let (fifo, reg, sock) = (
        u64::from(libc::S_IFIFO),
        u64::from(libc::S_IFREG),
        u64::from(libc::S_IFSOCK),
    );
    for &(name, n, arg) in NODE_MAKERS {
        for mode in [chr | 0o600, blk | 0o660, reg | 0o4755, fifo | 0o2644] {
            assert_eq!(
                run_args(&p, AUDIT_ARCH, nr(n), with_mode(arg, mode)),
                RET_EPERM,
                "{name} {mode:o}"
            );
        }
        for mode in [fifo | 0o644, reg | 0o600, sock | 0o755, 0o644] {
            assert_eq!(
                run_args(&p, AUDIT_ARCH, nr(n), with_mode(arg, mode)),
                RET_ALLOW,
                "{name} {mode:o}"
            );
        }
    }
    // The mode of an open is read from the argument the kernel uses, not another one.
    assert_eq!(
        run_args(
            &p,
            AUDIT_ARCH,
            nr(libc::SYS_openat),
            [0o4755, 0o4755, 0o4755, 0o644, 0, 0]
        ),
        RET_ALLOW
    );
    assert_eq!(run(&p, AUDIT_ARCH, nr(libc::SYS_openat2), 0), RET_ENOSYS);
    let empty_path = [3, 0, 0, 0, libc::AT_EMPTY_PATH as u64, 0];
    assert_eq!(
        run_args(&p, AUDIT_ARCH, nr(libc::SYS_execveat), empty_path),
        RET_EPERM
    );
    assert_eq!(
        run_args(&p, AUDIT_ARCH, nr(libc::SYS_execveat), [3, 0, 0, 0, 0, 0]),
        RET_ALLOW
    );
}

/// A terminal ioctl that types into a terminal or reaches another one is refused, by its
/// low 32 bits (all the kernel reads of the request), whatever the high bits say; every
/// other request, the everyday ones a terminal program makes among them, is allowed.
#[test]
fn terminal_ioctls_that_inject_input_are_refused() {
    let p = build(switches(Inet::None, true)).unwrap();
    let ioctl = |request: u64| {
        run_args(
            &p,
            AUDIT_ARCH,
            nr(libc::SYS_ioctl),
            [1, request, 0, 0, 0, 0],
        )
    };
    for (name, request) in TERMINAL_IOCTLS {
        assert_eq!(ioctl(u64::from(*request)), RET_EPERM, "{name}");
        assert_eq!(
            ioctl(u64::from(*request) | 1 << 32),
            RET_EPERM,
            "{name} with high bits"
        );
    }
    for request in [
        libc::TCGETS,
        libc::TCSETS,
        libc::TIOCGWINSZ,
        libc::TIOCSWINSZ,
        libc::TIOCSCTTY,
        libc::TIOCGPGRP,
        libc::FIONREAD,
        libc::FIOCLEX,
    ] {
        assert_eq!(ioctl(request), RET_ALLOW, "request {request:#x}");
    }
    assert_eq!(
        run_args(
            &p,
            AUDIT_ARCH,
            nr(libc::SYS_write),
            [1, u64::from(libc::TIOCSTI as u32), 0, 0, 0, 0]
        ),
        RET_ALLOW,
        "another call with the same second argument"
    );
}
