//! The catalog's shared vocabulary: what a [`Spec`] says about a tool ([`Kind`],
//! [`Layout`], [`Operands`], [`CustomCheck`]), the defaults every spec starts from ([`BASE`]), and the
//! few helpers several families' checks call.
//!
//! Owns these types and helpers only; the family files and the matcher in the catalog's
//! `mod.rs` import them from here. It must never import the catalog's `mod.rs` or any family
//! file (they import it; the only sibling it may name is the leaf `subcommands`, whose table
//! a spec points to), and it must never hold a fact about one tool: those belong in the
//! tool's family spec.

use std::path::Path;

use super::subcommands::Subcommands;
use crate::tools::inspection::Inspection;
use crate::tools::parse::{Grammar, Parsed};

/// What kind of program this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tool whose escapes are listed.
    Tool,
    /// Runs code it is given (a shell, an interpreter, an editor with a command line) or runs
    /// another program (a trampoline): refused unless `allow_interpreter`.
    Interpreter(&'static str),
}

/// How a tool lays out its argv, beyond what its option grammar says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// getopt_long under the grammar ([`parse`](crate::tools::parse::parse)).
    Getopt,
    /// The first argument, when it does not start with `-`, is an old-style key bundle whose
    /// letters take the next words as their values (GNU tar's `tar cf a.tar f`): read by
    /// [`parse_old_style`](crate::tools::parse::parse_old_style).
    OldStyleKeys,
    /// Options, the first operand, then options again up to the next operand (OpenSSH's
    /// `ssh host -o Key=V cmd`): read by
    /// [`parse_around_first_operand`](crate::tools::parse::parse_around_first_operand).
    OptionsAroundFirstOperand,
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
    /// How the argv is laid out around the grammar.
    pub layout: Layout,
    /// Options that are escapes: (canonical name, reason).
    pub escapes: &'static [(&'static str, &'static str)],
    /// Options whose value is a path.
    pub path_opts: &'static [&'static str],
    /// Options whose value is a file listing the names the tool then opens (`tar -T`,
    /// `sort --files0-from`). The list file is a path. The names in it are not arguments the
    /// server sees, so only the kernel's confinement stands behind them; read from standard
    /// input (`-`, or no value at all), the list could come from anywhere, so it is refused.
    pub name_lists: &'static [&'static str],
    /// Options that supply the program/pattern instead of the first operand.
    pub program_opts: &'static [&'static str],
    /// Operand treatment.
    pub operands: Operands,
    /// The first operand names a subcommand with its own options and escapes (git). The
    /// grammar above is then the one of the options before the subcommand, and must not
    /// permute: everything after the subcommand belongs to it.
    pub subcommands: Option<&'static Subcommands>,
    /// Arguments inserted after the program name.
    pub inject_args: &'static [&'static str],
    /// Environment added.
    pub inject_env: &'static [(&'static str, &'static str)],
    /// Checks that need code.
    pub custom: Option<CustomCheck>,
    /// The custom check reads the program's real file (symlinks resolved), which the caller
    /// then resolves and hands in: an `awk` that is gawk gets `--sandbox`. Other specs are
    /// handed the program as found on PATH, and no caller resolves it for them.
    pub reads_program: bool,
    /// Programs the tool itself starts for options the policy allows (tar's compressors for
    /// `-z`, `-j`, `-J`, `--zstd`, `-a`): the exec allowlist grants them to its stages only.
    /// An option that names a program of the caller's choice is an escape, never a start.
    pub starts: &'static [&'static str],
    /// The grammar is precise: values of known, non-path options are never paths. When
    /// false, every option value gets the generic check.
    pub typed_values: bool,
}

const NO_GRAMMAR: Grammar = Grammar {
    short_value: "",
    long: "",
    permute: true,
};

/// The defaults every spec starts from (`..BASE`): a tool with no known options whose
/// operands are paths.
pub(crate) const BASE: Spec = Spec {
    names: &[],
    kind: Kind::Tool,
    grammar: NO_GRAMMAR,
    layout: Layout::Getopt,
    escapes: &[],
    path_opts: &[],
    name_lists: &[],
    program_opts: &[],
    operands: Operands::Paths,
    subcommands: None,
    inject_args: &[],
    inject_env: &[],
    custom: None,
    reads_program: false,
    starts: &[],
    typed_values: true,
};

// ----- helpers several families share -------------------------------------------------------

/// `host:path`, the way rsync, scp and tar name a remote file: a colon before any slash.
pub(crate) fn is_remote(v: &str) -> bool {
    match v.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

/// The first operand: the subcommand of tools whose safe subcommands are listed in code.
pub(crate) fn first_operand(p: &Parsed) -> Option<&str> {
    p.operands().next()
}

#[cfg(test)]
mod tests {
    use super::is_remote;

    #[test]
    fn remote_means_a_colon_before_any_slash() {
        assert!(is_remote("host:a.tar"));
        assert!(is_remote("user@host:/x"));
        assert!(!is_remote("./a:b"));
        assert!(!is_remote(":x"));
        assert!(!is_remote("a.tar"));
    }
}
