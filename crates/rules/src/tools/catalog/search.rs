//! Searching tools: grep (and egrep, fgrep), ripgrep, find.
//!
//! Owns where their patterns end and their paths begin (grep's first operand is a pattern
//! unless `-e`/`-f` gave one), rg's preprocessor options, find's expression language, whose
//! `-exec` family runs commands and whose `-fprint` family writes files, and the options that
//! follow symbolic links while walking a tree (`grep -R`, `rg -L`, `find -L`): the starting
//! points are checked through their links, but a link met inside the tree can point
//! anywhere, so these are refused with the form that does not follow them.
//!
//! It must never treat a pattern as harmless because it looks like a path (`grep /etc f`
//! searches for the text), nor a starting point as harmless because it looks like an option:
//! find's paths are everything before its expression begins.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["grep", "egrep", "fgrep"],
        grammar: Grammar {
            short_value: "efmABCdD",
            long: "regexp= file= max-count= after-context= before-context= context= include= \
                   exclude= exclude-from= exclude-dir= label= color=? colour=? devices= \
                   directories= binary-files= recursive dereference-recursive",
            permute: true,
        },
        escapes: &[
            (
                "-R",
                "`grep -R` follows every symbolic link in the tree, which can point outside the jail; use `grep -r`, which does not",
            ),
            (
                "--dereference-recursive",
                "`grep --dereference-recursive` follows every symbolic link in the tree, which can point outside the jail; use `grep -r`, which does not",
            ),
        ],
        path_opts: &["-f", "--file", "--exclude-from"],
        program_opts: &["-e", "--regexp", "-f", "--file"],
        operands: Operands::AfterProgram,
        ..BASE
    },
    Spec {
        names: &["rg"],
        grammar: Grammar {
            short_value: "efgtTmABCjEMr",
            long: "pre= pre-glob= regexp= file= glob= iglob= type= type-not= type-add= \
                   ignore-file= max-count= replace= threads= encoding= max-depth= \
                   path-separator= hostname-bin= files follow",
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
            (
                "-L",
                "`rg -L` follows symbolic links, which can point outside the jail; rg does not follow them by default",
            ),
            (
                "--follow",
                "`rg --follow` follows symbolic links, which can point outside the jail; rg does not follow them by default",
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

/// Why `find -L` and `-follow` are refused.
const FIND_FOLLOWS: &str = "`find -L` (and `-follow`) follows symbolic links into whatever they point to, outside the jail included; find does not follow them by default (`-P`)";

/// find: starting points are paths; the expression has its own escapes.
fn find(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // find's options are not getopt's: the generic reading above does not apply.
    insp.paths.clear();
    let mut in_expression = false;
    // Leading options (`-H`, `-L`, `-P`, `-D debugopts`, `-O3`) come before the starting points.
    let mut start = 0;
    while let Some(a) = args.get(start) {
        match a.as_str() {
            "-L" => {
                insp.escape("-L", FIND_FOLLOWS);
                start += 1;
            }
            "-H" | "-P" => start += 1,
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
            "-follow" => insp.escape(a, FIND_FOLLOWS),
            // find 4.9: the starting points are read from a file, or from stdin with `-`.
            "-files0-from" => match iter.next() {
                Some(v) if v != "-" => insp.paths.push(PathCheck::Path(v.clone())),
                _ => insp.escape(
                    "-files0-from -",
                    "`find -files0-from -` reads the starting points from standard input, which the server cannot check; name them as arguments",
                ),
            },
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                if let Some(v) = iter.next() {
                    insp.paths.push(PathCheck::Path(v.clone()));
                }
            }
            "-newer" | "-anewer" | "-cnewer" | "-samefile" => {
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
    use super::super::testing::cmd;

    /// Every case in `cases/search.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("search.txt", include_str!("cases/search.txt"));
    }

    #[test]
    fn find_starting_points_and_file_arguments_are_paths() {
        // `-name` is the start of the expression, so its pattern is not a starting point.
        assert!(cmd("find").paths.is_empty());
    }
}
