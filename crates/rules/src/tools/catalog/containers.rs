//! Container clients: docker and podman.
//!
//! Owns which of their subcommands only read through the daemon (`ps`, `images`, `inspect`,
//! `logs`, …) and the global options that pick another daemon or client config. The daemon
//! is root-equivalent (`docker run -v /:/h` is the host's root), so everything else is
//! refused.
//!
//! It must never allow a subcommand that creates, changes or enters a container or image,
//! nor one it does not know.

use std::path::Path;

use super::spec::{BASE, Operands, Spec, first_operand};
use crate::tools::inspection::Inspection;
use crate::tools::parse::{Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[Spec {
    names: &["docker", "podman"],
    grammar: Grammar {
        short_value: "Hc",
        long: "host= context= config=",
        permute: false,
    },
    escapes: &[
        (
            "-H",
            "`docker -H` talks to a daemon of the caller's choosing",
        ),
        (
            "--host",
            "`docker --host` talks to a daemon of the caller's choosing",
        ),
        ("-c", "`docker -c` chooses another daemon context"),
        (
            "--context",
            "`docker --context` chooses another daemon context",
        ),
        (
            "--config",
            "`docker --config` loads a client config (credential helpers are programs)",
        ),
    ],
    operands: Operands::NotPaths,
    custom: Some(docker),
    ..BASE
}];

/// docker/podman: the subcommands that only read; `image` only with a read-only second
/// word.
fn docker(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const SAFE: &[&str] = &[
        "ps", "images", "image", "version", "info", "inspect", "logs", "stats", "top", "history",
        "search", "help", "events", "port", "diff",
    ];
    if let Some(sub) = first_operand(p) {
        let second = p.operands().nth(1).unwrap_or("");
        let safe = SAFE.contains(&sub)
            && (sub != "image" || matches!(second, "ls" | "list" | "inspect" | "history"));
        if !safe {
            insp.escape(sub, format!("`docker {sub}` changes containers or images through the daemon, which is root-equivalent"));
        }
    }
}

#[cfg(test)]
mod tests {

    /// Every case in `cases/containers.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("containers.txt", include_str!("cases/containers.txt"));
    }
}
