//! Where a profile's toolchain really lives, asked of the server's own environment at load.
//!
//! A rustup proxy (`~/.cargo/bin/cargo`) or a pyenv shim is a program that picks the real
//! toolchain at run time from the user's home and configuration; inside the sandbox neither
//! is available, so each discovery asks once, at start, with the server's PATH and
//! environment, and the profile then names the real toolchain: read-only, first on PATH.
//! Each question is one program run with a deadline; an answer that is not an absolute,
//! existing directory is no answer.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::env::Env;

/// How long one question may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// A discovery a profile names.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Discovery {
    /// `git --exec-path`: git's helper programs.
    GitExecPath,
    /// `rustc --print sysroot`: the toolchain (its `bin` goes on PATH).
    RustcSysroot,
    /// python3's `sys.base_prefix` and the directory of its real executable.
    PythonPrefix,
    /// The directory `node` really lives in, and its prefix.
    NodePrefix,
}

/// What a discovery found.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub(super) read_paths: Vec<PathBuf>,
    pub(super) path: Vec<PathBuf>,
    /// Directories the profile's commands may execute beneath (the exec allowlist).
    pub(super) helpers: Vec<PathBuf>,
}

/// Runs one discovery, or says why it found nothing.
pub(super) fn run(discovery: Discovery, env: &dyn Env) -> Result<Found, String> {
    let found = match discovery {
        Discovery::GitExecPath => {
            let dir = existing_dir(ask(env, "git", &["--exec-path"])?)?;
            Found {
                read_paths: vec![dir.clone()],
                path: Vec::new(),
                helpers: vec![dir],
            }
        }
        Discovery::RustcSysroot => {
            let sysroot = existing_dir(&ask(env, "rustc", &["--print", "sysroot"])?)?;
            // The toolchain runs its own linker (rust-lld through gcc-ld), and the C
            // compiler it calls runs its own passes (cc1, collect2) from gcc's directories.
            let gcc = ["cc1", "collect2"].into_iter().filter_map(|pass| {
                let at = ask(env, "cc", &[&format!("-print-prog-name={pass}")]).ok()?;
                existing_dir(Path::new(&at).parent()?).ok()
            });
            let mut helpers = vec![sysroot.clone()];
            helpers.extend(gcc);
            helpers.dedup();
            Found {
                path: vec![existing_dir(sysroot.join("bin"))?],
                read_paths: vec![sysroot],
                helpers,
            }
        }
        Discovery::PythonPrefix => {
            let answer = ask(
                env,
                "python3",
                &[
                    "-c",
                    "import sys; print(sys.base_prefix); print(sys.executable)",
                ],
            )?;
            let mut lines = answer.lines();
            let (Some(prefix), Some(executable)) = (lines.next(), lines.next()) else {
                return Err("python3 did not say where it lives".into());
            };
            let executable = std::fs::canonicalize(executable)
                .map_err(|e| format!("python3's executable {executable}: {e}"))?;
            Found {
                read_paths: vec![existing_dir(prefix)?],
                helpers: Vec::new(),
                path: executable
                    .parent()
                    .map(Path::to_path_buf)
                    .into_iter()
                    .collect(),
            }
        }
        Discovery::NodePrefix => {
            let node = which(env, "node")?;
            let real =
                std::fs::canonicalize(&node).map_err(|e| format!("{}: {e}", node.display()))?;
            let bin = real
                .parent()
                .ok_or_else(|| format!("{} has no directory", real.display()))?
                .to_path_buf();
            let prefix = bin.parent().unwrap_or(&bin).to_path_buf();
            Found {
                read_paths: vec![prefix],
                path: vec![bin],
                helpers: Vec::new(),
            }
        }
    };
    Ok(found)
}

/// `program` on the server's PATH.
fn which(env: &dyn Env, program: &str) -> Result<PathBuf, String> {
    let path = env
        .var("PATH")
        .ok_or_else(|| format!("{program}: the server has no PATH to find it on"))?;
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    crate::programs::find_on(dirs.iter().map(PathBuf::as_path), program)
        .ok_or_else(|| format!("{program} is not on the server's PATH"))
}

/// Runs `program args` (found on the server's PATH, with the server's environment) and
/// returns its trimmed standard output, or why not.
fn ask(env: &dyn Env, program: &str, args: &[&str]) -> Result<String, String> {
    ask_program(&which(env, program)?, args)
}

/// git's exec-path (its helper programs: `git-remote-https`, `git-upload-pack`), asked of
/// the git at `git`: the one commands run, found on the policy's PATH.
pub(super) fn git_exec_path(git: &Path) -> Result<PathBuf, String> {
    existing_dir(ask_program(git, &["--exec-path"])?)
}

/// Runs `exe args` with the server's environment and returns its trimmed standard output,
/// or why not.
fn ask_program(exe: &Path, args: &[&str]) -> Result<String, String> {
    let program = exe.display();
    let mut child = std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} {} took longer than {DEADLINE:?}",
                    args.join(" ")
                ));
            }
            Err(e) => return Err(format!("{program}: {e}")),
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    if !status.success() {
        return Err(format!("{program} {} failed ({status})", args.join(" ")));
    }
    Ok(out.trim().to_owned())
}

/// `answer` as an absolute, existing directory, canonical.
fn existing_dir(answer: impl AsRef<Path>) -> Result<PathBuf, String> {
    let p = answer.as_ref();
    if !p.is_absolute() {
        return Err(format!("{} is not an absolute path", p.display()));
    }
    std::fs::canonicalize(p)
        .ok()
        .filter(|r| r.is_dir())
        .ok_or_else(|| format!("{} is not a directory", p.display()))
}
