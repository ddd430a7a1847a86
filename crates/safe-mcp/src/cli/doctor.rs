//! `safe-mcp doctor`: what this kernel and this user can enforce, and (with a policy) the
//! confinement it would get.

use std::path::Path;
use std::process::ExitCode;

use safe_mcp_core::config::Section;
use safe_mcp_core::terminal::confinement_spec;
use safe_mcp_exec::planned_report;

use super::load;
use crate::exit::{fatal, say};

/// doctor's first line: what a server run by this user would enforce here, in one line.
pub(crate) fn verdict(kernel: &safe_mcp_contract::KernelReport) -> String {
    let mut parts = Vec::new();
    if kernel.landlock_abi > 0 {
        parts.push(format!("Landlock {}", kernel.landlock_abi));
    }
    if kernel.seccomp_filter {
        parts.push("seccomp".to_owned());
    }
    parts.push(
        if kernel.private_view {
            "private view"
        } else {
            "host view only"
        }
        .to_owned(),
    );
    let tier = kernel
        .egress_tier
        .split_whitespace()
        .next()
        .unwrap_or("unavailable");
    parts.push(format!("egress {tier} tier"));
    let level = match (
        kernel.landlock_abi,
        kernel.seccomp_filter,
        kernel.private_view,
    ) {
        (abi, true, true) if abi >= 6 => "full",
        (0, _, _) | (_, false, _) => "none: under mode = \"enforce\" no command runs",
        _ => "partial",
    };
    format!("enforce: {level} ({})", parts.join(", "))
}

pub(crate) fn doctor(config: Option<&Path>, json: bool) -> ExitCode {
    let kernel = safe_mcp_exec::kernel_report();
    let line = verdict(&kernel);
    let mut report = serde_json::json!({ "verdict": line, "kernel": kernel });
    if config.is_some() {
        let policy = match load(config, Section::Terminal) {
            Ok(p) => p,
            Err(e) => return fatal(e),
        };
        if let Some(t) = &policy.terminal {
            report["policy_confinement"] =
                serde_json::to_value(planned_report(&confinement_spec(t))).unwrap_or_default();
        }
        // Each gateway server's own confinement: its narrowed policy's.
        for server in &policy.gateway {
            if let Some(t) = &server.policy.terminal {
                report["gateway_confinement"][&server.name] =
                    serde_json::to_value(planned_report(&confinement_spec(t))).unwrap_or_default();
            }
        }
    }
    if !json {
        say!("{line}");
        let k = &report["kernel"];
        for (what, key) in [
            ("Landlock", "landlock"),
            ("commands keep", "command_capabilities"),
            ("egress", "egress_tier"),
            ("x32 syscalls", "x32_abi"),
        ] {
            say!("  {what}: {}", k[key].as_str().unwrap_or_default());
        }
        say!("  euid: {}", k["euid"]);
        if let Some(view) = report["policy_confinement"]["view"].as_object() {
            say!(
                "  the policy: view {} ({})",
                view.get("view")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default(),
                view.get("setting")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
            );
        }
        if let Some(servers) = report["gateway_confinement"].as_object() {
            for (name, planned) in servers {
                let view = &planned["view"];
                say!(
                    "  gateway server {name}: view {} ({})",
                    view["view"].as_str().unwrap_or_default(),
                    view["setting"].as_str().unwrap_or_default()
                );
            }
        }
        say!("(safe-mcp doctor --json for the whole report)");
        return ExitCode::SUCCESS;
    }
    match serde_json::to_string_pretty(&report) {
        Ok(text) => say!("{text}"),
        Err(e) => return fatal(e),
    }
    ExitCode::SUCCESS
}
