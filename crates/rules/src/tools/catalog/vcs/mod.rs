//! git: its global options, its subcommands and what each subcommand's options mean, as
//! data the shared matcher reads ([`Subcommands`]).
//!
//! Owns the options before the subcommand that set configuration or choose programs (`-c`,
//! `--config-env`, `--exec-path`, `-p`); the options after it that run programs
//! (`--upload-pack`, `--receive-pack`, `--exec`, `--extcmd`, `--open-files-in-pager`) or name
//! files (`--output`, `--template`, …); the short spellings that mean them under one
//! subcommand only (`-u` is `--upload-pack` for fetch, a flag for push); the subcommands that
//! are escapes in themselves (`config` without `--get`, `submodule foreach`, `bisect run`,
//! `filter-branch`, the servers, `difftool`/`mergetool` and `help`, which run tools that
//! repository configuration chooses); the list of built-ins, since any other name is an alias
//! or a `git-*` program; the spellings that force a push without `--force` (`+ref`,
//! `--force-with-lease`), so that an operator's `deny_args` catch them; and the
//! configuration and environment injected so that none of the repository's own settings can
//! run a program.
//!
//! It must never let an option that sets configuration or names a program git runs pass, nor
//! a subcommand it does not list: git resolves those through configuration, which the
//! repository (and so the model) controls. The injected settings are defence in depth, not a
//! reason to allow.

use super::spec::{BASE, Operands, Spec};
use super::subcommands::{
    ImpliedBy, Implies, OptEscape, PLAIN, Refusal, Sub, Subcommands, Unknown, Word,
};
use crate::tools::parse::Grammar;

pub(crate) const SPECS: &[Spec] = &[Spec {
    names: &["git"],
    // The options before the subcommand. git stops at the first operand: the rest belong
    // to the subcommand, whose grammar is in SUBCOMMANDS.
    grammar: Grammar {
        short_value: "Cc",
        long: "git-dir= work-tree= namespace= exec-path=? config-env= super-prefix= list-cmds= \
               paginate no-pager bare literal-pathspecs no-replace-objects attr-source=",
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
        // git reads a leading `--help` or `-h` as the `help` subcommand (git.c), which is
        // refused below; `git --help` alone is refused with it.
        (
            "--help",
            "`git --help NAME` is `git help NAME`, which shows a manual page through the viewer that repository configuration chooses (man.viewer, man.<tool>.cmd); read it with `man git-NAME`",
        ),
        (
            "-h",
            "`git -h NAME` is `git help NAME`, which shows a manual page through the viewer that repository configuration chooses (man.viewer, man.<tool>.cmd); read it with `man git-NAME`",
        ),
    ],
    path_opts: &["-C", "--git-dir", "--work-tree"],
    // Every word after the subcommand keeps the generic check (the subcommand's own
    // grammar below only adds to it): git's pathspecs, revisions and options mix freely.
    operands: Operands::Generic,
    // Command-line configuration outranks every config file, including the repository's
    // own `.git/config`, which the model can write.
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
    subcommands: Some(&SUBCOMMANDS),
    ..BASE
}];

/// What follows the subcommand.
const SUBCOMMANDS: Subcommands = Subcommands {
    // One grammar for every subcommand: their long options, and the short letters that take
    // a value under some subcommand (`-o` for format-patch, `-u` for fetch, `-x` for rebase,
    // `-O` for grep). Where a letter is a flag instead (`git push -u`), the matcher's second
    // reading, with no values at all, still sees what follows it.
    grammar: Grammar {
        short_value: "ouxO",
        long: "upload-pack= receive-pack= exec= output= output-directory= extcmd= tool= \
               open-files-in-pager=? ext-diff textconv remote= template= separate-git-dir= \
               reference= upload-archive config= get get-all get-regexp list follow format= \
               stat=? oneline untracked-files=? force force-with-lease=? force-if-includes \
               stdin-paths",
        permute: true,
    },
    // Refused after any subcommand: no read-only subcommand needs them, and several accept
    // them (fetch, pull, clone, ls-remote, push, rebase, difftool, mergetool, grep).
    escapes: &[
        OptEscape {
            id: "--upload-pack",
            also: &[],
            why: "runs a program of the caller's choosing",
        },
        OptEscape {
            id: "--receive-pack",
            also: &[],
            why: "runs a program of the caller's choosing",
        },
        OptEscape {
            id: "--exec",
            also: &[],
            why: "runs a command of the caller's choosing",
        },
        OptEscape {
            id: "--extcmd",
            also: &["--tool"],
            why: "runs a diff or merge program of the caller's choosing",
        },
        OptEscape {
            id: "--open-files-in-pager",
            also: &[],
            why: "runs a pager program of the caller's choosing",
        },
        // `git <sub> --help` is `git help <sub>` (git.c turns it around).
        OptEscape {
            id: "--help",
            also: &[],
            why: HELP_WHY_SUB,
        },
    ],
    path_opts: &[
        "--template",
        "--separate-git-dir",
        "--reference",
        "--output",
        "--output-directory",
    ],
    table: &[
        Sub {
            names: &["clone"],
            // `clone -c key=value` is `--config`: applied to the new repository before its
            // checkout runs filters.
            aliases: &[("-u", "--upload-pack"), ("-c", "--config")],
            escapes: &[CONFIG],
            ..PLAIN
        },
        Sub {
            names: &["fetch", "pull", "ls-remote"],
            aliases: &[("-u", "--upload-pack")],
            ..PLAIN
        },
        Sub {
            names: &["rebase"],
            aliases: &[("-x", "--exec")],
            ..PLAIN
        },
        // Even with no option they run the tool that `diff.tool`/`merge.tool` and
        // `difftool.<tool>.cmd` name, which the repository's own config (writable by the
        // model) can set to any command, and the stock tools are editors (vimdiff) that read
        // rc files the model can plant. `-t`/`--tool` and `-x`/`--extcmd` say so first.
        Sub {
            names: &["difftool", "mergetool"],
            aliases: &[("-x", "--extcmd"), ("-t", "--tool")],
            refuse: Some(Refusal::always(
                "runs a diff or merge tool that options or repository configuration choose (difftool.<tool>.cmd, an editor reading rc files); show changes with `git diff`",
            )),
            ..PLAIN
        },
        // `git help status` (and `git status --help`) runs the man viewer that `man.viewer`
        // and `man.<tool>.cmd` in repository config name; the listing modes print only.
        Sub {
            names: &["help"],
            refuse: Some(Refusal {
                why: HELP_WHY,
                unless: &[
                    "-a",
                    "--all",
                    "-g",
                    "--guides",
                    "-c",
                    "--config",
                    "--user-interfaces",
                    "--developer-interfaces",
                ],
            }),
            ..PLAIN
        },
        Sub {
            names: &["push"],
            // An operator's `deny_args = ["push --force"]` means every forcing spelling.
            implies: &[
                Implies {
                    by: ImpliedBy::Option("-f"),
                    means: "force",
                },
                Implies {
                    by: ImpliedBy::Option("--force-with-lease"),
                    means: "force",
                },
                Implies {
                    by: ImpliedBy::Option("--force-if-includes"),
                    means: "force",
                },
                Implies {
                    by: ImpliedBy::OperandPrefix("+"),
                    means: "force",
                },
            ],
            ..PLAIN
        },
        Sub {
            names: &["hash-object"],
            escapes: &[OptEscape {
                id: "--stdin-paths",
                also: &[],
                why: "reads the names of the files to hash from standard input, which the server cannot check (they could name files outside the jail); name the files as arguments",
            }],
            ..PLAIN
        },
        Sub {
            names: &["grep"],
            aliases: &[("-O", "--open-files-in-pager")],
            ..PLAIN
        },
        Sub {
            names: &["format-patch"],
            aliases: &[("-o", "--output")],
            ..PLAIN
        },
        Sub {
            names: &["archive"],
            aliases: &[("-o", "--output")],
            escapes: &[OptEscape {
                id: "--remote",
                also: &[],
                why: "runs a remote upload-archive program",
            }],
            ..PLAIN
        },
        Sub {
            names: &["config"],
            refuse: Some(Refusal {
                why: "writes configuration that later runs programs (core.fsmonitor, filters, aliases), and .git/config is a protected path; only --get and --list are read-only; git's identity (user.name, user.email) is the operator's to set in [terminal.env] (GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL)",
                unless: &["--get", "--get-all", "--get-regexp", "--list", "-l"],
            }),
            ..PLAIN
        },
        Sub {
            names: &["submodule"],
            escapes: &[CONFIG],
            words: &[Word {
                names: &["foreach"],
                refuse: Some(Refusal::always("runs a command of the caller's choosing")),
                path_operands: 0,
                inject: &[],
            }],
            ..PLAIN
        },
        Sub {
            names: &["bisect"],
            words: &[Word {
                names: &["run"],
                refuse: Some(Refusal::always("runs a command of the caller's choosing")),
                path_operands: 0,
                inject: &[],
            }],
            ..PLAIN
        },
        Sub {
            names: &["bundle"],
            words: &[Word {
                names: &["create"],
                refuse: None,
                path_operands: 1,
                inject: &[],
            }],
            ..PLAIN
        },
        // The commands that show diffs: never through an external diff program or a
        // textconv filter, which a repository's own config names (and the model can write).
        // `-c diff.external=` above stays as the fail-closed default for any other path.
        Sub {
            names: &["diff", "log", "show", "whatchanged"],
            inject: &["--no-ext-diff", "--no-textconv"],
            ..PLAIN
        },
        Sub {
            names: &["stash"],
            words: &[Word {
                names: &["show"],
                refuse: None,
                path_operands: 0,
                inject: &["--no-ext-diff", "--no-textconv"],
            }],
            ..PLAIN
        },
        Sub {
            names: &["blame", "annotate"],
            inject: &["--no-textconv"],
            ..PLAIN
        },
        Sub {
            names: &["filter-branch"],
            refuse: Some(Refusal::always(
                "runs shell filters of the caller's choosing",
            )),
            ..PLAIN
        },
        Sub {
            names: &[
                "daemon",
                "instaweb",
                "http-backend",
                "shell",
                "upload-pack",
                "receive-pack",
                "remote-ext",
                "credential",
            ],
            refuse: Some(Refusal::always("starts a server or runs helper programs")),
            ..PLAIN
        },
        // The other built-ins: only the options above concern them.
        Sub {
            names: &[
                "add",
                "am",
                "apply",
                "branch",
                "cat-file",
                "check-attr",
                "check-ignore",
                "check-mailmap",
                "check-ref-format",
                "checkout",
                "cherry",
                "cherry-pick",
                "clean",
                "commit",
                "commit-graph",
                "commit-tree",
                "count-objects",
                "describe",
                "diff-files",
                "diff-index",
                "diff-tree",
                "for-each-ref",
                "fsck",
                "gc",
                "init",
                "ls-files",
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
                "range-diff",
                "read-tree",
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
                "show-branch",
                "show-ref",
                "sparse-checkout",
                "status",
                "stripspace",
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
                "worktree",
                "write-tree",
            ],
            ..PLAIN
        },
    ],
    unknown: Some(Unknown {
        id: "alias",
        why: "is not a built-in subcommand: git would run an alias (which repository config can make a shell command) or an external git-{sub} program",
    }),
};

/// Why `git help` (in any spelling) is refused.
const HELP_WHY: &str = "shows a manual page through the viewer that repository configuration chooses (man.viewer, man.<tool>.cmd, help.format), which the model can write; read the page with `man git-<command>`, or list commands with `git help -a`";

/// Why `git <sub> --help` is refused, after "`git <sub> --help` ".
const HELP_WHY_SUB: &str = "is `git help <sub>`, which shows a manual page through the viewer that repository configuration chooses (man.viewer, man.<tool>.cmd); read the page with `man git-<sub>`, or use `-h` for the usage";

/// `clone --config` and `submodule --config` write configuration into the new repository,
/// where it runs programs like any other.
const CONFIG: OptEscape = OptEscape {
    id: "--config",
    also: &[],
    why: "sets configuration, which can run programs",
};

#[cfg(test)]
mod tests;
