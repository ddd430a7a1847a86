//! The catalog: what each allowlisted tool can be made to do, held as data, and the one
//! matcher that reads every tool's argv against it.
//!
//! Owns the lookup by program name and [`inspect_known`]. The shared vocabulary ([`Spec`],
//! [`Kind`], [`Operands`], `BASE` and the helpers several families call) lives in the leaf
//! `spec.rs`, the subcommand tables in [`subcommands`]; the family files import those, never
//! this file. The facts live in one
//! file per tool family, each spec next to the few checks that need code and the unit tests
//! that pin them:
//!
//! - `interpreters.rs`: shells, interpreters, trampolines, editors (refused outright)
//! - `fs.rs`: coreutils-style file tools (cp, mv, ls, cat, tee, chmod, dd, echo, wc, xz, …)
//! - `search.rs`: grep, rg, find
//! - `text.rs`: sort, sed, awk, jq
//! - `archive.rs`: tar, zip, cpio
//! - `net.rs`: rsync, ssh, scp, sftp, curl, wget
//! - `pagers.rs`: less/more/most, man
//! - `sqlite.rs`: sqlite3
//! - `vcs/`: git (its unit tests in `vcs/tests.rs`)
//! - `build.rs`: make, npm, cargo, go, pip
//! - `containers.rs`: docker, podman
//!
//! Sources: the tools' own manuals (GNU coreutils, findutils, tar, sed, gawk, git, OpenSSH,
//! sqlite3), and the escape lists that GTFOBins and Codex's exec policy keep.
//!
//! This file must never hold a fact about one tool: a tool's quirks belong in its family's
//! spec, as data where the matcher can read them. And nothing here may open, stat or run what
//! an argv names; the only file-system look is awk resolving its own binary.

mod archive;
mod build;
mod containers;
mod fs;
mod interpreters;
mod net;
mod pagers;
mod search;
mod spec;
mod sqlite;
mod subcommands;
mod text;
mod vcs;

use std::path::Path;

pub use spec::{Kind, Spec};
use spec::{Layout, Operands};

use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Grammar, parse, parse_around_first_operand, parse_old_style};

/// Every family's specs. Order does not matter; names are unique (a test checks).
static FAMILIES: &[&[Spec]] = &[
    interpreters::SPECS,
    fs::SPECS,
    search::SPECS,
    text::SPECS,
    archive::SPECS,
    net::SPECS,
    pagers::SPECS,
    sqlite::SPECS,
    vcs::SPECS,
    build::SPECS,
    containers::SPECS,
];

/// Every spec of every family.
fn all_specs() -> impl Iterator<Item = &'static Spec> {
    FAMILIES.iter().flat_map(|family| family.iter())
}

/// The spec for `name`, if the catalog knows it.
pub fn lookup(name: &str) -> Option<&'static Spec> {
    all_specs().find(|s| s.names.contains(&name))
}

/// Reads `args` (program excluded) against `spec`: its escapes, the paths to contain, its
/// hardening, then its subcommand table and its custom check, in that order.
pub(crate) fn inspect_known(
    spec: &'static Spec,
    tool: &str,
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
    let parsed = parse_spec(spec, args);
    let mut program_supplied = false;
    for (name, value, ambiguous) in parsed.options() {
        if ambiguous {
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
        if let Some((esc, why)) = spec.escapes.iter().find(|(e, _)| *e == name) {
            insp.escape(esc, *why);
        }
        if spec.program_opts.contains(&name) {
            program_supplied = true;
        }
        // A list of names on stdin could come from any earlier stage (`echo /etc/shadow |`),
        // and no argument check would see them. (An optional value left out means stdin
        // too: `xz --files`.)
        if spec.name_lists.contains(&name) && value.is_none_or(|v| v == "-") {
            insp.escape(
                &format!("{name} -"),
                format!(
                    "`{tool} {name} -` reads the names of the files to open from standard input, which the server cannot check; name the files as arguments, or list them in a file in the jail"
                ),
            );
        }
        if let Some(v) = value {
            if spec.path_opts.contains(&name) || spec.name_lists.contains(&name) {
                insp.paths.push(PathCheck::Path(v.to_owned()));
            } else if !spec.typed_values || !known_option(&spec.grammar, name) {
                insp.paths.push(PathCheck::Generic(v.to_owned()));
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
    if let Some(table) = spec.subcommands {
        subcommands::inspect(table, tool, &parsed, args.len(), &mut insp);
    }
    if let Some(check) = spec.custom {
        check(&parsed, args, program, &mut insp);
    }
    insp
}

/// `args` read under the spec's grammar and layout.
fn parse_spec(spec: &Spec, args: &[String]) -> crate::tools::parse::Parsed {
    match spec.layout {
        Layout::Getopt => parse(&spec.grammar, args),
        Layout::OldStyleKeys => parse_old_style(&spec.grammar, args),
        Layout::OptionsAroundFirstOperand => parse_around_first_operand(&spec.grammar, args),
    }
}

/// The long options `args` (program excluded) mean without spelling them, by the spec's
/// subcommand table (`git push +main` means `--force`).
pub(crate) fn implied_known(spec: &Spec, args: &[String]) -> Vec<&'static str> {
    match spec.subcommands {
        Some(table) => subcommands::implied(table, &parse_spec(spec, args)),
        None => Vec::new(),
    }
}

/// Whether the grammar knows `name` as an option that takes a value.
fn known_option(grammar: &Grammar, name: &str) -> bool {
    match name.strip_prefix("--") {
        Some(long) => grammar.longs().any(|(n, _)| n == long),
        None => name
            .chars()
            .nth(1)
            .is_some_and(|c| grammar.short_value.contains(c)),
    }
}

/// Helpers for the families' unit tests: inspect an argv the way the policy does, without a
/// resolved program.
#[cfg(test)]
mod testing {
    use super::super::{Inspection, PathCheck, inspect};

    /// Inspects `argv` (program first).
    pub(super) fn run(argv: &[&str]) -> Inspection {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        inspect(&argv, None)
    }

    /// Inspects a command split on whitespace (no quoting).
    pub(super) fn cmd(command: &str) -> Inspection {
        run(&command.split_whitespace().collect::<Vec<_>>())
    }

    /// The ids of the escapes `command` contains, in order, each once: a subcommand's
    /// options are read twice (see `subcommands`), so the same escape can be found twice.
    pub(super) fn escapes(command: &str) -> Vec<String> {
        distinct(cmd(command).escapes.into_iter().map(|e| e.id))
    }

    /// The arguments `command` must contain as paths (`Path`), in order, each once.
    pub(super) fn paths(command: &str) -> Vec<String> {
        distinct(cmd(command).paths.into_iter().filter_map(|c| match c {
            PathCheck::Path(p) => Some(p),
            PathCheck::Generic(_) => None,
        }))
    }

    /// The arguments `command` gives the generic check, in order, each once.
    pub(super) fn generic(command: &str) -> Vec<String> {
        distinct(cmd(command).paths.into_iter().filter_map(|c| match c {
            PathCheck::Generic(p) => Some(p),
            PathCheck::Path(_) => None,
        }))
    }

    /// Checks every case of a family's `cases/*.txt` (see its header): each line
    /// `escapes|paths|generic|inject <command> => <expected, " | " between>` (or `reason
    /// <command> => <a phrase of its first escape's reason>`), under a `##` heading
    /// that says what the group proves. Every mismatch is listed, with its line and group.
    pub(super) fn check_cases(file: &str, text: &str) {
        let mut group = "";
        let (mut checked, mut wrong) = (0, Vec::new());
        for (n, line) in text.lines().enumerate() {
            if let Some(heading) = line.strip_prefix("## ") {
                group = heading;
                continue;
            }
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
            let (command, want) = rest
                .split_once(" =>")
                .unwrap_or_else(|| panic!("{file}:{}: no ` =>` in {line:?}", n + 1));
            let want: Vec<&str> = match want.trim() {
                "" => Vec::new(),
                w => w.split(" | ").collect(),
            };
            let got = match kind {
                "escapes" => escapes(command),
                "paths" => paths(command),
                "generic" => generic(command),
                "inject" => cmd(command).inject_args,
                // The first escape's reason says `want` (one phrase of it).
                "reason" => cmd(command)
                    .escapes
                    .first()
                    .filter(|e| want.len() == 1 && e.reason.contains(want[0]))
                    .map_or_else(Vec::new, |_| vec![want[0].to_owned()]),
                _ => panic!("{file}:{}: unknown check {kind:?}", n + 1),
            };
            checked += 1;
            if got != want {
                wrong.push(format!(
                    "{file}:{} ({group}): {kind} of `{}` are {got:?}, not {want:?}",
                    n + 1,
                    command.trim()
                ));
            }
        }
        assert!(checked > 0, "{file} holds no case");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    fn distinct(items: impl Iterator<Item = String>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for item in items {
            if !out.contains(&item) {
                out.push(item);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testing::cmd;
    use super::*;

    /// Every case in `cases/common.txt`.
    #[test]
    fn cases() {
        super::testing::check_cases("common.txt", include_str!("cases/common.txt"));
    }

    /// A long option string misspelt (`name:` for `name=`, a stray `?`) would quietly make
    /// an option a flag and misalign every word after it.
    #[test]
    fn every_long_option_is_a_plain_name_once() {
        for spec in all_specs() {
            let mut seen = std::collections::BTreeSet::new();
            for (name, _) in spec.grammar.longs() {
                assert!(
                    !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                    "{:?}: long option {name:?}",
                    spec.names
                );
                assert!(seen.insert(name), "{:?}: --{name} twice", spec.names);
            }
        }
    }

    #[test]
    fn every_name_belongs_to_one_spec() {
        let mut seen = std::collections::BTreeSet::new();
        for spec in all_specs() {
            for name in spec.names {
                assert!(seen.insert(*name), "`{name}` is in two specs");
            }
        }
        assert!(seen.len() > 150, "{} names", seen.len());
    }

    #[test]
    fn a_subcommand_table_comes_after_a_non_permuting_grammar() {
        for spec in all_specs().filter(|s| s.subcommands.is_some()) {
            assert!(!spec.grammar.permute, "{:?}", spec.names);
        }
    }

    #[test]
    fn an_unknown_tool_gets_the_generic_check_of_every_argument() {
        assert!(lookup("frobnicate").is_none());
        let insp = cmd("frobnicate -x /etc a");
        assert!(insp.escapes.is_empty() && insp.interpreter.is_none());
    }

    #[test]
    fn an_ambiguous_abbreviation_of_an_escape_is_refused() {
        // rg knows `--pre` and `--pre-glob`: `--pr` could mean either.
        let insp = cmd("rg --pr CMD x");
        assert_eq!(insp.escapes[0].id, "--pre");
        assert!(insp.escapes[0].reason.contains("ambiguous abbreviation"));
    }

    #[test]
    fn hardening_comes_from_the_spec() {
        let insp = cmd("sed -n 1p f");
        assert_eq!(insp.inject_args, ["--sandbox"]);
        let insp = cmd("tar tf a.tar");
        assert_eq!(
            insp.inject_env,
            [(
                "TAR_OPTIONS".to_owned(),
                "--no-same-owner --no-same-permissions --verbatim-files-from".to_owned()
            )]
        );
    }
}
