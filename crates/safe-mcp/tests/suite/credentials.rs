//! Credentials the model never sees (issue 36), over real MCP sessions: real git pushing
//! over HTTPS to a real `git http-backend` behind a TLS origin this test starts with its own
//! CA, through the proxy that adds the token; real curl, env, cat and python showing only
//! the placeholder; a placeholder sent elsewhere refused; a method/path rule refusing a
//! push; a host without credentials never terminated; a denied name never resolved.

use std::path::Path;

use serde_json::{Value, json};

use super::builders::{stderr, stdout};
use super::origin::{Dns, Origin, Pki};
use super::support::sh_call;
use super::support::{
    Sandbox, Session, host_git, interpreter_rules, live_processes_with, policy_head, reason_of,
    root_or_skip,
};

/// The token git's origin requires, and the key the echo origin is sent.
const GH_TOKEN: &str = "ghp_R3alT0kenV4lue0123456789abcdefghijKL";
const ECHO_KEY: &str = "sk-proj-EchoKeyReal0123456789abcdef";

fn out(r: &Value) -> String {
    format!("{}{}", stdout(r), stderr(r))
}

fn network(sb: &Sandbox) -> Vec<Value> {
    sb.audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "network")
        .collect()
}

/// The sandbox's policy: git, curl, sh, python3, env and cat; two credential hosts (git
/// with rules, echo), a tunnel host and a plain host, all pinned to loopback.
fn policy(token_file: &Path, ca: &Path) -> String {
    format!(
        r#"{head}
[terminal.allowlist]
commands = ["git", "curl", "sh", "python3", "env", "cat", "tr"]

{interpreters}
[terminal.env]
set = {{ GIT_AUTHOR_NAME = "agent", GIT_AUTHOR_EMAIL = "a@example", GIT_COMMITTER_NAME = "agent", GIT_COMMITTER_EMAIL = "a@example" }}

[terminal.network]
mode = "allowlist"
allow_domains = ["*.cred.test"]
allow_private = true
hosts = {{ "git.cred.test" = ["127.0.0.1"], "echo.cred.test" = ["127.0.0.1"], "tunnel.cred.test" = ["127.0.0.1"], "plain.cred.test" = ["127.0.0.1"] }}
upstream_ca_file = "{ca}"

[[terminal.network.rules]]
host = "git.cred.test"
methods = ["GET"]
paths = ["/**"]
[[terminal.network.rules]]
host = "git.cred.test"
methods = ["POST"]
paths = ["/org/repo.git/git-receive-pack", "/org/*.git/git-upload-pack"]

[[terminal.credentials]]
name = "GH_TOKEN"
from = "file:{token}"
hosts = ["git.cred.test"]
inject = {{ header = "Authorization", format = "Basic x-access-token:{{}}" }}

[[terminal.credentials]]
name = "ECHO_KEY"
from = "env:ECHO_KEY_REAL"
hosts = ["echo.cred.test"]
inject = {{ header = "Authorization", format = "Bearer {{}}" }}
"#,
        ca = ca.display(),
        token = token_file.display(),
        head = policy_head("timeout_seconds = 30\nmax_output_bytes = 65536"),
        interpreters = interpreter_rules(&["sh", "python3", "env"]),
    )
}

fn write_token(path: &Path, token: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Two bare repositories under `root/org`, each with one commit on main.
fn bare_repos(root: &Path) {
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    host_git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("README"), "seed\n").unwrap();
    host_git(&seed, &["add", "README"]);
    host_git(&seed, &["commit", "-q", "-m", "seed"]);
    for name in ["repo.git", "other.git"] {
        let bare = root.join("org").join(name);
        let b = bare.to_str().unwrap();
        host_git(root, &["clone", "-q", "--bare", seed.to_str().unwrap(), b]);
        host_git(&bare, &["config", "http.receivepack", "true"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn git_pushes_with_a_token_the_commands_never_see() {
    let w = World::start().await;
    w.push_with_the_token().await;
    w.only_placeholders_inside().await;
    w.echoed_keys_are_masked().await;
    w.placeholders_go_only_to_their_hosts().await;
    w.no_echo_no_override().await;
    w.tunnels_stay_tunnels().await;
    w.rotation_on_hangup().await;
}

/// The origins, the policy and a session for the credential tests: a git origin that wants
/// GH_TOKEN, an echo host for ECHO_KEY, a tunnel host without credentials, a plain host.
struct World {
    sb: Sandbox,
    s: Session,
    repos: std::path::PathBuf,
    token_file: std::path::PathBuf,
    git_origin: Origin,
    echo: Origin,
    tunnel: Origin,
    plain: super::egress::Upstream,
}

impl World {
    async fn start() -> World {
        let sb = Sandbox::new("");
        let base = sb.base().to_path_buf();
        let pki = Pki::make(
            &base,
            &["git.cred.test", "echo.cred.test", "tunnel.cred.test"],
        );
        let repos = base.join("repos");
        bare_repos(&repos);
        let git_origin = Origin::start(&pki, false, Some(repos.clone()), GH_TOKEN).await;
        let echo = Origin::start(&pki, false, None, "").await;
        let tunnel = Origin::start(&pki, true, None, "").await;
        let plain = super::egress::Upstream::start().await;
        let token_file = base.join("gh-token");
        write_token(&token_file, GH_TOKEN);
        std::fs::write(&sb.policy, policy(&token_file, &pki.ca_pem)).unwrap();
        // The client certificate the tunnel host asks for, where curl in the view can read it.
        for p in [&pki.ca_pem, &pki.client_pem, &pki.client_key] {
            std::fs::copy(p, sb.jail.join(p.file_name().unwrap())).unwrap();
        }
        let s = Session::start(&sb.policy, |c| {
            c.env("ECHO_KEY_REAL", ECHO_KEY);
        })
        .await;
        World {
            sb,
            s,
            repos,
            token_file,
            git_origin,
            echo,
            tunnel,
            plain,
        }
    }

    fn echo_url(&self) -> String {
        format!("https://echo.cred.test:{}/whoami", self.echo.port)
    }

    /// Clone, commit and push over HTTPS, the token added by the proxy.
    async fn push_with_the_token(&self) {
        let World {
            sb,
            s,
            repos,
            git_origin,
            ..
        } = self;
        // Clone, commit and push over HTTPS, the token added by the proxy.
        let url = format!("https://git.cred.test:{}/org/repo.git", git_origin.port);
        let r = s
            .run_with(json!({"command": ["git", "clone", "-q", url, "work"]}))
            .await;
        assert_eq!(r["code"], "OK", "{r}");
        assert_eq!(r["detail"]["exit_code"], 0, "{r}");
        sb.write_in_jail("work/change.txt", "pushed through the proxy\n");
        for argv in [
            json!(["git", "-C", "work", "add", "change.txt"]),
            json!(["git", "-C", "work", "commit", "-q", "-m", "change"]),
            json!(["git", "-C", "work", "push", "-q", "origin", "HEAD:main"]),
        ] {
            let r = s.run_with(json!({"command": argv})).await;
            assert_eq!(r["detail"]["exit_code"], 0, "{argv}: {r}");
        }
        let log = std::process::Command::new("git")
            .args([
                "--git-dir",
                repos.join("org/repo.git").to_str().unwrap(),
                "log",
                "--format=%s",
                "main",
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&log.stdout), "change\nseed\n");
        let pushes: Vec<_> = git_origin
            .seen()
            .into_iter()
            .filter(|s| s.method == "POST" && s.path.ends_with("git-receive-pack"))
            .collect();
        assert_eq!(pushes.len(), 1, "{:?}", git_origin.seen());
        // The origin saw the proxy's own handshake (SNI the host) and the real token.
        let expected = format!(
            "Basic {}",
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                format!("x-access-token:{GH_TOKEN}")
            )
        );
        assert_eq!(pushes[0].authorization.as_deref(), Some(expected.as_str()));
        assert_eq!(pushes[0].sni.as_deref(), Some("git.cred.test"));
    }

    /// The commands see only placeholders: env, /proc, python, and the proxy's CA bundle.
    async fn only_placeholders_inside(&self) {
        let World { s, .. } = self;
        // The commands see only placeholders: env, /proc, python, and the proxy's CA bundle.
        let mut shown = String::new();
        for args in [
            json!({"command": ["env"]}),
            // Past the argument checks (sh -c), so that only the view stands in the way.
            sh_call("cat /proc/self/environ | tr '\\0' '\\n'"),
            json!({"command": ["python3", "-c", "import os; print(os.environ['GH_TOKEN'], os.environ['ECHO_KEY'])"]}),
        ] {
            let r = s.run_with(args.clone()).await;
            assert_eq!(r["detail"]["exit_code"], 0, "{args}: {r}");
            shown.push_str(&out(&r));
        }
        assert!(
            !shown.contains(GH_TOKEN) && !shown.contains(ECHO_KEY),
            "{shown}"
        );
        // The placeholder is shaped like a GitHub token, so results redact it like one: printed
        // reversed, it shows its shape and that it is not the token.
        let r = s.py("import os; print(os.environ['GH_TOKEN'][::-1]); print(os.environ['SSL_CERT_FILE'])").await;
        let lines: Vec<String> = out(&r).lines().map(str::to_owned).collect();
        let placeholder: String = lines[0].chars().rev().collect();
        assert!(
            placeholder.starts_with("ghp_") && placeholder.len() == GH_TOKEN.len(),
            "{r}"
        );
        assert!(
            placeholder[4..].bytes().all(|b| b.is_ascii_alphanumeric()),
            "{placeholder}"
        );
        assert_ne!(placeholder, GH_TOKEN);
        assert!(lines[1].ends_with("ca-bundle.pem"), "{lines:?}");
        for var in [
            "GIT_SSL_CAINFO",
            "CURL_CA_BUNDLE",
            "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "CARGO_HTTP_CAINFO",
            "PIP_CERT",
        ] {
            assert!(
                shown.contains(&format!("{var}={}", lines[1])),
                "{var}: {shown}"
            );
        }
    }

    /// A key echoed back by its host is masked before the command sees it.
    async fn echoed_keys_are_masked(&self) {
        let World { s, echo, .. } = self;
        // A key echoed back by its host is masked before the command sees it; the header went
        // in with the real value, added where curl sent none and swapped where it sent the
        // placeholder.
        let echo_url = format!("https://echo.cred.test:{}/whoami", echo.port);
        for script in [
            format!("curl -sS {echo_url}"),
            format!("curl -sS -H \"Authorization: Bearer $ECHO_KEY\" {echo_url}"),
        ] {
            let r = s.sh(&script).await;
            let text = out(&r);
            assert!(text.contains("authorization: Bearer ****"), "{script}: {r}");
            assert!(!text.contains(ECHO_KEY), "{script}: {r}");
        }
        let sent: Vec<_> = echo
            .seen()
            .into_iter()
            .filter_map(|s| s.authorization)
            .collect();
        assert_eq!(
            sent,
            [format!("Bearer {ECHO_KEY}"), format!("Bearer {ECHO_KEY}")]
        );
    }

    /// A placeholder goes only to the hosts its credential is bound to.
    async fn placeholders_go_only_to_their_hosts(&self) {
        let World {
            sb, s, echo, plain, ..
        } = self;
        let echo_url = self.echo_url();
        // GH_TOKEN's placeholder to a host it is not bound to: in a header to the echo host
        // (terminated), in a plain URL; refused and audited, and neither reached its host.
        let before = echo.seen().len();
        let r = s
            .sh(&format!(
                "curl -sS -o /dev/null -w '%{{http_code}}' -H \"X-Token: $GH_TOKEN\" {echo_url}"
            ))
            .await;
        assert_eq!(out(&r).trim(), "403", "{r}");
        assert_eq!(
            echo.seen().len(),
            before,
            "the request never reached the echo host"
        );
        let r = s.sh(&format!("curl -sS -o /dev/null -w '%{{http_code}}' \"http://plain.cred.test:{}/?t=$GH_TOKEN\"", plain.port)).await;
        assert_eq!(out(&r).trim(), "403", "{r}");
        let refused: Vec<Value> = network(sb)
            .into_iter()
            .filter(|r| r["event"] == "refused" && r["rule"] == "credential-host")
            .collect();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(
            refused.iter().all(|r| reason_of(r).contains("GH_TOKEN")),
            "{refused:?}"
        );
    }

    /// No TRACE, no method override, no push outside the rules.
    async fn no_echo_no_override(&self) {
        let World {
            sb,
            s,
            git_origin,
            echo,
            ..
        } = self;
        let echo_url = self.echo_url();
        // An answer that would echo the request back (TRACE), and a header that would change
        // the method the rules judged, never reach a credential host.
        let git_url = format!(
            "https://git.cred.test:{}/org/repo.git/info/refs",
            git_origin.port
        );
        for script in [
            format!("curl -sS -o /dev/null -w '%{{http_code}}' -X TRACE {echo_url}"),
            format!(
                "curl -sS -o /dev/null -w '%{{http_code}}' -H 'X-HTTP-Method-Override: DELETE' {git_url}"
            ),
        ] {
            let seen = (echo.seen().len(), git_origin.seen().len());
            let r = s.sh(&script).await;
            assert_eq!(out(&r).trim(), "403", "{script}: {r}");
            assert_eq!(
                (echo.seen().len(), git_origin.seen().len()),
                seen,
                "{script}"
            );
        }

        // A push to another repository: its POST matches no rule, so it is refused.
        let other = format!("https://git.cred.test:{}/org/other.git", git_origin.port);
        let r = s
            .run_with(json!({"command": ["git", "-C", "work", "push", "-q", other, "HEAD:main"]}))
            .await;
        assert_ne!(r["detail"]["exit_code"], 0, "{r}");
        let rule = network(sb)
            .into_iter()
            .find(|r| {
                r["event"] == "refused" && r["rule"] == "method-path" && r["method"] == "POST"
            })
            .unwrap_or_else(|| panic!("{:?}", network(sb)));
        assert_eq!(rule["method"], "POST");
        assert_eq!(rule["path"], "/org/other.git/git-receive-pack");
        assert!(
            !git_origin
                .seen()
                .iter()
                .any(|s| s.path.starts_with("/org/other.git") && s.method == "POST"),
            "the refused push never reached the origin"
        );
    }

    /// A host without credentials stays a tunnel; requests with one are recorded.
    async fn tunnels_stay_tunnels(&self) {
        let World { sb, s, tunnel, .. } = self;
        // A host without credentials stays a tunnel: the origin sees curl's own handshake,
        // with curl's client certificate, and curl trusts only the origin's CA.
        let tunnel_url = format!("https://tunnel.cred.test:{}/hello", tunnel.port);
        let r = s.run_with(json!({"command": ["curl", "-sS", "--cacert", "origin-ca.pem", "--cert", "client.pem", "--key", "client.key", tunnel_url]})).await;
        assert_eq!(r["detail"]["exit_code"], 0, "{r}");
        let seen = tunnel.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(
            seen[0].client_cert,
            "the origin saw the client's certificate: no termination"
        );
        let open = network(sb)
            .into_iter()
            .find(|r| r["event"] == "open" && r["host"] == "tunnel.cred.test")
            .unwrap();
        assert!(open.get("credential").is_none(), "{open}");

        // Each request with a credential is on the record, by name, with its path.
        let requests: Vec<Value> = network(sb)
            .into_iter()
            .filter(|r| r["event"] == "request")
            .collect();
        assert!(
            requests.iter().any(|r| r["credential"] == "GH_TOKEN"
                && r["method"] == "POST"
                && r["path"] == "/org/repo.git/git-receive-pack"),
            "{requests:?}"
        );
        assert!(
            requests.iter().any(|r| r["credential"] == "ECHO_KEY"),
            "{requests:?}"
        );
    }

    /// SIGHUP reads the token file again; nothing on the record holds a real value.
    async fn rotation_on_hangup(&self) {
        let World {
            sb,
            s,
            token_file,
            git_origin,
            ..
        } = self;
        // SIGHUP reads the token file again: the origin's new token works without a restart.
        let rotated = "ghp_R0tatedT0ken0123456789abcdefghijKLMN";
        *git_origin.token.lock().unwrap() = rotated.to_owned();
        write_token(token_file, rotated);
        let server = live_processes_with(sb.policy.to_str().unwrap());
        assert!(!server.is_empty());
        for pid in &server {
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(*pid as i32).unwrap(),
                rustix::process::Signal::HUP,
            )
            .unwrap();
        }
        let mut pushed = Value::Null;
        for _ in 0..20 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            pushed = s
                .run_with(json!({"command": ["git", "-C", "work", "fetch", "-q", "origin"]}))
                .await;
            if pushed["detail"]["exit_code"] == 0 {
                break;
            }
        }
        assert_eq!(pushed["detail"]["exit_code"], 0, "{pushed}");

        // Nothing on the record holds a real value; the trail names credentials only.
        let trail = std::fs::read_to_string(&sb.audit).unwrap();
        for real in [GH_TOKEN, ECHO_KEY, rotated] {
            assert!(!trail.contains(real), "the trail holds a real value");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_name_is_never_resolved() {
    if !root_or_skip(
        "the test gives the server its own /etc/resolv.conf through a mount namespace, which needs root",
    ) {
        return;
    }
    let sb = Sandbox::new("");
    let base = sb.base().to_path_buf();
    let dns_address: std::net::SocketAddr = "127.0.0.77:53".parse().unwrap();
    let dns = Dns::start(dns_address, &["ok.dns.test"]).await;
    let resolv = base.join("resolv.conf");
    std::fs::write(
        &resolv,
        "nameserver 127.0.0.77\noptions timeout:1 attempts:1\n",
    )
    .unwrap();
    let plain = super::egress::Upstream::start().await;
    std::fs::write(
        &sb.policy,
        format!(
            r#"audit_log = "{audit}"

[terminal]
jail_root = "jail"
path = ["/usr/bin", "/bin"]

[terminal.allowlist]
commands = ["curl", "python3"]

[[terminal.rules]]
command = "python3"
allow_interpreter = true

[terminal.network]
mode = "allowlist"
allow_domains = ["*.dns.test"]
deny_domains = ["denied.dns.test"]
allow_private = true
"#,
            audit = sb.audit.display()
        ),
    )
    .unwrap();
    let resolv_c = std::ffi::CString::new(resolv.to_str().unwrap()).unwrap();
    let s = Session::start(&sb.policy, move |c| {
        // SAFETY: between fork and exec only async-signal-safe calls: unshare and mount.
        unsafe {
            c.pre_exec(move || {
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        c"none".as_ptr(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    || libc::mount(
                        resolv_c.as_ptr(),
                        c"/etc/resolv.conf".as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .await;
    let url = |host: &str| format!("http://{host}:{}/", plain.port);
    let r = s
        .run_with(json!({"command": ["curl", "-sS", "--max-time", "5", url("ok.dns.test")]}))
        .await;
    assert_eq!(out(&r), "hello from upstream\n", "{r}");
    for host in ["denied.dns.test", "outside.example"] {
        let r = s.run_with(json!({"command": ["curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", url(host)]})).await;
        assert_eq!(out(&r).trim(), "403", "{host}: {r}");
    }
    // The view has no resolver: a lookup from inside fails without asking anyone.
    let r = s.py("import socket\ntry:\n socket.getaddrinfo('inside.example', 80)\n print('resolved')\nexcept OSError as e:\n print('no resolver')").await;
    assert_eq!(out(&r).trim(), "no resolver", "{r}");
    let asked = dns.asked();
    assert!(
        asked.iter().any(|n| n == "ok.dns.test"),
        "the listener is the server's resolver: {asked:?}"
    );
    for never in ["denied.dns.test", "outside.example", "inside.example"] {
        assert!(
            !asked.iter().any(|n| n == never),
            "{never} was resolved: {asked:?}"
        );
    }
}
