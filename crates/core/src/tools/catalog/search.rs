//! Searching tools: grep (and egrep, fgrep), ripgrep, find.
//!
//! Owns where their patterns end and their paths begin (grep's first operand is a pattern
//! unless `-e`/`-f` gave one), rg's preprocessor options, and find's expression language,
//! whose `-exec` family runs commands and whose `-fprint` family writes files.
//!
//! It must never treat a pattern as harmless because it looks like a path (`grep /etc f`
//! searches for the text), nor a starting point as harmless because it looks like an option:
//! find's paths are everything before its expression begins.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, Parsed, Val};

pub(crate) const SPECS: &[Spec] = &[
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
        names: &["find"],
        operands: Operands::Paths,
        custom: Some(find),
        ..BASE
    },
];

/// find: starting points are paths; the expression has its own escapes.
fn find(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // find's options are not getopt's: the generic reading above does not apply.
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

#[cfg(test)]
mod tests {
    use super::super::testing::{cmd, escapes, paths};

    #[test]
    fn grep_pattern_is_not_a_path_unless_e_or_f_gave_one() {
        assert_eq!(paths("grep /api/v1 f"), ["f"]);
        assert_eq!(paths("grep -e /api -e /etc f"), ["f"]);
        assert_eq!(paths("grep -f /etc/pats f"), ["/etc/pats", "f"]);
        assert_eq!(paths("grep x f --exclude-from=/x"), ["/x", "f"]);
        assert!(escapes("grep -rn x .").is_empty());
    }

    #[test]
    fn rg_preprocessors_are_escapes() {
        assert_eq!(escapes("rg --pre CMD x"), ["--pre"]);
        assert_eq!(escapes("rg x --pre=CMD"), ["--pre"]);
        assert_eq!(escapes("rg --hostname-bin=CMD x"), ["--hostname-bin"]);
        assert_eq!(
            paths("rg --files /home"),
            ["/home"],
            "no pattern with --files"
        );
        assert_eq!(paths("rg x /home"), ["/home"]);
    }

    #[test]
    fn find_exec_family_and_delete_are_escapes() {
        assert_eq!(escapes("find . -exec CMD ;"), ["-exec"]);
        assert_eq!(escapes("find . -name x -execdir CMD {} +"), ["-execdir"]);
        assert_eq!(escapes("find . -ok CMD ;"), ["-ok"]);
        assert_eq!(escapes("find . -okdir CMD ;"), ["-okdir"]);
        assert_eq!(escapes("find . -delete"), ["-delete"]);
    }

    #[test]
    fn find_starting_points_and_file_arguments_are_paths() {
        assert_eq!(paths("find /etc -name passwd"), ["/etc"]);
        assert_eq!(paths("find -L /home -name x"), ["/home"]);
        assert_eq!(paths("find -H -D stat /etc"), ["/etc"]);
        assert_eq!(paths("find -O3 a b -type f"), ["a", "b"]);
        assert_eq!(paths("find . -fprint /tmp/out"), [".", "/tmp/out"]);
        assert_eq!(paths("find . -newer ../f"), [".", "../f"]);
        // `-name` is the start of the expression, so its pattern is not a starting point.
        assert_eq!(paths("find . -name /etc"), ["."]);
        assert!(cmd("find").paths.is_empty());
    }
}
