//! Pagers and the manual: less (and more, most), man.
//!
//! Owns the options that write log files, load key bindings, or choose the pager, browser,
//! preprocessors or config that man runs; less's `+cmd` startup commands; and the
//! environment that turns off less's shell escapes and input preprocessors and makes man
//! print instead of paging.
//!
//! It must never leave an interactive pager able to run a command: a pager started here has
//! LESSSECURE set, and man is told to use `cat`.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, Parsed, Val};

pub(crate) const SPECS: &[Spec] = &[
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
];

/// less: an operand starting with `+` is a command run at startup, not a file.
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

#[cfg(test)]
mod tests {
    use super::super::testing::{cmd, escapes, paths};

    #[test]
    fn less_log_files_key_bindings_and_startup_commands() {
        assert_eq!(escapes("less -o /tmp/log f"), ["-o"]);
        assert_eq!(escapes("less --log-file=/tmp/log f"), ["--log-file"]);
        assert_eq!(escapes("less --lesskey-src=k f"), ["--lesskey-src"]);
        assert_eq!(escapes("less +!CMD f"), ["+cmd"]);
        assert_eq!(escapes("more +/pattern f"), ["+cmd"]);
        assert!(escapes("less -N f").is_empty());
        assert_eq!(paths("less +G f"), ["f"], "`+cmd` is not a file");
    }

    #[test]
    fn less_is_started_secure() {
        let env = cmd("less f").inject_env;
        assert!(env.contains(&("LESSSECURE".to_owned(), "1".to_owned())));
        assert!(env.contains(&("LESSOPEN".to_owned(), String::new())));
    }

    #[test]
    fn man_pagers_browsers_config_and_preprocessors() {
        assert_eq!(escapes("man -P CMD ls"), ["-P"]);
        assert_eq!(escapes("man --pager=CMD ls"), ["--pager"]);
        assert_eq!(escapes("man --html=CMD ls"), ["--html"]);
        assert_eq!(escapes("man -C cfg ls"), ["-C"]);
        assert_eq!(escapes("man -p t ls"), ["-p"]);
        assert!(escapes("man ls").is_empty());
        assert!(
            cmd("man /etc/passwd").paths.is_empty(),
            "page names, not files"
        );
        assert!(
            cmd("man ls")
                .inject_env
                .contains(&("MANPAGER".to_owned(), "cat".to_owned()))
        );
    }
}
