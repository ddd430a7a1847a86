//! The server's binary started from its SSH agent's directory (issue 54, item 2), under
//! one of two names, to log in over SSH without a shell and without any choice of the
//! command's:
//! - `ssh`, which git runs (`GIT_SSH_COMMAND` names it, overriding the hardening's
//!   `core.sshCommand = false`): it runs OpenSSH's `ssh` with the directory's
//!   `ssh_config` (the pinned `known_hosts` only, `StrictHostKeyChecking yes`, the agent,
//!   `BatchMode`), and `SHELL` set to `proxy-shell`, so that the config's `ProxyCommand`
//!   runs that instead of a shell; where ssh says a login failed for a reason the policy
//!   decides (a host key not pinned, the agent's refusal), a line naming the policy key
//!   follows ssh's own;
//! - `proxy-shell`, which that ssh starts as `proxy-shell -c "exec connect HOST PORT"`:
//!   nothing else is accepted. It opens a CONNECT through the server's proxy (`HTTPS_PROXY`),
//!   which judges the host like every connection and records it, and relays ssh's bytes.
//!   A refusal says what would allow it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use safe_mcp_core::agent_dir::DIR_VARIABLE;

/// Runs as `ssh` or `proxy-shell` when started from the agent's directory; `None` otherwise.
pub(crate) fn run_if_login() -> Option<ExitCode> {
    let dir = PathBuf::from(std::env::var_os(DIR_VARIABLE)?);
    let mut args = std::env::args_os();
    let first = PathBuf::from(args.next()?);
    if first.parent()? != dir {
        return None;
    }
    let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    match first.file_name()?.to_str()? {
        "ssh" => Some(exec_ssh(&dir, &rest)),
        "proxy-shell" => Some(connect(&rest)),
        _ => None,
    }
}

/// OpenSSH's `ssh`, first on PATH outside `dir`, with the directory's config, run to its
/// end with git's stdin and stdout; its stderr passes through, and where it says why a login
/// failed in OpenSSH's words, a line follows that names the policy key that would allow it.
fn exec_ssh(dir: &Path, args: &[String]) -> ExitCode {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .filter(|d| d != dir)
            .map(|d| d.join("ssh"))
            .find(|p| p.is_file())
    });
    let Some(ssh) = found else {
        eprintln!(
            "safe-mcp: no ssh on PATH: the operator installs OpenSSH's client and allows ssh ([terminal.allowlist] helpers)"
        );
        return ExitCode::from(127);
    };
    let started = std::process::Command::new(&ssh)
        .arg("-F")
        .arg(dir.join("ssh_config"))
        .args(args)
        .env("SHELL", dir.join("proxy-shell"))
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match started {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "safe-mcp: {} could not be started ({error}); the exec allowlist must let git's tree run it ([terminal.allowlist] helpers = [\"ssh\"])",
                ssh.display()
            );
            return ExitCode::from(126);
        }
    };
    let mut notes = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            eprintln!("{line}");
            if let Some(note) = note_for(&line) {
                notes.push(note);
            }
        }
    }
    let status = child.wait().ok().and_then(|s| s.code()).unwrap_or(255);
    notes.dedup();
    for note in notes {
        eprintln!("safe-mcp: {note}");
    }
    ExitCode::from(u8::try_from(status).unwrap_or(255))
}

/// What to tell the model after ssh's `line`, when it says a login failed for a reason the
/// policy decides.
fn note_for(line: &str) -> Option<&'static str> {
    if line.contains("Host key verification failed")
        || line.contains("No ED25519 host key is known")
        || line.contains("host key for") && line.contains("not known")
    {
        Some(
            "the host's key is not pinned: SSH logs in only to hosts whose key the operator pinned in a [[terminal.credentials]] kind = \"ssh\" entry's known_hosts (and named in its hosts)",
        )
    } else if line.contains("agent refused operation")
        || line.contains("Permission denied (publickey")
    {
        Some(
            "the server's agent signs a login only for a host its key's [[terminal.credentials]] kind = \"ssh\" entry names in hosts; the trail's ssh record says why it refused",
        )
    } else {
        None
    }
}

/// The host and port of `-c "exec connect HOST PORT"`, and nothing else.
fn target(args: &[String]) -> Option<(String, u16)> {
    let [flag, command] = args else { return None };
    let words: Vec<&str> = command.split_whitespace().collect();
    match (flag.as_str(), words.as_slice()) {
        ("-c", ["exec", "connect", host, port]) => {
            let host = host.to_ascii_lowercase();
            let plain = !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            Some((host, port.parse().ok()?)).filter(|_| plain)
        }
        _ => None,
    }
}

/// The CONNECT through the proxy, then the relay of ssh's bytes both ways.
fn connect(args: &[String]) -> ExitCode {
    let fail = |why: String| {
        eprintln!("safe-mcp: {why}");
        ExitCode::from(1)
    };
    let Some((host, port)) = target(args) else {
        return fail(
            "proxy-shell runs only the ssh_config's ProxyCommand (connect HOST PORT)".into(),
        );
    };
    let proxy = std::env::var("HTTPS_PROXY").unwrap_or_default();
    let proxy = proxy
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = match std::net::TcpStream::connect(&proxy) {
        Ok(s) => s,
        Err(e) => return fail(format!("the server's proxy {proxy:?}: {e}")),
    };
    let head = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
    if let Err(e) = stream.write_all(head.as_bytes()) {
        return fail(format!("the server's proxy: {e}"));
    }
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && answer.len() < 8192 {
        match stream.read(&mut byte) {
            Ok(1) => answer.push(byte[0]),
            _ => break,
        }
    }
    let status = String::from_utf8_lossy(&answer);
    let status = status.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return fail(format!(
            "the server's proxy refused SSH to {host}:{port} ({status}): SSH reaches only the hosts of a [[terminal.credentials]] kind = \"ssh\" entry, each allowed by [terminal.network] allow_domains"
        ));
    }
    relay(stream)
}

/// ssh's stdin to the tunnel, the tunnel to its stdout, until either ends. Unbuffered
/// both ways (std's stdout holds bytes until a newline, and ssh's handshake has none).
fn relay(stream: std::net::TcpStream) -> ExitCode {
    use std::os::fd::AsFd;
    let raw = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().map(std::fs::File::from);
    let (Ok(mut upstream), Ok(mut input), Ok(mut output)) = (
        stream.try_clone(),
        raw(std::io::stdin().as_fd()),
        raw(std::io::stdout().as_fd()),
    ) else {
        return ExitCode::from(1);
    };
    std::thread::spawn(move || {
        let _ = pump(&mut input, &mut upstream);
        let _ = upstream.shutdown(std::net::Shutdown::Write);
    });
    let mut downstream = stream;
    match pump(&mut downstream, &mut output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}

/// Each chunk `from` gives, written whole to `to` at once, until `from` ends: a plain loop
/// (`std::io::copy` would splice between a pipe and a socket, and hold a chunk ssh waits
/// for).
fn pump(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match from.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => to.write_all(&chunk[..n])?,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn only_the_configs_proxy_command_is_taken() {
        let args = |s: &[&str]| s.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            target(&args(&["-c", "exec connect Git.Test 22"])),
            Some(("git.test".to_owned(), 22))
        );
        for bad in [
            args(&["-c", "exec connect git.test 22; sh"]),
            args(&["-c", "exec sh"]),
            args(&["-c", "exec connect git.test"]),
            args(&["-c", "exec connect git_test/x 22"]),
            args(&["-x", "exec connect git.test 22"]),
            args(&["-c", "exec connect git.test 99999"]),
            args(&["-c"]),
        ] {
            assert_eq!(target(&bad), None, "{bad:?}");
        }
    }
}
