//! Plain file tools in the coreutils mould: printing (echo, printf, …), copying and linking
//! (cp, mv, ln, install), reading and listing (cat, ls, stat, diff, …), and the few with an
//! argument shape of their own (tee, chmod/chown/chgrp, dd).
//!
//! Owns which of their arguments are paths. Nothing in their options runs a program, loads
//! code or config, or writes anywhere but the paths they are given, so they have no escapes;
//! the jail check on those paths is their whole policy.
//!
//! It must never mark an argument "not a path" unless the tool's own grammar says so
//! (chmod's MODE, dd's `bs=`): when unsure, an argument gets at least the generic check.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, Parsed, Val};

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
];

/// chmod, chown, chgrp: the first operand is a mode or an owner.
fn first_operand_not_path(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // chmod MODE FILE…, chown OWNER FILE…: the first operand is not a path.
    if let Some(first) = p.operands().next() {
        insp.paths
            .retain(|c| !matches!(c, PathCheck::Path(v) if v == first));
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
    use super::super::testing::{cmd, escapes, generic, paths};

    #[test]
    fn printing_tools_open_nothing() {
        assert!(cmd("echo /etc/passwd").paths.is_empty());
        assert!(cmd("printf %s ../x").paths.is_empty());
    }

    #[test]
    fn copy_tools_check_every_operand_and_the_target_directory() {
        assert_eq!(paths("cp f /tmp/x"), ["f", "/tmp/x"]);
        assert_eq!(paths("cp -t /tmp f"), ["/tmp", "f"]);
        assert_eq!(paths("mv --target-dir=/tmp f"), ["/tmp", "f"]);
        assert_eq!(paths("ln -s f ../x"), ["f", "../x"]);
        assert_eq!(
            paths("install -m 755 f g"),
            ["f", "g"],
            "the mode is a value"
        );
    }

    #[test]
    fn file_tools_get_the_generic_check_and_no_escapes() {
        assert_eq!(generic("cat /etc/passwd"), ["/etc/passwd"]);
        assert_eq!(generic("ls -la ../x"), ["../x"]);
        assert!(escapes("rm -rf x").is_empty());
        assert_eq!(paths("tee /tmp/x"), ["/tmp/x"]);
    }

    #[test]
    fn chmod_mode_is_not_a_path() {
        assert_eq!(paths("chmod 644 f"), ["f"]);
        assert_eq!(paths("chown user:group f /etc/x"), ["f", "/etc/x"]);
    }

    #[test]
    fn dd_files_are_if_and_of() {
        assert_eq!(paths("dd if=/dev/sda of=x bs=1"), ["/dev/sda", "x"]);
        assert!(generic("dd if=f of=g count=1").is_empty());
    }
}
