//! Programs that run whatever they are given: shells, language interpreters, trampolines
//! (programs that run another program: env, xargs, sudo, timeout, …) and editors with a
//! command line.
//!
//! Owns the list of such names and why each kind is refused. They are refused outright
//! unless the operator sets `allow_interpreter` for one; every argument then still gets the
//! generic path check.
//!
//! It must never try to tell a "safe" use of one of these from an unsafe one by its
//! arguments: `python3 script.py`, `env ls` and `vim f` run code as surely as `sh -c`.

use super::spec::{BASE, Kind, Operands, Spec};

/// An interpreter spec: refused as a whole, every argument checked generically.
const fn interpreter(names: &'static [&'static str], why: &'static str) -> Spec {
    Spec {
        names,
        kind: Kind::Interpreter(why),
        operands: Operands::Generic,
        ..BASE
    }
}

const SHELL: &str = "a shell runs whatever command text it is given";
const INTERP: &str =
    "an interpreter runs whatever program it is given (`-c`, `-e`, a script, stdin)";
const TRAMPOLINE: &str =
    "a trampoline runs another program of the caller's choosing, outside this policy";
const EDITOR: &str = "an editor can run shell commands (`:!cmd`, `!cmd`) and write any file";

pub(crate) const SPECS: &[Spec] = &[
    interpreter(
        &[
            "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
        ],
        SHELL,
    ),
    interpreter(
        &[
            "python",
            "python2",
            "python3",
            "node",
            "nodejs",
            "deno",
            "bun",
            "perl",
            "ruby",
            "php",
            "lua",
            "tclsh",
            "Rscript",
            "pwsh",
            "osascript",
        ],
        INTERP,
    ),
    interpreter(
        &[
            "env",
            "xargs",
            "sudo",
            "su",
            "doas",
            "nohup",
            "timeout",
            "nice",
            "ionice",
            "stdbuf",
            "setsid",
            "chroot",
            "strace",
            "ltrace",
            "gdb",
            "time",
            "watch",
            "script",
            "flock",
            "parallel",
            "unshare",
            "nsenter",
            "systemd-run",
            "at",
            "batch",
            "crontab",
            "npx",
            "pkexec",
            "runuser",
            "taskset",
            "chrt",
            "prlimit",
            "setpriv",
            "expect",
        ],
        TRAMPOLINE,
    ),
    interpreter(
        &[
            "vim", "vi", "view", "ex", "nvim", "ed", "red", "emacs", "nano", "pico", "joe",
        ],
        EDITOR,
    ),
];

#[cfg(test)]
mod tests {
    use super::super::lookup;
    use super::super::testing::{cmd, generic};
    use super::*;

    #[test]
    fn each_kind_is_refused_with_its_reason() {
        for (name, why) in [
            ("bash", SHELL),
            ("busybox", SHELL),
            ("python3", INTERP),
            ("node", INTERP),
            ("env", TRAMPOLINE),
            ("xargs", TRAMPOLINE),
            ("npx", TRAMPOLINE),
            ("vim", EDITOR),
            ("ed", EDITOR),
        ] {
            assert_eq!(
                lookup(name).map(|s| s.kind),
                Some(Kind::Interpreter(why)),
                "{name}"
            );
            assert_eq!(cmd(name).interpreter.as_deref(), Some(why), "{name}");
        }
    }

    #[test]
    fn every_argument_gets_the_generic_check() {
        let insp = cmd("python3 -c x /etc/passwd");
        assert!(insp.escapes.is_empty(), "refused as a whole, not by option");
        assert_eq!(
            generic("python3 -c x /etc/passwd"),
            ["-c", "x", "/etc/passwd"]
        );
        assert_eq!(generic("env FOO=1 ls ../x"), ["FOO=1", "ls", "../x"]);
    }

    #[test]
    fn no_hardening_is_offered() {
        let insp = cmd("sh -c id");
        assert!(insp.inject_args.is_empty() && insp.inject_env.is_empty());
    }
}
