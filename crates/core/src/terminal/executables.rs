//! The exec allowlist as the core sees it (issue 35): which programs a command, and what it
//! starts, may execute ([`executables`], handed to the executor in the confinement spec),
//! and, when a run failed on it, which program it was ([`not_executable`]).
//!
//! The kernel refuses with EACCES and does not say which file; Landlock's audit records,
//! which would, need the audit netlink socket and an audit daemon, so the program is read
//! from stderr (what shells, Python, Node and Rust print around "Permission denied" and
//! EACCES) and checked against the list: a word that names a program outside the list is
//! the inference, and the line says it is one.

use std::path::{Path, PathBuf};

use safe_mcp_contract::{ExecOutcome, Executables};

use crate::config::TerminalPolicy;
use crate::policy::resolve_program;

/// What programs print when an exec was refused with EACCES.
const EXEC_REFUSED: &[&str] = &["Permission denied", "EACCES", "os error 13"];

/// What commands may execute under the exec allowlist (`None` when it is off): each
/// allowlisted program not denied, as the PATH resolves it (the path a stage's plan holds),
/// the operator's helpers, and each program's own helpers from its profiles. A program with
/// argument rules ([`ruled`]) is left out of what every stage may execute: only its own
/// stages run it directly, and a command reaches it through the server's shim.
pub fn executables(policy: &TerminalPolicy) -> Option<Executables> {
    let exec = &policy.sandbox.exec;
    if !exec.enabled {
        return None;
    }
    let find = |name: &str| {
        if name.starts_with('/') {
            Some(PathBuf::from(name))
        } else {
            resolve_program(&policy.path, name)
        }
    };
    let ruled = ruled(policy);
    let allowed = || policy.allow.iter().filter(|n| !policy.deny.contains(*n));
    let every = allowed()
        .filter(|n| !ruled.contains(n))
        .filter_map(|n| find(n))
        .chain(exec.helpers.iter().filter_map(|h| find(h)))
        .collect();
    let mut helpers: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    let own = ruled.iter().map(|n| (n, vec![n.clone()]));
    let profiles = exec.by_command.iter().map(|(c, h)| (c, h.clone()));
    // What a catalog tool itself starts (tar's compressors) is its stages' alone.
    let starts = allowed().filter_map(|n| {
        let spec = crate::tools::lookup(n)?;
        (!spec.starts.is_empty())
            .then(|| (n, spec.starts.iter().map(|s| (*s).to_owned()).collect()))
    });
    for (command, list) in own.chain(profiles).chain(starts) {
        if !allowed().any(|n| n == command) {
            continue;
        }
        let Some(program) = find(command) else {
            continue;
        };
        let list = list.iter().filter_map(|h| find(h));
        match helpers.iter_mut().find(|(p, _)| *p == program) {
            Some((_, known)) => known.extend(list),
            None => helpers.push((program, list.collect())),
        }
    }
    Some(Executables {
        every,
        helpers,
        path: policy.path.clone(),
    })
}

/// The allowlisted programs that have argument rules (`deny_args` or `confirm_args`, the
/// operator's or a profile's): what a command starts of them goes through the server, which
/// judges it as a call of its own. Empty where the exec allowlist is off or nothing is
/// confined (sandbox mode off), since then nothing would keep a command from the program.
pub fn ruled(policy: &TerminalPolicy) -> Vec<String> {
    if !policy.sandbox.exec.enabled || policy.sandbox.mode == crate::config::SandboxMode::Off {
        return Vec::new();
    }
    policy.ruled_commands()
}

/// When a failed run looks refused an exec by the allowlist: the programs stderr names that
/// the stages of `programs` may not execute (inferred), and the sentence for the result.
pub(super) fn not_executable(
    policy: &TerminalPolicy,
    out: &ExecOutcome,
    stderr: &str,
    programs: &[&Path],
    cwd: &Path,
) -> Option<(Vec<String>, String)> {
    if out.exit_code == Some(0) || policy.sandbox.mode == crate::config::SandboxMode::Off {
        return None;
    }
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| EXEC_REFUSED.iter().any(|m| l.contains(m)))
        .collect();
    // Most failed runs say nothing of the kind: resolve the list only for those that do.
    if lines.is_empty() {
        return None;
    }
    let list = executables(policy)?;
    let mut may = Vec::new();
    for path in list.every.iter().chain(
        list.helpers
            .iter()
            .filter(|(p, _)| programs.contains(&p.as_path()))
            .flat_map(|(_, own)| own),
    ) {
        may.extend(std::fs::canonicalize(path));
    }
    let allowed = |real: &Path| may.iter().any(|m| real.starts_with(m));
    let mut named: Vec<String> = Vec::new();
    let mut scripts: Vec<String> = Vec::new();
    for word in lines.into_iter().flat_map(words) {
        // Only an executable file is a program (a refused write names a file too).
        let found = if word.starts_with('/') {
            Some(PathBuf::from(word)).filter(|p| crate::programs::is_program(p))
        } else if word.contains('/') {
            Some(cwd.join(word)).filter(|p| crate::programs::is_program(p))
        } else {
            resolve_program(&policy.path, word)
        };
        let Some(real) = found.and_then(|p| std::fs::canonicalize(p).ok()) else {
            continue;
        };
        // A `#!` script that may run itself: what the kernel refused is its interpreter.
        if (real.starts_with(&policy.jail_root) || allowed(&real))
            && let Some(interpreter) = interpreter_of(&real, &policy.path)
        {
            let shown = interpreter.display().to_string();
            if !allowed(&std::fs::canonicalize(&interpreter).unwrap_or(interpreter)) {
                scripts.push(format!("`{word}` is a #! script run by `{shown}`"));
                if !named.contains(&shown) {
                    named.push(shown);
                }
            }
            continue;
        }
        if real.starts_with(&policy.jail_root) || allowed(&real) {
            continue;
        }
        if !named.iter().any(|n| n == word) {
            named.push(word.to_owned());
        }
    }
    let first = named.first()?;
    let which = named
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let scripts = if scripts.is_empty() {
        String::new()
    } else {
        format!(" ({})", scripts.join("; "))
    };
    Some((
        named.clone(),
        format!(
            "it looks like {which} could not be executed{scripts} (inferred from stderr: the kernel does not say which file): only the allowlisted programs and their helpers may be executed, by the command or anything it starts. If the task needs it, the operator adds it to [terminal.allowlist] commands, or to [terminal.allowlist] helpers = [\"{first}\"] for programs that only other programs start; a script needs its #! interpreter allowed too"
        ),
    ))
}

/// The interpreter a `#!` line names (`/usr/bin/env NAME` resolved on `path`), when `file`
/// starts with one.
fn interpreter_of(file: &Path, path: &[PathBuf]) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let (interpreter, name) = safe_mcp_contract::shebang(head[..n].strip_prefix(b"#!")?)?;
    match name {
        Some(name) => resolve_program(path, &name),
        None => Some(interpreter),
    }
}

/// The words of a line that could name a program: split at what programs print around one.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || "'\"`:,()[]{}".contains(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| {
            !w.is_empty()
                && w.len() < 256
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._+-".contains(c))
        })
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn the_words_of_what_programs_print_around_a_refused_exec() {
        let cases = [
            ("PermissionError: [Errno 13] Permission denied: 'rm'", "rm"),
            ("sh: 1: curl: Permission denied", "curl"),
            ("Error: spawn nc EACCES", "nc"),
            ("bash: /usr/bin/ssh: Permission denied", "/usr/bin/ssh"),
        ];
        for (line, want) in cases {
            assert!(words(line).any(|w| w == want), "{line}");
        }
    }
}
