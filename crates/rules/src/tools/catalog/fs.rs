//! Plain file tools in the coreutils mould: printing (echo, printf, …), copying and linking
//! (cp, mv, ln, install), reading and listing (cat, ls, stat, diff, …), and the few with an
//! argument shape of their own (tee, chmod/chown/chgrp, dd), or a list of names to open (wc,
//! du, xz, the checksum tools' `--check`).
//!
//! Owns which of their arguments are paths. Nothing in their options runs a program, loads
//! code or config, or writes anywhere but the paths they are given, so the jail check on
//! those paths is nearly their whole policy. The exceptions are the names they read from a
//! list (`wc --files0-from`, `sha256sum -c`): a list file is a path whose names only the
//! kernel contains, and a list on standard input is refused; and `cp -rL`, which copies what
//! the links inside a tree point to, wherever that is.
//!
//! It must never mark an argument "not a path" unless the tool's own grammar says so
//! (chmod's MODE, dd's `bs=`): when unsure, an argument gets at least the generic check.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    // Their operands are words to print or compute with, never files they open.
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
        names: &["cp"],
        grammar: Grammar {
            short_value: "tS",
            long: "target-directory= suffix= backup=? dereference no-dereference recursive \
                   archive",
            permute: true,
        },
        path_opts: &["-t", "--target-directory"],
        custom: Some(cp),
        ..BASE
    },
    Spec {
        names: &["mv", "ln", "install"],
        grammar: Grammar {
            short_value: "tSm",
            long: "target-directory= suffix= backup=?",
            permute: true,
        },
        path_opts: &["-t", "--target-directory"],
        ..BASE
    },
    // Plain file tools: nothing in their options runs a program, loads code or writes
    // anywhere but the paths they are given, which get the generic check.
    Spec {
        names: &[
            "cat", "head", "tail", "ls", "stat", "file", "df", "tac", "nl", "od", "hexdump", "xxd",
            "strings", "cmp", "diff", "comm", "cut", "paste", "join", "tr", "fold", "fmt",
            "column", "uniq", "rev", "mkdir", "rmdir", "touch", "rm", "realpath", "readlink",
            "tree", "base64", "gzip", "gunzip", "zcat", "bzip2",
        ],
        operands: Operands::Generic,
        typed_values: false,
        ..BASE
    },
    // Tools that can read the names of the files to open from a list. Their values stay
    // untyped, as above: every option value gets the generic check.
    Spec {
        names: &["wc", "du"],
        grammar: Grammar {
            short_value: "",
            long: "files0-from=",
            permute: true,
        },
        name_lists: &["--files0-from"],
        operands: Operands::Generic,
        typed_values: false,
        ..BASE
    },
    Spec {
        names: &["xz"],
        grammar: Grammar {
            short_value: "SFCTM",
            long: "files=? files0=?",
            permute: true,
        },
        // `xz --files` with no value reads the names from standard input.
        name_lists: &["--files", "--files0"],
        operands: Operands::Generic,
        typed_values: false,
        ..BASE
    },
    Spec {
        names: &[
            "md5sum",
            "sha1sum",
            "sha224sum",
            "sha256sum",
            "sha384sum",
            "sha512sum",
            "b2sum",
            "cksum",
        ],
        grammar: Grammar {
            // b2sum's and cksum's `-l LENGTH`, cksum's `-a ALGORITHM`.
            short_value: "al",
            long: "check",
            permute: true,
        },
        operands: Operands::Generic,
        custom: Some(checksums),
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
];

/// chmod, chown, chgrp: the first operand is a mode or an owner.
fn first_operand_not_path(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // chmod MODE FILE…, chown OWNER FILE…: the first operand is not a path.
    if let Some(first) = p.operands().next() {
        insp.paths
            .retain(|c| !matches!(c, PathCheck::Path(v) if v == first));
    }
}

/// cp: with `-r` (or `-a`), `-L` and `-H` make cp copy what the symbolic links inside the tree
/// (or given) point to. The operands are checked through their own links, but not the links
/// inside a directory, which can point anywhere: the default copies them as links.
fn cp(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    let recursive = ["-r", "-R", "--recursive", "-a", "--archive"]
        .iter()
        .any(|o| p.has(o));
    if !recursive {
        return;
    }
    for opt in ["-L", "--dereference", "-H"] {
        if p.has(opt) {
            insp.escape(
                opt,
                format!(
                    "`cp -r {opt}` copies what symbolic links point to, which can be outside the jail; copy the links as links (`cp -r` without {opt}, or `-P`)"
                ),
            );
        }
    }
}

/// The checksum tools' `--check` opens every file its checksum lists name; with no list
/// operand (or `-`) the list is read from standard input, where the server cannot see it.
fn checksums(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    let Some(opt) = ["-c", "--check"].into_iter().find(|o| p.has(o)) else {
        return;
    };
    if p.operands().next().is_none() || p.operands().any(|o| o == "-") {
        insp.escape(
            &format!("{opt} -"),
            format!(
                "`{opt}` with the checksum list on standard input opens the files it names, which the server cannot check; give the list as a file in the jail"
            ),
        );
    }
}

/// dd takes `key=value` operands; only `if=` and `of=` name files.
fn dd(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in args {
        if let Some(v) = a.strip_prefix("if=").or_else(|| a.strip_prefix("of=")) {
            insp.paths.push(PathCheck::Path(v.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::cmd;

    /// Every case in `cases/fs.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("fs.txt", include_str!("cases/fs.txt"));
    }

    #[test]
    fn printing_tools_open_nothing() {
        assert!(cmd("echo /etc/passwd").paths.is_empty());
        assert!(cmd("printf %s ../x").paths.is_empty());
    }
}
