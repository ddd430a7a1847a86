//! Built-in knowledge of the tools operators allowlist: which options run code, load
//! plugins or config, or write to arbitrary paths; which arguments are paths; and what
//! hardening to inject.
//!
//! Owns one question per simple command: "can this argv turn an allowlisted tool into a
//! shell?". Every tool's argv goes through one normaliser ([`parse`]): bundled short flags,
//! attached values (`-Icmd`, `-oKey=V`), `--opt=value` and `--opt value`, unique long-option
//! prefixes, options after operands (GNU permutation), `--`, and old-style key bundles
//! (`tar cf a.tar f`). Escapes are refused with a reason that names them unless the operator
//! opts that exact escape in (`allow_escapes`); interpreters and trampolines are refused
//! unless `allow_interpreter`. The facts, tool by tool, are in the catalog.
//!
//! It must never pass what it cannot read: a tool this module does not know keeps the
//! generic, fail-closed path checks on every argument.

mod catalog;
mod inspection;
pub mod parse;

pub use catalog::{Kind, Spec, lookup};
pub use inspection::{Escape, Inspection, PathCheck};
pub use parse::{Arg, Parsed};

/// Whether `name`'s checks read the program's real file, which the caller must then hand to
/// [`inspect`] resolved ([`Spec::reads_program`]).
pub fn reads_program(name: &str) -> bool {
    lookup(name).is_some_and(|spec| spec.reads_program)
}

/// Long options an argv means without spelling them, so that operator rules written with
/// the option also catch the other spellings: `git push origin +main` and `git push
/// --force-with-lease` force like `--force`. The facts are the catalog's (a subcommand table
/// says which of its options and operands imply which option).
pub fn implied_options(argv: &[String]) -> Vec<&'static str> {
    let name = argv.first().map(String::as_str).unwrap_or("");
    let args = argv.get(1..).unwrap_or(&[]);
    match lookup(name) {
        Some(spec) => catalog::implied_known(spec, args),
        None => Vec::new(),
    }
}

/// Inspects `argv` (program first). `program` is the resolved binary, when known: its real
/// file (symlinks resolved by the caller, as this reads no file) where [`reads_program`]
/// says the checks depend on the implementation (awk).
pub fn inspect(argv: &[String], program: Option<&std::path::Path>) -> Inspection {
    let name = argv.first().map(String::as_str).unwrap_or("");
    let args = argv.get(1..).unwrap_or(&[]);
    match lookup(name) {
        Some(spec) => catalog::inspect_known(spec, name, args, program),
        None => Inspection {
            paths: args.iter().map(|a| PathCheck::Generic(a.clone())).collect(),
            ..Inspection::default()
        },
    }
}
