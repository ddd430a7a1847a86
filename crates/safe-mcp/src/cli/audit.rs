//! `safe-mcp audit verify`: reading the trail as a reviewer would (`audit tail` is in
//! [`super::tail`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use safe_mcp_core::audit::Chain;
use safe_mcp_core::audit::verify::{verify, with_rotations};
use safe_mcp_core::config::{ProcessEnv, Section};
use safe_mcp_core::load::load_policy;

use crate::exit::{fatal, say};

/// Verifies the lines a receiver stored (a file, or stdin), one chain per server: each
/// record's hash, the links between consecutive seqs, and each server's gaps. Exit 0 every
/// chain intact without gaps, 1 broken or gapped.
pub fn verify_received_cmd(
    config: Option<&Path>,
    key_file: Option<&Path>,
    files: &[PathBuf],
) -> ExitCode {
    let key = match read_key(config, key_file) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let text = match received_text(files) {
        Ok(t) => t,
        Err(e) => return fatal(e),
    };
    let reports = match safe_mcp_core::audit::received::verify_received(&text, &Chain::new(key)) {
        Ok(r) => r,
        Err(why) => {
            say!("BROKEN: {why}");
            return ExitCode::from(1);
        }
    };
    let gapped: Vec<&str> = reports
        .iter()
        .filter(|r| !r.gaps.is_empty())
        .map(|r| r.server.as_str())
        .collect();
    let records: usize = reports.iter().map(|r| r.records).sum();
    match &reports[..] {
        [] => say!("OK: 0 records"),
        [one] => say!("{}", chain_line(one, true)),
        many => {
            if gapped.is_empty() {
                say!(
                    "OK: {} servers, {records} records, every chain intact, no gaps",
                    many.len()
                );
            } else {
                say!(
                    "GAPS: {} servers, {records} records; seq missing from {}",
                    many.len(),
                    gapped.join(", ")
                );
            }
            for r in many {
                say!("  {}", chain_line(r, false));
            }
        }
    }
    if gapped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// One server's chain as `audit verify --received` reports it: with its verdict first when
/// it is the only one, after its server's name otherwise.
pub(crate) fn chain_line(
    r: &safe_mcp_core::audit::received::ReceivedReport,
    alone: bool,
) -> String {
    let body = if r.gaps.is_empty() {
        format!(
            "{} records, seq {}..{}, chain intact, no gaps ({} duplicates, {} checkpoints matched)",
            r.records, r.first, r.last, r.duplicates, r.checkpoints
        )
    } else {
        let gaps: Vec<String> = r
            .gaps
            .iter()
            .map(|(a, b)| {
                if a == b {
                    format!("{a}")
                } else {
                    format!("{a}..{b}")
                }
            })
            .collect();
        format!(
            "{} records, seq {}..{}; missing seq {} (each record present verifies)",
            r.records,
            r.first,
            r.last,
            gaps.join(", ")
        )
    };
    let body = match (&r.continues, r.unverified_start) {
        (Some(other), _) => format!(
            "{body}; continues the chain of {} at seq {}",
            if other.is_empty() { "(unnamed)" } else { other },
            r.first - 1
        ),
        (None, true) => format!(
            "{body}; the records before seq {} are not in this stream, so its start is unverified",
            r.first
        ),
        (None, false) => body,
    };
    let server = if r.server.is_empty() {
        "(unnamed)"
    } else {
        &r.server
    };
    match (alone, r.gaps.is_empty()) {
        (true, true) => format!("OK: {body}; server {server}"),
        (true, false) => format!("GAPS: {body}; server {server}"),
        (false, _) => format!("{server}: {body}"),
    }
}

/// The lines a receiver stored: `files` joined, or stdin for none or `-`.
pub(crate) fn received_text(files: &[PathBuf]) -> Result<String, String> {
    match files {
        [] => read_stdin(),
        [one] if one.as_os_str() == "-" => read_stdin(),
        many => many
            .iter()
            .map(|f| {
                std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|t| t.join("\n")),
    }
}

fn read_stdin() -> Result<String, String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    Ok(text)
}

/// The HMAC key from `--key-file` or the policy's `audit_hmac_key_file`.
pub(crate) fn read_key(
    config: Option<&Path>,
    key_file: Option<&Path>,
) -> Result<Option<Vec<u8>>, ExitCode> {
    match (config, key_file) {
        (_, Some(k)) => std::fs::read(k)
            .map(Some)
            .map_err(|e| fatal(format!("cannot read the key file {}: {e}", k.display()))),
        (Some(c), None) => load_policy(Some(c), &ProcessEnv, Section::Any)
            .map(|p| p.audit.hmac_key)
            .map_err(fatal),
        (None, None) => Ok(None),
    }
}

/// Verifies the given files (a single live file brings its rotated siblings along).
pub fn verify_cmd(config: Option<&Path>, key_file: Option<&Path>, files: &[PathBuf]) -> ExitCode {
    let key = match read_key(config, key_file) {
        Ok(k) => k,
        Err(code) => return code,
    };
    // A file that cannot be read is an error (exit 2), never a tamper alarm (exit 1).
    for f in files {
        if let Err(e) = std::fs::File::open(f) {
            return fatal(format!("cannot read {}: {e}", f.display()));
        }
    }
    let files: Vec<PathBuf> = match files {
        [one] => with_rotations(one),
        many => many.to_vec(),
    };
    match verify(&files, &Chain::new(key)) {
        Ok(report) => {
            for note in &report.notes {
                say!("note: {note}");
            }
            say!(
                "OK: {} records in {} file(s), chain intact",
                report.records,
                report.files
            );
            ExitCode::SUCCESS
        }
        Err(b) => {
            say!("BROKEN: {b}");
            ExitCode::from(1)
        }
    }
}
