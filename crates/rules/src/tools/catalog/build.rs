//! Build tools and package managers: make, npm (pnpm, yarn), cargo, go, pip.
//!
//! Owns which of their subcommands only read (`cargo tree`, `npm ls`, `go version`, `pip
//! list`) and which build, install or run code from the workspace: build scripts,
//! procedural macros, lifecycle scripts, setup.py, generators, recipes. make runs the
//! recipes of a Makefile the model can write, so it counts as an interpreter.
//!
//! It must never allow a subcommand by default: the read-only ones are listed, and anything
//! else (including a subcommand a newer version adds) is refused.

use std::path::Path;

use super::spec::{BASE, Kind, Operands, Spec, first_operand};
use crate::tools::inspection::Inspection;
use crate::tools::parse::{Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["make", "gmake"],
        kind: Kind::Interpreter("make runs the recipes of a Makefile, which the model can write"),
        grammar: Grammar {
            short_value: "CfIjlEoW",
            long: "eval= file= makefile= directory= include-dir= jobs=? load-average=? old-file= \
                   what-if= new-file=",
            permute: true,
        },
        escapes: &[
            (
                "--eval",
                "`make --eval` evaluates makefile text, where `$(shell …)` runs commands",
            ),
            (
                "-E",
                "`make -E` evaluates makefile text, where `$(shell …)` runs commands",
            ),
        ],
        path_opts: &[
            "-f",
            "--file",
            "--makefile",
            "-C",
            "--directory",
            "-I",
            "--include-dir",
        ],
        operands: Operands::NotPaths,
        ..BASE
    },
    Spec {
        names: &["npm", "pnpm", "yarn"],
        grammar: Grammar {
            short_value: "",
            long: "prefix= userconfig= globalconfig= cache= script-shell=",
            permute: false,
        },
        escapes: &[(
            "--script-shell",
            "`npm --script-shell` chooses the shell that runs scripts",
        )],
        operands: Operands::NotPaths,
        custom: Some(npm),
        ..BASE
    },
    Spec {
        names: &["cargo"],
        grammar: Grammar {
            short_value: "CZ",
            long: "config= manifest-path= target-dir= color=",
            // cargo reads its global options after the subcommand too: `cargo build
            // --config …` sets a runner as surely as `cargo --config … build`.
            permute: true,
        },
        escapes: &[
            (
                "--config",
                "`cargo --config` can set target runners, linkers and aliases (programs)",
            ),
            ("-Z", "`cargo -Z` enables unstable behaviour"),
        ],
        path_opts: &["--manifest-path", "--target-dir", "-C"],
        operands: Operands::NotPaths,
        custom: Some(cargo),
        ..BASE
    },
    Spec {
        names: &["go"],
        operands: Operands::NotPaths,
        inject_env: &[("GOTOOLCHAIN", "local"), ("GOFLAGS", "")],
        custom: Some(go),
        ..BASE
    },
    Spec {
        names: &["pip", "pip3"],
        grammar: Grammar {
            short_value: "r",
            long: "requirement= config-file=",
            permute: false,
        },
        operands: Operands::NotPaths,
        custom: Some(pip),
        ..BASE
    },
];

/// npm: the read-only subcommands; every other one can run lifecycle scripts from
/// package.json, and `audit fix`, `config set` and `pkg set` write.
fn npm(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "ls", "list", "ll", "la", "view", "info", "show", "outdated", "help", "search", "version",
        "config", "root", "prefix", "bin", "ping", "doctor", "explain", "why", "fund", "audit",
        "query", "pkg",
    ];
    match first_operand(p) {
        None => {}
        Some(sub) if SAFE.contains(&sub) && !(sub == "audit" && p.operands().nth(1) == Some("fix")) && !(sub == "config" && p.operands().nth(1) == Some("set")) && !(sub == "pkg" && p.operands().nth(1) == Some("set")) => {}
        Some(sub) => insp.escape(sub, format!("`npm {sub}` runs package scripts or installs code that runs (lifecycle scripts from package.json)")),
    }
}

/// cargo: the subcommands that neither compile (build scripts and proc macros run then)
/// nor install.
fn cargo(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "tree",
        "metadata",
        "pkgid",
        "locate-project",
        "read-manifest",
        "verify-project",
        "version",
        "help",
        "search",
        "info",
        "fmt",
    ];
    if let Some(sub) = first_operand(p)
        && !SAFE.contains(&sub)
    {
        insp.escape(sub, format!("`cargo {sub}` compiles and runs build scripts and procedural macros (code from the workspace), or installs code"));
    }
}

/// go: the read-only subcommands, and the writes hidden in two of them (`env -w`,
/// `vet -vettool`). go's flags are single-dash long options, so the raw args are read.
fn go(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &["version", "env", "list", "doc", "help", "fmt", "vet"];
    if let Some(sub) = args.iter().find(|a| !a.starts_with('-')) {
        if !SAFE.contains(&sub.as_str()) {
            insp.escape(sub, format!("`go {sub}` compiles and runs code, runs generators, or downloads toolchains and modules"));
        }
        if sub == "env" && args.iter().any(|a| a == "-w" || a == "-u") {
            insp.escape(
                "env -w",
                "`go env -w` writes configuration (GOFLAGS, toolchains) that later runs code",
            );
        }
        if sub == "vet" && args.iter().any(|a| a.starts_with("-vettool")) {
            insp.escape(
                "-vettool",
                "`go vet -vettool` runs a program of the caller's choosing",
            );
        }
    }
}

/// pip: the subcommands that neither build nor install packages (a build runs setup.py or
/// a build backend).
fn pip(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "list", "show", "freeze", "check", "help", "search", "inspect", "index", "hash", "cache",
        "debug",
    ];
    if let Some(sub) = first_operand(p)
        && !SAFE.contains(&sub)
    {
        insp.escape(sub, format!("`pip {sub}` can run a package's build code (setup.py, build backends) or change the environment"));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::cmd;

    /// Every case in `cases/build.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("build.txt", include_str!("cases/build.txt"));
    }

    #[test]
    fn make_is_an_interpreter_with_eval_escapes() {
        let insp = cmd("make all");
        assert!(insp.interpreter.is_some_and(|w| w.contains("Makefile")));
    }

    #[test]
    fn go_reads_and_the_writes_that_hide_in_them() {
        assert!(
            cmd("go version")
                .inject_env
                .contains(&("GOTOOLCHAIN".to_owned(), "local".to_owned()))
        );
    }
}
