//! Issue 54, items 2 and 4: `git push` and `fetch` over SSH from the sandbox, with a key
//! the sandbox never holds. A real OpenSSH `sshd` the test starts on loopback serves a bare
//! repository as an unprivileged user (`safemcp-git`, which `.ci/run` makes) with
//! `authorized_keys`; the policy's ssh key names `git.test` and pins its host key. The push
//! goes through the server's proxy (a `network` record) and the server's agent (a `login`
//! record); the same sshd reached as `other.test`, whose key nobody pinned, is refused by
//! ssh and by the agent; a host the network does not allow is refused by the proxy with a
//! note naming the policy keys. As root and under an unprivileged server.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::json;

use super::support::*;

/// The user sshd logs the pushes in as.
const GIT_USER: &str = "safemcp-git";

/// An sshd on 127.0.0.1, killed when dropped, with its directory (mode 0755, so that the
/// user it logs in can read its `authorized_keys` and write its repository).
struct Sshd {
    child: Child,
    port: u16,
    dir: PathBuf,
    host_public: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The uid and gid of `user`, from the host's passwd.
fn ids_of(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd
        .lines()
        .find(|l| l.starts_with(&format!("{user}:")))?;
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

impl Sshd {
    /// Starts sshd for `GIT_USER`, accepting `client_public`, with a bare repository
    /// `repo.git` of that user's.
    fn start(client_public: &str) -> Sshd {
        let (uid, gid) = ids_of(GIT_USER)
            .unwrap_or_else(|| panic!("no user {GIT_USER}: .ci/run makes it (useradd)"));
        let dir = PathBuf::from(format!("/tmp/safe-mcp-sshd-{}", free_port()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let host_key = dir.join("host_ed25519");
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&host_key)
            .output()
            .unwrap();
        assert_success(&made);
        let host_public = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        std::fs::write(dir.join("authorized_keys"), format!("{client_public}\n")).unwrap();
        let repo = dir.join("repo.git");
        host_git(&dir, &["init", "-q", "--bare", "repo.git"]);
        for entry in std::iter::once(repo.clone()).chain(walk(&repo)) {
            std::os::unix::fs::chown(&entry, Some(uid), Some(gid)).unwrap();
        }
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nAllowUsers {GIT_USER}\n",
                hk = host_key.display(),
                d = dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let up = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "sshd did not come up on {port}");
        Sshd {
            child,
            port,
            dir,
            host_public: host_public
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    fn repo(&self) -> PathBuf {
        self.dir.join("repo.git")
    }
}

/// A sandbox whose policy's key `deploy` logs in to `git.test` (sshd's port, its key
/// pinned), with the network allowing git.test and other.test (both sshd on loopback), and
/// a repository `work` whose remotes are `origin` (git.test), `other` (other.test) and
/// `third` (third.test, which the network does not allow).
fn login_sandbox(uid: Option<u32>, key: &Path, sshd: &Sshd) -> Sandbox {
    let sb = Sandbox::builder().build();
    sb.add_helpers(&["ssh"]);
    let known = sb.base().join("known_hosts");
    std::fs::write(
        &known,
        format!("[git.test]:{} {}\n", sshd.port, sshd.host_public),
    )
    .unwrap();
    sb.append_policy(&format!(
        "[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"git.test\", \"other.test\"]\nallow_private = true\nhosts = {{ \"git.test\" = [\"127.0.0.1\"], \"other.test\" = [\"127.0.0.1\"], \"third.test\" = [\"127.0.0.1\"] }}\n\n[[terminal.credentials]]\nname = \"deploy\"\nkind = \"ssh\"\nkey_file = \"{}\"\nhosts = [\"git.test:{}\"]\nknown_hosts = \"{}\"\n",
        key.display(),
        sshd.port,
        known.display()
    ));
    let work = sb.jail.join("work");
    std::fs::create_dir(&work).unwrap();
    host_git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("a.txt"), "a\n").unwrap();
    host_git(&work, &["add", "a.txt"]);
    host_git(&work, &["commit", "-qm", "one"]);
    let path = sshd.repo().display().to_string();
    for (remote, host) in [
        ("origin", "git.test"),
        ("other", "other.test"),
        ("third", "third.test"),
    ] {
        let url = format!("ssh://{GIT_USER}@{host}:{}{path}", sshd.port);
        host_git(&work, &["remote", "add", remote, &url]);
    }
    if let Some(uid) = uid {
        sb.give_to(uid);
        for entry in walk(&sb.jail) {
            std::os::unix::fs::chown(&entry, Some(uid), Some(uid)).unwrap();
        }
    }
    sb
}

/// The pushes on one server.
async fn pushes(sb: &Sandbox, s: &Session, sshd: &Sshd, key: &Path) {
    let r = s.run_in("work", "git push origin main").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    let pushed = Command::new("git")
        .args(["-c", "safe.directory=*", "rev-parse", "main"])
        .current_dir(sshd.repo())
        .output()
        .unwrap();
    assert_success(&pushed);
    let login = sb
        .find_record(|r| r["kind"] == "ssh" && r["event"] == "login")
        .unwrap_or_else(|| panic!("no login record: {:?}", sb.audit_records()));
    assert_eq!(
        login["host"],
        json!(format!("[git.test]:{}", sshd.port)),
        "{login}"
    );
    assert_eq!(login["user"], GIT_USER, "{login}");
    assert!(
        sb.has_record(|r| r["kind"] == "network"
            && r["host"] == "git.test"
            && r["port"] == sshd.port),
        "the connection went through the proxy"
    );
    let r = s.run_in("work", "git fetch origin").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    // The same sshd as other.test: its key is pinned nowhere. ssh refuses it, and no login
    // is signed.
    let logins = |sb: &Sandbox| {
        sb.audit_records()
            .iter()
            .filter(|r| r["event"] == "login")
            .count()
    };
    let before = logins(sb);
    let r = s.run_in("work", "git push other main").await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(
        stderr_of(&r).contains("Host key verification failed"),
        "{r}"
    );
    assert!(
        stderr_of(&r).contains("known_hosts"),
        "the note names the policy key: {r}"
    );
    assert_eq!(logins(sb), before);
    // A host the network does not allow: the proxy refuses, and says what would allow it.
    let r = s.run_in("work", "git push third main").await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(
        stderr_of(&r).contains("[[terminal.credentials]] kind = \"ssh\""),
        "{r}"
    );
    // The key's bytes are in no result or record.
    let private = std::fs::read_to_string(key).unwrap();
    let secret_line = private.lines().nth(1).unwrap();
    let trail: String = sb.audit_records().iter().map(|r| r.to_string()).collect();
    assert!(!trail.contains(secret_line));
}

#[tokio::test(flavor = "multi_thread")]
async fn git_pushes_over_ssh_through_the_proxy_with_a_key_it_never_holds() {
    if !rustix::process::geteuid().is_root() {
        skip("sshd logs in another user only when started as root; CI runs as root");
        return;
    }
    for uid in server_uids() {
        let key = std::env::temp_dir().join(format!("safe-mcp-deploy-{}", free_port()));
        let public = ssh_keypair(&key, "deploy", *uid);
        let sshd = Sshd::start(&public);
        let sb = login_sandbox(*uid, &key, &sshd);
        let s = match uid {
            Some(uid) => sb.session_as(*uid).await,
            None => sb.session().await,
        };
        pushes(&sb, &s, &sshd, &key).await;
        let _ = std::fs::remove_file(&key);
        let _ = std::fs::remove_file(key.with_extension("pub"));
    }
}
