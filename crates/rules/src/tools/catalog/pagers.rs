//! Pagers and the manual: less (and more, most), man.
//!
//! Owns the options that write log files, load key bindings, or choose the pager, browser,
//! preprocessors or config that man runs; less's `+cmd` startup commands; which of man's
//! operands are files (`man ./x.1`, `man -l x.1`) rather than page names; and the hardening
//! that turns off less's shell escapes and input preprocessors, makes man print instead of
//! paging, and keeps man-db from reading a user config (`~/.manpath`), whose `DEFINE` lines
//! name the programs man runs (`DEFINE nroff CMD`, reproduced).
//!
//! A page man formats can include other files (`.so /etc/x`); those reads are contained by
//! the kernel only.
//!
//! It must never leave an interactive pager able to run a command: a pager started here has
//! LESSSECURE set, and man is told to use `cat`.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["less", "more", "most"],
        grammar: Grammar {
            short_value: "bhjkopPtTxyz#",
            long: "log-file= LOG-FILE= tag= tag-file= lesskey-file= lesskey-src=",
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
            // man-db 2.x: the short options that take a value (`-H`, `-T`, `-X` take one only
            // attached, like their long forms).
            short_value: "CRLmMSsePprE",
            long: "config-file= debug default warnings=? whatis apropos global-apropos \
                   local-file where path location where-cat location-cat catman recode= locale= \
                   systems= manpath= sections= extension= ignore-case match-case regex wildcard \
                   names-only all update no-subpages pager= prompt= ascii encoding= \
                   no-hyphenation nh no-justification nj preprocessor= troff troff-device=? \
                   html=? gxditview=? ditroff help usage version",
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
        // A directory of pages the caller planted would be formatted like any other.
        path_opts: &["-M", "--manpath"],
        // Page names and sections; the custom check types the operands that are files.
        operands: Operands::NotPaths,
        // man-db's `-C` names the user config file, read instead of ~/.manpath: an empty one
        // means no user `DEFINE` can name the formatter or pager. `-D` does not undo it.
        inject_args: &["-C", "/dev/null"],
        inject_env: &[("MANPAGER", "cat"), ("PAGER", "cat")],
        custom: Some(man),
        ..BASE
    },
];

/// man: with `-l`/`--local-file` every operand is a file; without it, man-db reads an operand
/// with a `/` in it as a file too (`man ./x.1`). Page names and sections are not paths.
fn man(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    let local = p.has("-l") || p.has("--local-file");
    for o in p.operands() {
        if local || o.contains('/') {
            insp.paths.push(PathCheck::Path(o.to_owned()));
        }
    }
}

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

    /// Every case in `cases/pagers.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("pagers.txt", include_str!("cases/pagers.txt"));
    }

    #[test]
    fn less_is_started_secure() {
        let env = cmd("less f").inject_env;
        assert!(env.contains(&("LESSSECURE".to_owned(), "1".to_owned())));
        assert!(env.contains(&("LESSOPEN".to_owned(), String::new())));
    }

    #[test]
    fn man_pagers_browsers_config_and_preprocessors() {
        assert!(cmd("man 1 ls").paths.is_empty(), "page names, not files");
        assert!(
            cmd("man ls")
                .inject_env
                .contains(&("MANPAGER".to_owned(), "cat".to_owned()))
        );
    }

    #[test]
    fn man_pages_given_as_files_are_paths() {
        // `-I` is a flag (match case): the page after it is a name, not its value.
        assert!(paths("man -I ls").is_empty() && escapes("man -I ls").is_empty());
    }
}
