//! The catalog: one [`Spec`] per tool family, and the few checks that need code.
//!
//! Owns the facts (each option that runs code, loads config or plugins, or writes where the
//! tool is told; each argument that is a path) and nothing else. Sources: the tools' own
//! manuals (GNU coreutils, findutils, tar, sed, gawk, git, OpenSSH, sqlite3), and the escape
//! lists that GTFOBins and Codex's exec policy keep.

use std::path::Path;

use super::parse::{Arg, Grammar, Parsed, Val, parse};
use super::{Inspection, PathCheck};

/// What kind of program this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tool whose escapes are listed.
    Tool,
    /// Runs code it is given (a shell, an interpreter, an editor with a command line) or runs
    /// another program (a trampoline): refused unless `allow_interpreter`.
    Interpreter(&'static str),
}

/// How the operands (non-option arguments) are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    /// Every operand is a path.
    Paths,
    /// No operand is ever opened (echo, printf).
    NotPaths,
    /// The first operand is a pattern or program (grep, sed, awk, jq, rg) unless one of the
    /// `program_opts` supplied it; the rest are paths.
    AfterProgram,
    /// Unknown: generic checks.
    Generic,
}

/// A check that needs code: the parsed args, the raw args, the resolved program.
pub type CustomCheck = fn(&Parsed, &[String], Option<&Path>, &mut Inspection);

/// One tool family.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Program names this spec covers.
    pub names: &'static [&'static str],
    /// Tool or interpreter.
    pub kind: Kind,
    /// Its option grammar.
    pub grammar: Grammar,
    /// Options that are escapes: (canonical name, reason).
    pub escapes: &'static [(&'static str, &'static str)],
    /// Options whose value is a path.
    pub path_opts: &'static [&'static str],
    /// Options that supply the program/pattern instead of the first operand.
    pub program_opts: &'static [&'static str],
    /// Operand treatment.
    pub operands: Operands,
    /// Arguments inserted after the program name.
    pub inject_args: &'static [&'static str],
    /// Environment added.
    pub inject_env: &'static [(&'static str, &'static str)],
    /// Checks that need code.
    pub custom: Option<CustomCheck>,
    /// The grammar is precise: values of known, non-path options are never paths. When
    /// false, every option value gets the generic check.
    pub typed_values: bool,
}

const NO_GRAMMAR: Grammar = Grammar {
    short_value: "",
    long: &[],
    permute: true,
};

const BASE: Spec = Spec {
    names: &[],
    kind: Kind::Tool,
    grammar: NO_GRAMMAR,
    escapes: &[],
    path_opts: &[],
    program_opts: &[],
    operands: Operands::Paths,
    inject_args: &[],
    inject_env: &[],
    custom: None,
    typed_values: true,
};

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

/// Every spec. Order does not matter; names are unique.
static CATALOG: &[Spec] = &[
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
    Spec {
        names: &["make", "gmake"],
        kind: Kind::Interpreter("make runs the recipes of a Makefile, which the model can write"),
        grammar: Grammar {
            short_value: "CfIjlEoW",
            long: &[
                ("eval", Val::Required),
                ("file", Val::Required),
                ("makefile", Val::Required),
                ("directory", Val::Required),
                ("include-dir", Val::Required),
                ("jobs", Val::Optional),
                ("load-average", Val::Optional),
                ("old-file", Val::Required),
                ("what-if", Val::Required),
                ("new-file", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            (
                "--eval",
                "`make --eval` evaluates makefile text, where `$(shell …)` runs commands",
            ),
            (
                "-E",
                "`make -E` evaluates makefile text, where `$(shell …)` runs commands",
            ),
        ],
        path_opts: &[
            "-f",
            "--file",
            "--makefile",
            "-C",
            "--directory",
            "-I",
            "--include-dir",
        ],
        operands: Operands::NotPaths,
        ..BASE
    },
    Spec {
        names: &[
            "echo", "printf", "true", "false", "yes", "seq", "expr", "basename", "dirname",
            "sleep", "pwd", "whoami", "id", "uname", "nproc",
        ],
        operands: Operands::NotPaths,
        typed_values: false,
        ..BASE
    },
    Spec {
        names: &["cp", "mv", "ln", "install"],
        grammar: Grammar {
            short_value: "tSm",
            long: &[
                ("target-directory", Val::Required),
                ("suffix", Val::Required),
                ("backup", Val::Optional),
            ],
            permute: true,
        },
        path_opts: &["-t", "--target-directory"],
        ..BASE
    },
    // Plain file tools: nothing in their options runs a program, loads code or writes
    // anywhere but the paths they are given, which get the generic check.
    Spec {
        names: &[
            "cat",
            "head",
            "tail",
            "wc",
            "ls",
            "stat",
            "file",
            "du",
            "df",
            "tac",
            "nl",
            "od",
            "hexdump",
            "xxd",
            "strings",
            "md5sum",
            "sha1sum",
            "sha224sum",
            "sha256sum",
            "sha384sum",
            "sha512sum",
            "b2sum",
            "cksum",
            "cmp",
            "diff",
            "comm",
            "cut",
            "paste",
            "join",
            "tr",
            "fold",
            "fmt",
            "column",
            "uniq",
            "rev",
            "mkdir",
            "rmdir",
            "touch",
            "rm",
            "realpath",
            "readlink",
            "tree",
            "base64",
            "gzip",
            "gunzip",
            "zcat",
            "bzip2",
            "xz",
        ],
        operands: Operands::Generic,
        typed_values: false,
        ..BASE
    },
    Spec {
        names: &["tee"],
        typed_values: false,
        ..BASE
    },
    Spec {
        names: &["chmod", "chown", "chgrp"],
        custom: Some(first_operand_not_path),
        typed_values: false,
        ..BASE
    },
    Spec {
        names: &["dd"],
        operands: Operands::NotPaths,
        custom: Some(dd),
        ..BASE
    },
    Spec {
        names: &["sort"],
        grammar: Grammar {
            short_value: "oTSkt",
            long: &[
                ("output", Val::Required),
                ("temporary-directory", Val::Required),
                ("compress-program", Val::Required),
                ("files0-from", Val::Required),
                ("key", Val::Required),
                ("field-separator", Val::Required),
                ("buffer-size", Val::Required),
                ("parallel", Val::Required),
                ("batch-size", Val::Required),
                ("random-source", Val::Required),
                ("reverse", Val::No),
                ("numeric-sort", Val::No),
                ("unique", Val::No),
            ],
            permute: true,
        },
        escapes: &[(
            "--compress-program",
            "`sort --compress-program` runs a program of the caller's choosing",
        )],
        path_opts: &[
            "-o",
            "--output",
            "-T",
            "--temporary-directory",
            "--files0-from",
            "--random-source",
        ],
        ..BASE
    },
    Spec {
        names: &["grep", "egrep", "fgrep"],
        grammar: Grammar {
            short_value: "efmABCdD",
            long: &[
                ("regexp", Val::Required),
                ("file", Val::Required),
                ("max-count", Val::Required),
                ("after-context", Val::Required),
                ("before-context", Val::Required),
                ("context", Val::Required),
                ("include", Val::Required),
                ("exclude", Val::Required),
                ("exclude-from", Val::Required),
                ("exclude-dir", Val::Required),
                ("label", Val::Required),
                ("color", Val::Optional),
                ("colour", Val::Optional),
                ("devices", Val::Required),
                ("directories", Val::Required),
                ("binary-files", Val::Required),
                ("recursive", Val::No),
            ],
            permute: true,
        },
        path_opts: &["-f", "--file", "--exclude-from"],
        program_opts: &["-e", "--regexp", "-f", "--file"],
        operands: Operands::AfterProgram,
        ..BASE
    },
    Spec {
        names: &["rg"],
        grammar: Grammar {
            short_value: "efgtTmABCjEMr",
            long: &[
                ("pre", Val::Required),
                ("pre-glob", Val::Required),
                ("regexp", Val::Required),
                ("file", Val::Required),
                ("glob", Val::Required),
                ("iglob", Val::Required),
                ("type", Val::Required),
                ("type-not", Val::Required),
                ("type-add", Val::Required),
                ("ignore-file", Val::Required),
                ("max-count", Val::Required),
                ("replace", Val::Required),
                ("threads", Val::Required),
                ("encoding", Val::Required),
                ("max-depth", Val::Required),
                ("path-separator", Val::Required),
                ("hostname-bin", Val::Required),
                ("files", Val::No),
            ],
            permute: true,
        },
        escapes: &[
            (
                "--pre",
                "`rg --pre` runs a preprocessor program of the caller's choosing on every file",
            ),
            (
                "--hostname-bin",
                "`rg --hostname-bin` runs a program of the caller's choosing",
            ),
        ],
        path_opts: &["-f", "--file", "--ignore-file"],
        // `--files` lists files: then there is no pattern, and every operand is a path.
        program_opts: &["-e", "--regexp", "-f", "--file", "--files"],
        operands: Operands::AfterProgram,
        ..BASE
    },
    Spec {
        names: &["sed"],
        grammar: Grammar {
            short_value: "efl",
            long: &[
                ("expression", Val::Required),
                ("file", Val::Required),
                ("line-length", Val::Required),
                ("in-place", Val::Optional),
                ("sandbox", Val::No),
                ("separate", Val::No),
            ],
            permute: true,
        },
        path_opts: &["-f", "--file"],
        program_opts: &["-e", "--expression", "-f", "--file"],
        operands: Operands::AfterProgram,
        // GNU sed's sandbox refuses the `e`, `r` and `w` commands and the `s///e` and `s///w`
        // flags at run time too: defence in depth behind the script check.
        inject_args: &["--sandbox"],
        custom: Some(sed),
        ..BASE
    },
    Spec {
        names: &["awk", "gawk", "mawk", "nawk"],
        grammar: Grammar {
            short_value: "fvFWe",
            long: &[
                ("file", Val::Required),
                ("assign", Val::Required),
                ("field-separator", Val::Required),
                ("sandbox", Val::No),
                ("load", Val::Required),
                ("include", Val::Required),
                ("source", Val::Required),
                ("exec", Val::Required),
            ],
            permute: false,
        },
        escapes: &[
            ("--load", "`awk --load` loads a shared-library extension"),
            ("-l", "`awk -l` loads a shared-library extension"),
            (
                "--exec",
                "`awk --exec` runs a program file given as the last option",
            ),
            (
                "-E",
                "`awk -E` runs a program file given as the last option",
            ),
        ],
        path_opts: &["-f", "--file", "--include", "-i"],
        program_opts: &["-f", "--file", "--source", "-e"],
        operands: Operands::AfterProgram,
        custom: Some(awk),
        ..BASE
    },
    Spec {
        names: &["jq"],
        grammar: Grammar {
            short_value: "fL",
            long: &[
                ("from-file", Val::Required),
                ("arg", Val::Required),
                ("argjson", Val::Required),
                ("slurpfile", Val::Required),
                ("rawfile", Val::Required),
                ("indent", Val::Required),
            ],
            permute: true,
        },
        path_opts: &["-f", "--from-file", "-L"],
        program_opts: &["-f", "--from-file"],
        operands: Operands::AfterProgram,
        custom: Some(jq),
        ..BASE
    },
    Spec {
        names: &["find"],
        operands: Operands::Paths,
        custom: Some(find),
        ..BASE
    },
    Spec {
        names: &["tar"],
        // GNU tar reads TAR_OPTIONS before its command line, old-style bundles included.
        // As root it would otherwise restore owners and modes from the archive: a setuid-root
        // program in the jail. The seccomp filter refuses set-id modes too; this keeps the
        // everyday `tar xf` from failing on them.
        inject_env: &[("TAR_OPTIONS", "--no-same-owner --no-same-permissions")],
        custom: Some(tar),
        ..BASE
    },
    Spec {
        names: &["zip"],
        grammar: Grammar {
            short_value: "bnxit",
            long: &[
                ("unzip-command", Val::Required),
                ("temp-path", Val::Required),
                ("exclude", Val::Required),
                ("include", Val::Required),
            ],
            permute: true,
        },
        escapes: &[(
            "--unzip-command",
            "`zip --unzip-command` (`-TT`) runs a program of the caller's choosing to test the archive",
        )],
        path_opts: &["-b", "--temp-path"],
        custom: Some(zip),
        ..BASE
    },
    Spec {
        names: &["rsync"],
        grammar: Grammar {
            short_value: "eBT",
            long: &[
                ("rsh", Val::Required),
                ("rsync-path", Val::Required),
                ("temp-dir", Val::Required),
                ("files-from", Val::Required),
                ("exclude-from", Val::Required),
                ("include-from", Val::Required),
                ("log-file", Val::Required),
                ("password-file", Val::Required),
                ("write-batch", Val::Required),
                ("only-write-batch", Val::Required),
                ("read-batch", Val::Required),
                ("backup-dir", Val::Required),
                ("partial-dir", Val::Required),
                ("compare-dest", Val::Required),
                ("copy-dest", Val::Required),
                ("link-dest", Val::Required),
                ("exclude", Val::Required),
                ("include", Val::Required),
                ("filter", Val::Required),
                ("daemon", Val::No),
                ("config", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            (
                "-e",
                "`rsync -e` runs a remote shell program of the caller's choosing",
            ),
            (
                "--rsh",
                "`rsync --rsh` runs a remote shell program of the caller's choosing",
            ),
            (
                "--rsync-path",
                "`rsync --rsync-path` runs a program of the caller's choosing",
            ),
            (
                "--daemon",
                "`rsync --daemon` starts a server and reads its own config",
            ),
            ("--config", "`rsync --config` loads a daemon config"),
        ],
        path_opts: &[
            "-T",
            "--temp-dir",
            "--files-from",
            "--exclude-from",
            "--include-from",
            "--log-file",
            "--password-file",
            "--write-batch",
            "--only-write-batch",
            "--read-batch",
            "--backup-dir",
            "--partial-dir",
            "--compare-dest",
            "--copy-dest",
            "--link-dest",
        ],
        custom: Some(remote_operands),
        ..BASE
    },
    Spec {
        names: &["ssh"],
        grammar: Grammar {
            short_value: "bcDEeFIiJLlmOoPpQRSWw",
            long: &[],
            permute: false,
        },
        escapes: &[
            (
                "-F",
                "`ssh -F` loads a config file, which can set ProxyCommand",
            ),
            (
                "-S",
                "`scp -S` / `ssh -S` names a program or control socket of the caller's choosing",
            ),
            (
                "-J",
                "`ssh -J` jumps through hosts with their own configuration",
            ),
        ],
        path_opts: &["-i", "-E"],
        operands: Operands::NotPaths,
        // ~/.ssh/config lives in the jail (HOME), where the model can write it.
        inject_args: &["-F", "/dev/null"],
        custom: Some(ssh),
        ..BASE
    },
    Spec {
        names: &["scp", "sftp"],
        grammar: Grammar {
            short_value: "cDFiJloPSX",
            long: &[],
            permute: true,
        },
        escapes: &[
            (
                "-F",
                "`scp -F` loads a config file, which can set ProxyCommand",
            ),
            (
                "-S",
                "`scp -S` runs a program of the caller's choosing instead of ssh",
            ),
            (
                "-J",
                "`scp -J` jumps through hosts with their own configuration",
            ),
        ],
        path_opts: &["-i"],
        operands: Operands::NotPaths,
        inject_args: &["-F", "/dev/null"],
        custom: Some(scp),
        ..BASE
    },
    Spec {
        names: &["less", "more", "most"],
        grammar: Grammar {
            short_value: "bhjkopPtTxyz#",
            long: &[
                ("log-file", Val::Required),
                ("LOG-FILE", Val::Required),
                ("tag", Val::Required),
                ("tag-file", Val::Required),
                ("lesskey-file", Val::Required),
                ("lesskey-src", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            ("-o", "`less -o` copies input to a log file"),
            ("--log-file", "`less --log-file` copies input to a log file"),
            ("-O", "`less -O` copies input to a log file"),
            ("--LOG-FILE", "`less --LOG-FILE` copies input to a log file"),
            (
                "--lesskey-file",
                "`less --lesskey-file` loads key bindings that can run commands",
            ),
            (
                "--lesskey-src",
                "`less --lesskey-src` loads key bindings that can run commands",
            ),
        ],
        // LESSSECURE disables shell escapes, the editor, log files and LESSOPEN.
        inject_env: &[("LESSSECURE", "1"), ("LESSOPEN", ""), ("LESSCLOSE", "")],
        custom: Some(less),
        ..BASE
    },
    Spec {
        names: &["man"],
        grammar: Grammar {
            short_value: "CMPHLmSsepEIR",
            long: &[
                ("pager", Val::Required),
                ("html", Val::Optional),
                ("config-file", Val::Required),
                ("manpath", Val::Required),
                ("preprocessor", Val::Required),
                ("browser", Val::Optional),
            ],
            permute: true,
        },
        escapes: &[
            ("-P", "`man -P` runs a pager of the caller's choosing"),
            (
                "--pager",
                "`man --pager` runs a pager of the caller's choosing",
            ),
            ("-H", "`man -H` runs a browser of the caller's choosing"),
            (
                "--html",
                "`man --html` runs a browser of the caller's choosing",
            ),
            (
                "-C",
                "`man -C` loads a config file of the caller's choosing",
            ),
            (
                "--config-file",
                "`man --config-file` loads a config file of the caller's choosing",
            ),
            ("-p", "`man -p` chooses preprocessors to run"),
            (
                "--preprocessor",
                "`man --preprocessor` chooses preprocessors to run",
            ),
        ],
        operands: Operands::NotPaths,
        inject_env: &[("MANPAGER", "cat"), ("PAGER", "cat")],
        ..BASE
    },
    Spec {
        names: &["sqlite3"],
        operands: Operands::Generic,
        // -safe refuses .system, .shell, .load, load_extension() and writing outside the db.
        inject_args: &["-safe"],
        custom: Some(sqlite3),
        ..BASE
    },
    Spec {
        names: &["git"],
        grammar: Grammar {
            short_value: "Cc",
            long: &[
                ("git-dir", Val::Required),
                ("work-tree", Val::Required),
                ("namespace", Val::Required),
                ("exec-path", Val::Optional),
                ("config-env", Val::Required),
                ("super-prefix", Val::Required),
                ("list-cmds", Val::Required),
                ("paginate", Val::No),
                ("no-pager", Val::No),
                ("bare", Val::No),
                ("literal-pathspecs", Val::No),
                ("no-replace-objects", Val::No),
                ("attr-source", Val::Required),
            ],
            permute: false,
        },
        escapes: &[
            (
                "-c",
                "`git -c` sets configuration, which can run programs (core.fsmonitor, core.sshCommand, core.pager, alias.*)",
            ),
            (
                "--config-env",
                "`git --config-env` sets configuration, which can run programs",
            ),
            (
                "--exec-path",
                "`git --exec-path` chooses where git finds the programs it runs",
            ),
            ("-p", "`git -p` pipes output through a pager program"),
            (
                "--paginate",
                "`git --paginate` pipes output through a pager program",
            ),
        ],
        path_opts: &["-C", "--git-dir", "--work-tree"],
        operands: Operands::Generic,
        inject_args: &[
            "--no-pager",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.pager=cat",
            "-c",
            "core.sshCommand=false",
            "-c",
            "core.editor=true",
            "-c",
            "sequence.editor=true",
            "-c",
            "diff.external=",
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "credential.helper=",
            "-c",
            "safe.bareRepository=explicit",
        ],
        inject_env: &[
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_PAGER", "cat"),
            ("GIT_EDITOR", "true"),
            ("GIT_SEQUENCE_EDITOR", "true"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_ASKPASS", "false"),
        ],
        custom: Some(git),
        ..BASE
    },
    Spec {
        names: &["npm", "pnpm", "yarn"],
        grammar: Grammar {
            short_value: "",
            long: &[
                ("prefix", Val::Required),
                ("userconfig", Val::Required),
                ("globalconfig", Val::Required),
                ("cache", Val::Required),
                ("script-shell", Val::Required),
            ],
            permute: false,
        },
        escapes: &[(
            "--script-shell",
            "`npm --script-shell` chooses the shell that runs scripts",
        )],
        operands: Operands::NotPaths,
        custom: Some(npm),
        ..BASE
    },
    Spec {
        names: &["cargo"],
        grammar: Grammar {
            short_value: "CZ",
            long: &[
                ("config", Val::Required),
                ("manifest-path", Val::Required),
                ("target-dir", Val::Required),
                ("color", Val::Required),
            ],
            permute: false,
        },
        escapes: &[
            (
                "--config",
                "`cargo --config` can set target runners, linkers and aliases (programs)",
            ),
            ("-Z", "`cargo -Z` enables unstable behaviour"),
        ],
        path_opts: &["--manifest-path", "--target-dir", "-C"],
        operands: Operands::NotPaths,
        custom: Some(cargo),
        ..BASE
    },
    Spec {
        names: &["go"],
        operands: Operands::NotPaths,
        inject_env: &[("GOTOOLCHAIN", "local"), ("GOFLAGS", "")],
        custom: Some(go),
        ..BASE
    },
    Spec {
        names: &["pip", "pip3"],
        grammar: Grammar {
            short_value: "r",
            long: &[
                ("requirement", Val::Required),
                ("config-file", Val::Required),
            ],
            permute: false,
        },
        operands: Operands::NotPaths,
        custom: Some(pip),
        ..BASE
    },
    Spec {
        names: &["docker", "podman"],
        grammar: Grammar {
            short_value: "Hc",
            long: &[
                ("host", Val::Required),
                ("context", Val::Required),
                ("config", Val::Required),
            ],
            permute: false,
        },
        escapes: &[
            (
                "-H",
                "`docker -H` talks to a daemon of the caller's choosing",
            ),
            (
                "--host",
                "`docker --host` talks to a daemon of the caller's choosing",
            ),
            ("-c", "`docker -c` chooses another daemon context"),
            (
                "--context",
                "`docker --context` chooses another daemon context",
            ),
            (
                "--config",
                "`docker --config` loads a client config (credential helpers are programs)",
            ),
        ],
        operands: Operands::NotPaths,
        custom: Some(docker),
        ..BASE
    },
    Spec {
        names: &["curl"],
        grammar: Grammar {
            short_value: "oKTdFHuUxAeEbcDrwXYyzCmQtP",
            long: &[
                ("output", Val::Required),
                ("config", Val::Required),
                ("upload-file", Val::Required),
                ("data", Val::Required),
                ("data-binary", Val::Required),
                ("data-raw", Val::No),
                ("data-urlencode", Val::Required),
                ("form", Val::Required),
                ("cookie-jar", Val::Required),
                ("cookie", Val::Required),
                ("dump-header", Val::Required),
                ("trace", Val::Required),
                ("trace-ascii", Val::Required),
                ("libcurl", Val::Required),
                ("netrc-file", Val::Required),
                ("cacert", Val::Required),
                ("cert", Val::Required),
                ("key", Val::Required),
                ("output-dir", Val::Required),
                ("stderr", Val::Required),
                ("header", Val::Required),
                ("user", Val::Required),
                ("request", Val::Required),
                ("url", Val::Required),
                ("write-out", Val::Required),
                ("unix-socket", Val::Required),
                ("abstract-unix-socket", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            ("-K", "`curl -K` loads a config file of options"),
            ("--config", "`curl --config` loads a config file of options"),
            (
                "--unix-socket",
                "`curl --unix-socket` talks to a local daemon (the Docker socket is root-equivalent)",
            ),
            (
                "--abstract-unix-socket",
                "`curl --abstract-unix-socket` talks to a local daemon",
            ),
        ],
        path_opts: &[
            "-o",
            "--output",
            "-T",
            "--upload-file",
            "-c",
            "--cookie-jar",
            "-D",
            "--dump-header",
            "--trace",
            "--trace-ascii",
            "--libcurl",
            "--netrc-file",
            "--cacert",
            "--cert",
            "--key",
            "--output-dir",
            "--stderr",
        ],
        operands: Operands::NotPaths,
        // `-q` must come first: it stops curl reading ~/.curlrc, which is in the jail (HOME).
        inject_args: &["-q"],
        custom: Some(curl),
        ..BASE
    },
    Spec {
        names: &["wget"],
        grammar: Grammar {
            short_value: "OoaPiBeUtTwQ",
            long: &[
                ("output-document", Val::Required),
                ("output-file", Val::Required),
                ("append-output", Val::Required),
                ("directory-prefix", Val::Required),
                ("input-file", Val::Required),
                ("execute", Val::Required),
                ("config", Val::Required),
                ("post-file", Val::Required),
                ("body-file", Val::Required),
                ("use-askpass", Val::Required),
                ("load-cookies", Val::Required),
                ("save-cookies", Val::Required),
                ("ca-certificate", Val::Required),
                ("certificate", Val::Required),
                ("private-key", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            ("-e", "`wget -e` runs wgetrc commands"),
            ("--execute", "`wget --execute` runs wgetrc commands"),
            ("--config", "`wget --config` loads a wgetrc"),
            (
                "--use-askpass",
                "`wget --use-askpass` runs a program of the caller's choosing",
            ),
        ],
        path_opts: &[
            "-O",
            "--output-document",
            "-o",
            "--output-file",
            "-a",
            "--append-output",
            "-P",
            "--directory-prefix",
            "-i",
            "--input-file",
            "--post-file",
            "--body-file",
            "--load-cookies",
            "--save-cookies",
            "--ca-certificate",
            "--certificate",
            "--private-key",
        ],
        operands: Operands::NotPaths,
        // ~/.wgetrc is in the jail (HOME), where the model can write it.
        inject_args: &["--no-config"],
        custom: Some(curl),
        ..BASE
    },
];

/// The spec for `name`, if the catalog knows it.
pub fn lookup(name: &str) -> Option<&'static Spec> {
    CATALOG.iter().find(|s| s.names.contains(&name))
}

pub(super) fn inspect_known(
    spec: &'static Spec,
    _name: &str,
    args: &[String],
    program: Option<&Path>,
) -> Inspection {
    let mut insp = Inspection::default();
    if let Kind::Interpreter(why) = spec.kind {
        insp.interpreter = Some(why.to_owned());
        if spec.escapes.is_empty() {
            insp.paths = args.iter().map(|a| PathCheck::Generic(a.clone())).collect();
            return insp;
        }
    }
    let parsed = parse(&spec.grammar, args);
    let mut program_supplied = false;
    for arg in &parsed.args {
        let Arg::Opt {
            name,
            value,
            ambiguous,
        } = arg
        else {
            continue;
        };
        if *ambiguous {
            // Refuse an abbreviation that could mean a dangerous option.
            let given = name.trim_start_matches('-');
            if let Some((esc, why)) = spec
                .escapes
                .iter()
                .find(|(e, _)| e.starts_with("--") && e[2..].starts_with(given))
            {
                insp.escape(
                    esc,
                    format!("{why} (`{name}` is an ambiguous abbreviation that could mean it)"),
                );
            }
        }
        if let Some((esc, why)) = spec.escapes.iter().find(|(e, _)| e == name) {
            insp.escape(esc, *why);
        }
        if spec.program_opts.contains(&name.as_str()) {
            program_supplied = true;
        }
        if let Some(v) = value {
            if spec.path_opts.contains(&name.as_str()) {
                insp.paths.push(PathCheck::Path(v.clone()));
            } else if !spec.typed_values || !known_option(&spec.grammar, name) {
                insp.paths.push(PathCheck::Generic(v.clone()));
            }
        }
    }
    let mut operands = parsed.operands();
    match spec.operands {
        Operands::Paths => insp
            .paths
            .extend(operands.map(|o| PathCheck::Path(o.to_owned()))),
        Operands::NotPaths => {}
        Operands::Generic => insp
            .paths
            .extend(operands.map(|o| PathCheck::Generic(o.to_owned()))),
        Operands::AfterProgram => {
            if !program_supplied {
                operands.next();
            }
            insp.paths
                .extend(operands.map(|o| PathCheck::Path(o.to_owned())));
        }
    }
    // The spec's hardening first: a custom check may add more (gawk's `--sandbox`), and
    // must not see it replaced.
    insp.inject_args = spec.inject_args.iter().map(|s| (*s).to_owned()).collect();
    insp.inject_env = spec
        .inject_env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if let Some(check) = spec.custom {
        check(&parsed, args, program, &mut insp);
    }
    insp
}

fn known_option(grammar: &Grammar, name: &str) -> bool {
    match name.strip_prefix("--") {
        Some(long) => grammar.long.iter().any(|(n, _)| *n == long),
        None => name
            .chars()
            .nth(1)
            .is_some_and(|c| grammar.short_value.contains(c)),
    }
}

// ----- checks that need code ----------------------------------------------------------------

fn first_operand_not_path(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // chmod MODE FILE…, chown OWNER FILE…: the first operand is not a path.
    if let Some(first) = p.operands().next() {
        insp.paths
            .retain(|c| !matches!(c, PathCheck::Path(v) if v == first));
    }
}

fn dd(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in args {
        if let Some(v) = a.strip_prefix("if=").or_else(|| a.strip_prefix("of=")) {
            insp.paths.push(PathCheck::Path(v.to_owned()));
        }
    }
}

/// mawk and busybox awk have no sandbox: refuse the constructs that run commands or write
/// files. gawk gets `--sandbox`, which refuses them itself.
fn awk(p: &Parsed, args: &[String], program: Option<&Path>, insp: &mut Inspection) {
    let is_gawk = program
        .and_then(|p| std::fs::canonicalize(p).ok())
        .is_some_and(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("gawk"))
        });
    if is_gawk {
        insp.inject_args.push("--sandbox".into());
    }
    if p.has("-f") || p.has("--file") {
        insp.escape(
            "-f",
            "awk here has no sandbox, so a program file cannot be checked: pass the program inline",
        );
        return;
    }
    // The program is the first operand, or the text of every -e / --source option.
    let sources: Vec<&str> = p.opts("-e").chain(p.opts("--source")).flatten().collect();
    let text: String = if sources.is_empty() {
        match p.operands().next() {
            Some(t) => t.to_owned(),
            None => return,
        }
    } else {
        sources.join("\n")
    };
    let _ = args;
    let checks = [
        ("system", "`system()`, which runs a shell command"),
        ("|", "`|`, which pipes to or from a shell command"),
        (
            "getline",
            "`getline`, which can read a command's output or any file",
        ),
        (
            ">",
            "`>`, which can redirect output into any file (this awk has no sandbox; allowlist gawk to compare with `>`)",
        ),
        ("ENVIRON", "ENVIRON, which reads the environment"),
    ];
    for (needle, why) in checks {
        // gawk's sandbox already refuses output redirection; `>` is then only a comparison.
        if text.contains(needle) && !(is_gawk && needle == ">") {
            insp.escape(needle, format!("awk program uses {why}"));
        }
    }
    // Operands after the program that look like `var=value` are assignments, not paths.
    insp.paths
        .retain(|c| !matches!(c, PathCheck::Path(v) if v.contains('=') && !v.starts_with('/')));
}

/// Refuses sed scripts that run commands or touch files: the `e`, `r`, `R`, `w`, `W`
/// commands and the `e` and `w` flags of `s`. Fail closed: anything unparsable counts.
fn sed(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    let mut scripts: Vec<&str> = p
        .opts("-e")
        .chain(p.opts("--expression"))
        .flatten()
        .collect();
    let from_opts = !scripts.is_empty() || p.has("-f") || p.has("--file");
    if !from_opts && let Some(first) = p.operands().next() {
        scripts.push(first);
    }
    for script in scripts {
        if let Some((id, why)) = sed_script_escape(script) {
            insp.escape(id, format!("sed script uses {why}"));
        }
    }
}

fn sed_script_escape(script: &str) -> Option<(&'static str, &'static str)> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // Skip separators, addresses (`1,5`, `$`, `/re/`, `\%re%`) and negation.
        let c = chars[i];
        if c.is_whitespace()
            || matches!(c, ';' | '{' | '}' | ',' | '!' | '$' | '~' | '+')
            || c.is_ascii_digit()
        {
            i += 1;
            continue;
        }
        if c == '/' || c == '\\' {
            let delim = if c == '\\' {
                chars.get(i + 1).copied().unwrap_or('/')
            } else {
                '/'
            };
            i += if c == '\\' { 2 } else { 1 };
            while i < chars.len() && chars[i] != delim {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            // Address flags such as `I` and `M`.
            while i < chars.len() && matches!(chars[i], 'I' | 'M') {
                i += 1;
            }
            continue;
        }
        match c {
            'e' => return Some(("e", "the `e` command, which runs a shell command")),
            'r' | 'R' => {
                return Some((
                    "r",
                    "the `r`/`R` command, which reads a file of the caller's choosing",
                ));
            }
            'w' | 'W' => {
                return Some((
                    "w",
                    "the `w`/`W` command, which writes a file of the caller's choosing",
                ));
            }
            's' | 'y' => {
                let &delim = chars.get(i + 1)?;
                i += 2;
                for _ in 0..2 {
                    while i < chars.len() && chars[i] != delim {
                        i += if chars[i] == '\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                if c == 's' {
                    while i < chars.len() && !matches!(chars[i], ';' | '}' | '\n') {
                        match chars[i] {
                            'e' => {
                                return Some((
                                    "s///e",
                                    "the `e` flag of `s`, which runs the pattern space as a command",
                                ));
                            }
                            'w' | 'W' => {
                                return Some((
                                    "s///w",
                                    "the `w` flag of `s`, which writes a file of the caller's choosing",
                                ));
                            }
                            _ => i += 1,
                        }
                    }
                }
            }
            // Commands with a text argument to end of line: a, i, c, and labels b, t, T, :
            'a' | 'i' | 'c' | 'b' | 't' | 'T' | ':' => {
                while i < chars.len() && chars[i] != '\n' && chars[i] != ';' {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn jq(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // --slurpfile NAME FILE and --rawfile NAME FILE take two values; the second is a path.
    let args = &p.args;
    for (i, a) in args.iter().enumerate() {
        if let Arg::Opt { name, .. } = a
            && (name == "--slurpfile" || name == "--rawfile")
            && let Some(Arg::Operand(path)) = args.get(i + 1)
        {
            insp.paths.push(PathCheck::Path(path.clone()));
        }
    }
}

/// find: starting points are paths; the expression has its own escapes.
fn find(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    insp.paths.clear();
    let mut in_expression = false;
    // Leading options (`-H`, `-L`, `-P`, `-D debugopts`, `-O3`) come before the starting points.
    let mut start = 0;
    while let Some(a) = args.get(start) {
        match a.as_str() {
            "-H" | "-L" | "-P" => start += 1,
            "-D" => start += 2,
            o if o.starts_with("-O") => start += 1,
            _ => break,
        }
    }
    let mut iter = args[start.min(args.len())..].iter().peekable();
    while let Some(a) = iter.next() {
        let is_expr =
            a.starts_with('-') && a.len() > 1 || matches!(a.as_str(), "(" | ")" | "!" | ",");
        if !in_expression && !is_expr {
            insp.paths.push(PathCheck::Path(a.clone()));
            continue;
        }
        in_expression = true;
        match a.as_str() {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                insp.escape(
                    a,
                    format!("`find {a}` runs a command of the caller's choosing on each file"),
                );
            }
            "-delete" => insp.escape(a, "`find -delete` deletes every matching file"),
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                if let Some(v) = iter.next() {
                    insp.paths.push(PathCheck::Path(v.clone()));
                }
            }
            "-newer" | "-anewer" | "-cnewer" | "-samefile" | "-files0-from" => {
                if let Some(v) = iter.next() {
                    insp.paths.push(PathCheck::Path(v.clone()));
                }
            }
            _ => {}
        }
    }
}

/// tar: old-style bundles (`tar cf a.tar f`), long options, and remote archives.
fn tar(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const G: Grammar = Grammar {
        short_value: "fCTXIFKLNgV",
        long: &[
            ("file", Val::Required),
            ("directory", Val::Required),
            ("files-from", Val::Required),
            ("exclude-from", Val::Required),
            ("use-compress-program", Val::Required),
            ("to-command", Val::Required),
            ("checkpoint", Val::Optional),
            ("checkpoint-action", Val::Required),
            ("info-script", Val::Required),
            ("new-volume-script", Val::Required),
            ("rsh-command", Val::Required),
            ("rmt-command", Val::Required),
            ("index-file", Val::Required),
            ("listed-incremental", Val::Required),
            ("exclude", Val::Required),
            ("transform", Val::Required),
            ("xform", Val::Required),
            ("force-local", Val::No),
            ("extract", Val::No),
            ("create", Val::No),
            ("list", Val::No),
        ],
        permute: true,
    };
    const ESC: &[(&str, &str)] = &[
        (
            "--checkpoint-action",
            "`tar --checkpoint-action=exec=` runs a command at each checkpoint",
        ),
        (
            "--to-command",
            "`tar --to-command` pipes each member into a command",
        ),
        (
            "--use-compress-program",
            "`tar --use-compress-program` (`-I`) runs a program of the caller's choosing",
        ),
        (
            "-I",
            "`tar -I` runs a compression program of the caller's choosing",
        ),
        (
            "--info-script",
            "`tar --info-script` (`-F`) runs a script at each volume",
        ),
        ("-F", "`tar -F` runs a script at each volume"),
        (
            "--new-volume-script",
            "`tar --new-volume-script` runs a script at each volume",
        ),
        (
            "--rsh-command",
            "`tar --rsh-command` runs a remote shell program",
        ),
        (
            "--rmt-command",
            "`tar --rmt-command` runs a program of the caller's choosing",
        ),
    ];
    const PATHS: &[&str] = &[
        "-f",
        "--file",
        "-C",
        "--directory",
        "-T",
        "--files-from",
        "-X",
        "--exclude-from",
        "--index-file",
        "--listed-incremental",
        "-g",
    ];
    // An old-style first argument (`cf`, `xzf`) is a bundle of short options.
    let mut normalized: Vec<String> = args.to_vec();
    if let Some(first) = normalized.first_mut()
        && !first.starts_with('-')
        && !first.is_empty()
        && first.chars().all(|c| c.is_ascii_alphabetic())
    {
        *first = format!("-{first}");
    }
    let parsed = parse(&G, &normalized);
    insp.paths.clear();
    let force_local = parsed.has("--force-local");
    for a in &parsed.args {
        match a {
            Arg::Opt {
                name,
                value,
                ambiguous,
            } => {
                if let Some((esc, why)) = ESC.iter().find(|(e, _)| e == name) {
                    insp.escape(esc, *why);
                }
                if *ambiguous {
                    let given = name.trim_start_matches('-');
                    if let Some((esc, why)) = ESC
                        .iter()
                        .find(|(e, _)| e.starts_with("--") && e[2..].starts_with(given))
                    {
                        insp.escape(esc, format!("{why} (ambiguous abbreviation)"));
                    }
                }
                if let Some(v) = value
                    && PATHS.contains(&name.as_str())
                {
                    if (name == "-f" || name == "--file") && !force_local && is_remote(v) {
                        insp.escape(
                            "remote-archive",
                            format!(
                                "`tar -f {v}` names a remote archive (host:path), which runs rsh"
                            ),
                        );
                    }
                    insp.paths.push(PathCheck::Path(v.clone()));
                }
            }
            Arg::Operand(o) => insp.paths.push(PathCheck::Path(o.clone())),
        }
    }
}

fn is_remote(v: &str) -> bool {
    match v.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

fn remote_operands(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for o in p.operands() {
        if is_remote(o) {
            insp.escape(
                "remote",
                format!("`{o}` names a remote host, reached through a remote shell program"),
            );
        }
    }
}

fn zip(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in args {
        if a.starts_with("-TT") {
            insp.escape(
                "--unzip-command",
                "`zip -TT` runs a program of the caller's choosing to test the archive",
            );
        }
    }
}

/// ssh/scp: `-o` options that run programs, in any spelling (`-oProxyCommand=x`,
/// `-o 'proxycommand x'`).
fn ssh(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const RUNS: &[&str] = &[
        "proxycommand",
        "localcommand",
        "permitlocalcommand",
        "knownhostscommand",
        "remotecommand",
        "include",
        "pkcs11provider",
        "securitykeyprovider",
        "sshaskpass",
    ];
    for value in p.opts("-o").flatten() {
        let key: String = value
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '=')
            .collect::<String>()
            .to_ascii_lowercase();
        if RUNS.contains(&key.as_str()) {
            insp.escape(
                &format!("-o {key}"),
                format!("`ssh -o {key}` runs a program or loads code of the caller's choosing"),
            );
        }
    }
}

fn scp(p: &Parsed, args: &[String], program: Option<&Path>, insp: &mut Inspection) {
    ssh(p, args, program, insp);
    // Local operands (no `host:` prefix) are files scp reads or writes.
    for o in p.operands() {
        if !is_remote(o) {
            insp.paths.push(PathCheck::Path(o.to_owned()));
        }
    }
}

fn less(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for o in p.operands() {
        if o.starts_with('+') {
            insp.escape(
                "+cmd",
                "`less +cmd` runs less commands at startup, which can run shell commands",
            );
        }
    }
    insp.paths
        .retain(|c| !matches!(c, PathCheck::Path(v) if v.starts_with('+')));
}

/// sqlite3 has single-dash long options and reads SQL and dot-commands from its operands.
fn sqlite3(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const DOT: &[&str] = &[
        ".system", ".shell", ".load", ".output", ".once", ".open", ".save", ".backup", ".restore",
        ".import", ".excel", ".log", ".read", ".cd", ".clone", ".archive", ".ar",
    ];
    const VALUE: &[&str] = &[
        "-cmd",
        "-init",
        "-separator",
        "-newline",
        "-nullvalue",
        "-vfs",
        "-maxsize",
        "-mmap",
        "-pagecache",
        "-lookaside",
        "-heap",
    ];
    insp.paths.clear();
    let mut db_seen = false;
    let mut i = 0;
    let mut sql: Vec<&str> = Vec::new();
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        let opt = a.trim_start_matches('-');
        if a.starts_with('-') && a.len() > 1 {
            if VALUE.contains(&format!("-{opt}").as_str()) {
                let v = args.get(i).map(String::as_str).unwrap_or("");
                i += 1;
                match opt {
                    "cmd" => sql.push(v),
                    "init" => insp.paths.push(PathCheck::Path(v.to_owned())),
                    _ => {}
                }
            } else if opt == "unsafe-testing" {
                insp.escape(
                    "-unsafe-testing",
                    "`sqlite3 -unsafe-testing` lifts safety limits",
                );
            }
            continue;
        }
        if !db_seen {
            db_seen = true;
            insp.paths.push(PathCheck::Path(a.to_owned()));
        } else {
            sql.push(a);
        }
    }
    for text in sql {
        for line in text.split(['\n', ';']) {
            let line = line.trim();
            let lower = line.to_ascii_lowercase();
            if let Some(dot) = DOT
                .iter()
                .find(|d| lower == **d || lower.starts_with(&format!("{d} ")))
            {
                insp.escape(dot, format!("`{dot}` in sqlite3 runs a command, loads code or reads or writes a file of the caller's choosing"));
            }
            if lower.contains("load_extension") {
                insp.escape(
                    "load_extension",
                    "`load_extension()` loads a shared library",
                );
            }
            if lower.starts_with("attach")
                || lower.contains(" attach ")
                || lower.contains("vacuum into")
            {
                insp.escape(
                    "attach",
                    "ATTACH / VACUUM INTO open a database file of the caller's choosing",
                );
            }
        }
    }
}

/// git: global options, then a subcommand with its own escapes.
fn git(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    let mut operands = p.args.iter().skip_while(|a| matches!(a, Arg::Opt { .. }));
    let Some(Arg::Operand(sub)) = operands.next() else {
        return;
    };
    let rest: Vec<String> = operands
        .map(|a| match a {
            Arg::Operand(s) => s.clone(),
            Arg::Opt { .. } => String::new(),
        })
        .collect();
    insp.paths
        .retain(|c| !matches!(c, PathCheck::Generic(v) if v == sub));
    const SUB: Grammar = Grammar {
        short_value: "ouxO",
        long: &[
            ("upload-pack", Val::Required),
            ("receive-pack", Val::Required),
            ("exec", Val::Required),
            ("output", Val::Required),
            ("output-directory", Val::Required),
            ("extcmd", Val::Required),
            ("tool", Val::Required),
            ("open-files-in-pager", Val::Optional),
            ("ext-diff", Val::No),
            ("textconv", Val::No),
            ("remote", Val::Required),
            ("template", Val::Required),
            ("separate-git-dir", Val::Required),
            ("reference", Val::Required),
            ("upload-archive", Val::No),
            ("config", Val::Required),
            ("get", Val::No),
            ("get-all", Val::No),
            ("get-regexp", Val::No),
            ("list", Val::No),
            ("follow", Val::No),
            ("format", Val::Required),
            ("stat", Val::Optional),
            ("oneline", Val::No),
            ("untracked-files", Val::Optional),
        ],
        permute: true,
    };
    let parsed = parse(&SUB, &rest);
    // Whether a short option takes a value depends on the subcommand (`-u` is a flag for
    // push, `-o` for grep), so escapes are also looked for in a reading where no short option
    // swallows the next token: an option hidden behind a misread value is still found.
    const FLAGS: Grammar = Grammar {
        short_value: "",
        long: SUB.long,
        permute: true,
    };
    let flags_only = parse(&FLAGS, &rest);
    if !GIT_BUILTINS.contains(&sub.as_str()) {
        insp.escape(
            "alias",
            format!(
                "`git {sub}` is not a built-in subcommand: git would run an alias (which repository config can make a shell command) or an external git-{sub} program"
            ),
        );
    }
    let sub_esc = |insp: &mut Inspection, id: &str, why: &str| {
        insp.escape(id, format!("`git {sub} {id}` {why}"))
    };
    for a in parsed.args.iter().chain(flags_only.args.iter()) {
        let Arg::Opt {
            name,
            value,
            ambiguous,
        } = a
        else {
            continue;
        };
        let given = name.trim_start_matches('-');
        let means = |full: &str| {
            name == full || (*ambiguous && full.trim_start_matches('-').starts_with(given))
        };
        if means("--upload-pack")
            || (name == "-u" && matches!(sub.as_str(), "clone" | "fetch" | "pull" | "ls-remote"))
        {
            sub_esc(
                insp,
                "--upload-pack",
                "runs a program of the caller's choosing",
            );
        }
        if means("--receive-pack") {
            sub_esc(
                insp,
                "--receive-pack",
                "runs a program of the caller's choosing",
            );
        }
        if means("--exec") || (name == "-x" && sub == "rebase") {
            sub_esc(insp, "--exec", "runs a command of the caller's choosing");
        }
        if means("--extcmd")
            || means("--tool")
            || (name == "-x" && matches!(sub.as_str(), "difftool" | "mergetool"))
        {
            sub_esc(
                insp,
                "--extcmd",
                "runs a diff or merge program of the caller's choosing",
            );
        }
        if means("--open-files-in-pager") || (name == "-O" && sub == "grep") {
            sub_esc(
                insp,
                "--open-files-in-pager",
                "runs a pager program of the caller's choosing",
            );
        }
        if (means("--template") || means("--separate-git-dir") || means("--reference"))
            && let Some(v) = value
        {
            insp.paths.push(PathCheck::Path(v.clone()));
        }
        if means("--config") && matches!(sub.as_str(), "clone" | "submodule") {
            sub_esc(
                insp,
                "--config",
                "sets configuration, which can run programs",
            );
        }
        if (means("--output")
            || means("--output-directory")
            || (name == "-o" && matches!(sub.as_str(), "format-patch" | "archive")))
            && let Some(v) = value
        {
            insp.paths.push(PathCheck::Path(v.clone()));
        }
    }
    match sub.as_str() {
        "config"
            if !(parsed.has("--get")
                || parsed.has("--get-all")
                || parsed.has("--get-regexp")
                || parsed.has("--list")
                || parsed.has("-l")) =>
        {
            insp.escape("config", "`git config` writes configuration that later runs programs (core.fsmonitor, filters, aliases); only --get and --list are read-only");
        }
        "submodule" if parsed.operands().next() == Some("foreach") => {
            insp.escape(
                "submodule foreach",
                "`git submodule foreach` runs a command of the caller's choosing",
            );
        }
        "bisect" if parsed.operands().next() == Some("run") => {
            insp.escape(
                "bisect run",
                "`git bisect run` runs a command of the caller's choosing",
            );
        }
        "filter-branch" => insp.escape(
            "filter-branch",
            "`git filter-branch` runs shell filters of the caller's choosing",
        ),
        "daemon" | "instaweb" | "http-backend" | "shell" | "upload-pack" | "receive-pack"
        | "remote-ext" | "credential" => {
            insp.escape(
                sub,
                format!("`git {sub}` starts a server or runs helper programs"),
            );
        }
        "archive" if parsed.has("--remote") => insp.escape(
            "--remote",
            "`git archive --remote` runs a remote upload-archive program",
        ),
        "bundle" if parsed.operands().next() == Some("create") => {
            if let Some(file) = parsed.operands().nth(1) {
                insp.paths.push(PathCheck::Path(file.to_owned()));
            }
        }
        _ => {}
    }
}

/// git's built-in subcommands. Anything else is an alias or an external `git-*` program.
const GIT_BUILTINS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fetch",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "merge",
    "merge-base",
    "merge-file",
    "merge-tree",
    "mktag",
    "mktree",
    "mv",
    "name-rev",
    "notes",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "update-index",
    "update-ref",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
    // Real git commands whose dangers have their own, more precise escapes below.
    "difftool",
    "mergetool",
    "filter-branch",
    "daemon",
    "instaweb",
    "http-backend",
    "shell",
    "upload-pack",
    "receive-pack",
    "remote-ext",
    "credential",
];

fn subcommand(p: &Parsed) -> Option<&str> {
    p.operands().next()
}

fn npm(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "ls", "list", "ll", "la", "view", "info", "show", "outdated", "help", "search", "version",
        "config", "root", "prefix", "bin", "ping", "doctor", "explain", "why", "fund", "audit",
        "query", "pkg",
    ];
    match subcommand(p) {
        None => {}
        Some(sub) if SAFE.contains(&sub) && !(sub == "audit" && p.operands().nth(1) == Some("fix")) && !(sub == "config" && p.operands().nth(1) == Some("set")) && !(sub == "pkg" && p.operands().nth(1) == Some("set")) => {}
        Some(sub) => insp.escape(sub, format!("`npm {sub}` runs package scripts or installs code that runs (lifecycle scripts from package.json)")),
    }
}

fn cargo(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "tree",
        "metadata",
        "pkgid",
        "locate-project",
        "read-manifest",
        "verify-project",
        "version",
        "help",
        "search",
        "info",
        "fmt",
    ];
    if let Some(sub) = subcommand(p)
        && !SAFE.contains(&sub)
    {
        insp.escape(sub, format!("`cargo {sub}` compiles and runs build scripts and procedural macros (code from the workspace), or installs code"));
    }
}

fn go(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &["version", "env", "list", "doc", "help", "fmt", "vet"];
    if let Some(sub) = args.iter().find(|a| !a.starts_with('-')) {
        if !SAFE.contains(&sub.as_str()) {
            insp.escape(sub, format!("`go {sub}` compiles and runs code, runs generators, or downloads toolchains and modules"));
        }
        if sub == "env" && args.iter().any(|a| a == "-w" || a == "-u") {
            insp.escape(
                "env -w",
                "`go env -w` writes configuration (GOFLAGS, toolchains) that later runs code",
            );
        }
        if sub == "vet" && args.iter().any(|a| a.starts_with("-vettool")) {
            insp.escape(
                "-vettool",
                "`go vet -vettool` runs a program of the caller's choosing",
            );
        }
    }
}

fn pip(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "list", "show", "freeze", "check", "help", "search", "inspect", "index", "hash", "cache",
        "debug",
    ];
    if let Some(sub) = subcommand(p)
        && !SAFE.contains(&sub)
    {
        insp.escape(sub, format!("`pip {sub}` can run a package's build code (setup.py, build backends) or change the environment"));
    }
}

fn docker(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "ps", "images", "image", "version", "info", "inspect", "logs", "stats", "top", "history",
        "search", "help", "events", "port", "diff",
    ];
    if let Some(sub) = subcommand(p) {
        let second = p.operands().nth(1).unwrap_or("");
        let safe = SAFE.contains(&sub)
            && (sub != "image" || matches!(second, "ls" | "list" | "inspect" | "history"));
        if !safe {
            insp.escape(sub, format!("`docker {sub}` changes containers or images through the daemon, which is root-equivalent"));
        }
    }
}

fn curl(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in &p.args {
        let (opt, value) = match a {
            Arg::Opt {
                name,
                value: Some(v),
                ..
            } => (name.as_str(), v.as_str()),
            Arg::Operand(o) => ("", o.as_str()),
            _ => continue,
        };
        // `-d @file`, `-F name=@file`, `--data-binary @file` read local files.
        let at = match opt {
            "-d" | "--data" | "--data-binary" | "--data-urlencode" | "--json" => {
                value.strip_prefix('@')
            }
            "-F" | "--form" => value
                .split_once("=@")
                .map(|(_, f)| f)
                .or_else(|| value.split_once("=<").map(|(_, f)| f)),
            _ => None,
        };
        if let Some(file) = at.filter(|f| !f.is_empty() && *f != "-") {
            let file = file.split(';').next().unwrap_or(file);
            insp.paths.push(PathCheck::Path(file.to_owned()));
        }
        let lower = value.to_ascii_lowercase();
        if (opt.is_empty() || opt == "--url")
            && (lower.starts_with("file:")
                || lower.starts_with("scp:")
                || lower.starts_with("sftp:"))
        {
            insp.escape(
                "file-url",
                format!("`{value}` reads local files or runs ssh; only network URLs are allowed"),
            );
        }
    }
}
