//! Issue 54, items 1 and 3 (and the refusals of 4 that belong to them): signed commits
//! through the server's own SSH agent, over real MCP sessions. The policy names a key file
//! outside the jail; the model's `git commit` (gpg.format = ssh) signs through
//! `SSH_AUTH_SOCK` with `ssh-keygen -Y sign -U`, the test verifies the commit outside the
//! sandbox, and the trail holds what was signed. The key's file is unreadable in the
//! sandbox (the control reads it unconfined), its bytes and the agent's identity list never
//! reach a result or a record, and what the policy does not allow (another namespace, a key
//! the agent does not hold) is refused and recorded. As root and under an unprivileged
//! server.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::support::*;

/// A sandbox whose policy holds the key `signing` (sign = true), with git, ssh-keygen (as
/// git's helper) and ssh-add allowed, and a repository `repo` whose commits are signed with
/// it; the key's path and public line.
fn signing_sandbox(uid: Option<u32>) -> (Sandbox, PathBuf, String) {
    let sb = Sandbox::builder()
        .allow_more(&["ssh-add", "ssh-keygen", "python3"])
        .build();
    let key = sb.base().join("signing");
    let public = ssh_keypair(&key, "op@example.com", uid);
    sb.append_policy(&format!(
        "[[terminal.credentials]]\nname = \"signing\"\nkind = \"ssh\"\nkey_file = \"{}\"\nsign = true\n",
        key.display()
    ));
    signed_repo(&sb, &public);
    if let Some(uid) = uid {
        sb.give_to(uid);
        for entry in walk(&sb.jail) {
            std::os::unix::fs::chown(&entry, Some(uid), Some(uid)).unwrap();
        }
    }
    (sb, key, public)
}

/// A repository `repo` in `sb`'s jail whose commits are signed with the key `public` (the
/// operator's config: `gpg.format = ssh`, `user.signingkey`, `commit.gpgsign`).
fn signed_repo(sb: &Sandbox, public: &str) {
    let repo = sb.jail.join("repo");
    std::fs::create_dir(&repo).unwrap();
    host_git(&repo, &["init", "-q", "-b", "main"]);
    let signing_key = format!("key::{public}");
    for (k, v) in [
        ("user.name", "op"),
        ("user.email", "op@example.com"),
        ("gpg.format", "ssh"),
        ("commit.gpgsign", "true"),
        ("user.signingkey", signing_key.as_str()),
    ] {
        host_git(&repo, &["config", k, v]);
    }
}

/// `git verify-commit HEAD` of `repo`, outside the sandbox, against the operator's allowed
/// signers (the key `public`), succeeds.
fn verified(sb: &Sandbox, public: &str) {
    let signers = sb.base().join("allowed_signers");
    std::fs::write(&signers, format!("op@example.com {public}\n")).unwrap();
    let verified = std::process::Command::new("git")
        .args([
            "-c",
            &format!("gpg.ssh.allowedSignersFile={}", signers.display()),
        ])
        // The repository may be the unprivileged server's: the test reads it as root.
        .args(["-c", "safe.directory=*", "verify-commit", "HEAD"])
        .current_dir(sb.jail.join("repo"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert_success(&verified);
}

/// The commit's payload as the signature covers it (its `gpgsig` header left out), hashed
/// with SHA-512, in hex: what the trail's `message_hash` must be.
fn signed_payload_hash(repo: &Path) -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import hashlib, subprocess, sys\n\
             raw = subprocess.run(['git', '-c', 'safe.directory=*', 'cat-file', 'commit', 'HEAD'], capture_output=True, check=True).stdout\n\
             head, _, body = raw.partition(b'\\n\\n')\n\
             lines, skip = [], False\n\
             for line in head.split(b'\\n'):\n\
             \x20   if line.startswith(b'gpgsig '): skip = True; continue\n\
             \x20   if skip and line.startswith(b' '): continue\n\
             \x20   skip = False; lines.append(line)\n\
             print(hashlib.sha512(b'\\n'.join(lines) + b'\\n\\n' + body).hexdigest())",
        ])
        .current_dir(repo)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The signing flow on one server: a signed commit verified outside, the trail's record of
/// it, the refusals, and the key out of reach.
async fn signs_and_refuses(sb: &Sandbox, s: &Session, key: &Path, public: &str) {
    let d = s.call("describe_policy", json!({})).await;
    assert_eq!(
        d["detail"]["ssh_keys"]["held"],
        json!([{"name": "signing", "signs_commits": true, "logs_in_to": []}]),
        "{d}"
    );
    let r = s
        .run_with(json!({"command": "git commit --allow-empty -m signed", "cwd": "repo"}))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    // Verified outside the sandbox, against the operator's allowed signers.
    verified(sb, public);
    let repo = sb.jail.join("repo");
    let signed = sb
        .find_record(|r| r["kind"] == "ssh" && r["event"] == "sign")
        .unwrap_or_else(|| panic!("no signing record: {:?}", sb.audit_records()));
    assert_eq!(signed["namespace"], "git", "{signed}");
    assert_eq!(signed["key"], "signing", "{signed}");
    assert_eq!(
        signed["message_hash"],
        json!(signed_payload_hash(&repo)),
        "{signed}"
    );
    // Refused: another namespace, and a key the agent does not hold.
    sb.write_in_jail("data.txt", "data\n");
    sb.write_in_jail("signing.pub", format!("{public}\n"));
    let other = ssh_keypair(&sb.base().join("other"), "other", None);
    sb.write_in_jail("other.pub", format!("{other}\n"));
    let refused_for = |why: &str| {
        sb.has_record(|rec| {
            rec["event"] == "sign-refused"
                && rec["reason"].as_str().is_some_and(|m| m.contains(why))
        })
    };
    for pubfile in ["signing.pub", "other.pub"] {
        let r = s
            .run_with(json!({"command": ["ssh-keygen", "-Y", "sign", "-n", "file", "-f", pubfile, "-U", "data.txt"]}))
            .await;
        assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    }
    assert!(
        refused_for("namespace"),
        "another namespace is refused and recorded"
    );
    // ssh-keygen does not ask for a key the agent does not list; a raw request does.
    let other_blob = other.split_whitespace().nth(1).unwrap();
    let raw = format!(
        "import base64, os, socket, struct\n\
         s = lambda b: struct.pack('>I', len(b)) + b\n\
         body = bytes([13]) + s(base64.b64decode({other_blob:?})) + s(b'data') + struct.pack('>I', 0)\n\
         c = socket.socket(socket.AF_UNIX); c.connect(os.environ['SSH_AUTH_SOCK'])\n\
         c.sendall(struct.pack('>I', len(body)) + body)\n\
         n = struct.unpack('>I', c.recv(4))[0]; print('answer', c.recv(n)[0])"
    );
    let r = s.py(&raw).await;
    assert_eq!(stdout_of(&r), "answer 5\n", "SSH_AGENT_FAILURE: {r}");
    assert!(
        refused_for("does not hold"),
        "a key it does not hold is refused and recorded"
    );
    // The identity list is redacted; the key's file is out of reach (the control: the
    // test reads it).
    let listed = s.run("ssh-add -L").await;
    let key_body = public.split_whitespace().nth(1).unwrap();
    assert!(stdout_of(&listed).starts_with("ssh-ed25519 "), "{listed}");
    assert!(!listed.to_string().contains(key_body), "{listed}");
    let private = std::fs::read_to_string(key).unwrap();
    let probe = format!("print(open({:?}).read())", key.display().to_string());
    let r = s.py(&probe).await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    let secret_line = private.lines().nth(1).unwrap();
    let trail = sb
        .audit_records()
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    for (what, text) in [("the trail", &trail), ("a result", &r.to_string())] {
        assert!(!text.contains(secret_line), "the key's bytes in {what}");
        assert!(!text.contains(key_body), "the public key in {what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_is_signed_through_the_servers_agent_as_root_and_unprivileged() {
    for uid in server_uids() {
        let (sb, key, public) = signing_sandbox(*uid);
        let s = match uid {
            Some(uid) => sb.session_as(*uid).await,
            None => sb.session().await,
        };
        signs_and_refuses(&sb, &s, &key, &public).await;
    }
}

/// An ssh key the policy cannot hold is refused at start, with the reason: hosts without
/// the proxy (network mode allowlist), neither hosts nor `sign`, a key file in the jail.
#[test]
fn an_ssh_key_the_server_cannot_hold_stops_the_start() {
    let sb = Sandbox::new("");
    let key = sb.base().join("k");
    ssh_keypair(&key, "k", None);
    let inside = sb.jail.join("k");
    ssh_keypair(&inside, "k", None);
    for (entry, why) in [
        (
            format!(
                "key_file = \"{}\"\nsign = true\nhosts = [\"git.example.com\"]",
                key.display()
            ),
            "mode = \"allowlist\"",
        ),
        (format!("key_file = \"{}\"", key.display()), "sign = true"),
        (
            format!("key_file = \"{}\"\nsign = true", inside.display()),
            "where commands could read it",
        ),
    ] {
        let policy = sb.base().join("p.toml");
        let text = std::fs::read_to_string(&sb.policy).unwrap();
        std::fs::write(
            &policy,
            format!("{text}\n[[terminal.credentials]]\nname = \"k\"\nkind = \"ssh\"\n{entry}\n"),
        )
        .unwrap();
        let out = safe_mcp_on(&["policy", "check", "--config"], &policy);
        assert_failed_saying(&out, why);
    }
}

/// The operator's running agent as the key's source: the policy names its socket and the
/// key's fingerprint; the server's agent decides and asks it to sign, and the commit
/// verifies as before. (As root: the operator's agent answers only its own user.)
#[tokio::test(flavor = "multi_thread")]
async fn a_key_of_the_operators_running_agent_signs_through_the_servers() {
    let sb = Sandbox::builder()
        .allow_more(&["ssh-add", "ssh-keygen", "python3"])
        .build();
    let key = sb.base().join("operator_key");
    let public = ssh_keypair(&key, "op@example.com", None);
    let socket = sb.base().join("operator-agent.sock");
    let mut agent = std::process::Command::new("ssh-agent")
        .args(["-D", "-a"])
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        socket.exists()
    });
    assert!(up, "ssh-agent did not start");
    let added = std::process::Command::new("ssh-add")
        .arg(&key)
        .env("SSH_AUTH_SOCK", &socket)
        .output()
        .unwrap();
    assert_success(&added);
    let listed = std::process::Command::new("ssh-add")
        .arg("-l")
        .env("SSH_AUTH_SOCK", &socket)
        .output()
        .unwrap();
    let fingerprint = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    std::fs::remove_file(&key).unwrap();
    sb.append_policy(&format!(
        "[[terminal.credentials]]\nname = \"operators\"\nkind = \"ssh\"\nagent = \"{}\"\nfingerprint = \"{fingerprint}\"\nsign = true\n",
        socket.display()
    ));
    signed_repo(&sb, &public);
    let s = sb.session().await;
    let r = s
        .run_with(json!({"command": "git commit --allow-empty -m signed", "cwd": "repo"}))
        .await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    verified(&sb, &public);
    assert!(
        sb.has_record(|r| r["kind"] == "ssh" && r["event"] == "sign" && r["key"] == "operators")
    );
    let _ = agent.kill();
    let _ = agent.wait();
}
