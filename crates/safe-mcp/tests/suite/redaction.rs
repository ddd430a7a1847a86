//! Redaction over a real MCP session: secrets leave neither the result nor the trail, not
//! in part at the cap or a read boundary, not in a refusal that echoes them, and every
//! class of round-2 finding holds through a process session.

use super::builders::{python_sandbox, stdout};
use serde_json::json;

use super::support::{Sandbox, stdout_of};

#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_redacted_in_output_and_in_the_audit_trail() {
    let sb = Sandbox::new("");
    sb.write_in_jail("creds", "token ghp_0123456789abcdefghijklmnopqrstuvwxyz\n");
    let s = sb.session().await;
    let r = s.run("cat creds").await;
    let out = stdout_of(&r);
    assert!(!out.contains("ghp_0123456789"), "{out}");
    assert!(out.contains("[REDACTED:github_pat]"));
    let r = s.run("echo DB_PASSWORD=hunter2hunter2").await;
    assert!(stdout_of(&r).contains("[REDACTED:generic_secret_assignment]"));
    let trail = std::fs::read_to_string(&sb.audit).unwrap();
    assert!(
        !trail.contains("hunter2hunter2"),
        "the audited command must be redacted"
    );
    assert!(
        !trail.contains("ghp_0123"),
        "output never reaches the audit trail"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_straddling_the_cap_or_a_read_boundary_never_leaks_in_part() {
    let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    let fragment = "ghp_0123";
    let sb = Sandbox::new(""); // max_output_bytes = 4096: a quarter from the start, the rest from the end
    // Straddles the head's cut of a stream kept whole: the whole token is read, redacted,
    // then cut.
    sb.write_in_jail(
        "cap.txt",
        format!("{} {token}\n{}", "x".repeat(1019), "end\n".repeat(2000)),
    );
    // A flood the executor kept only the start and the end of (the capture limit is
    // cap + 64 KiB: a quarter, 17,408 bytes, from the start): a token across the head's end,
    // and one across the tail's start, are never shown in part.
    let head = 4096 / 4 + 16384;
    let tail = 4096 - 4096 / 4 + 3 * 16384;
    let middle = 200_000;
    sb.write_in_jail(
        "flood.txt",
        format!(
            "{} {token} {} {token} {}",
            "y".repeat(head - 13),
            "z".repeat(middle),
            "w".repeat(tail - 29)
        ),
    );
    let s = sb.session().await;
    for file in ["cap.txt", "flood.txt"] {
        let r = s.run(&format!("cat {file}")).await;
        assert_eq!(r["code"], "OUTPUT_TRUNCATED", "{file}: {r}");
        let out = stdout_of(&r);
        assert!(
            !out.contains(fragment) && !out.contains("0123456789abcdef"),
            "{file} leaked part of the token"
        );
    }

    // A token across the executor's 64 KiB read-chunk boundary is redacted whole.
    let big = Sandbox::builder()
        .limits("timeout_seconds = 10\nmax_output_bytes = 200000")
        .build();
    std::fs::write(
        big.jail.join("chunk.txt"),
        format!("{} {token}\n", "w".repeat(65536 - 11)),
    )
    .unwrap();
    let s = big.session().await;
    let r = s.run("cat chunk.txt").await;
    assert_eq!(r["code"], "OK", "{r}");
    let out = stdout_of(&r);
    assert!(
        !out.contains(fragment) && out.ends_with("[REDACTED:github_pat]\n"),
        "{}",
        &out[out.len() - 60..]
    );
}

/// A refused or explained command echoes its arguments in `reason` and `detail`; a secret
/// among them comes back redacted there too, as it is in the trail.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_and_explanations_redact_the_arguments_they_echo() {
    let (sb, s) = Sandbox::started("").await;
    let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    for (tool, command) in [
        ("run_command", format!("cat /etc/{token}")),
        ("explain_command", format!("cat /etc/{token}")),
        ("run_command", format!("frobnicate --token {token}")),
        ("explain_command", format!("echo {token}")),
    ] {
        let result = s.raw_call(tool, json!({ "command": command })).await;
        let envelope = super::support::envelope_of(&result);
        let text = envelope.to_string();
        assert!(!text.contains("ghp_0123456789"), "{tool} {command}: {text}");
        assert!(text.contains("[REDACTED:github_pat]"), "{tool}: {text}");
    }
    let trail = std::fs::read_to_string(&sb.audit).unwrap();
    assert!(!trail.contains("ghp_0123456789"), "{trail}");
}

/// The redaction classes of the round-2 review, end to end: what a command prints or is
/// given comes back without the secret, and what is not a secret comes back whole.
#[tokio::test(flavor = "multi_thread")]
async fn redaction_classes_hold_over_a_session() {
    let sb = Sandbox::builder()
        .allow_more(&["tail", "printf"])
        .roomy(10)
        .build();
    let key = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:1024",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap());
    let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    sb.write_in_jail("colored.txt", format!("token: \u{1b}[32m{token}\u{1b}[0m\nPWD=/srv/app\nSet-Cookie: session=9f8e7d6c5b4a39281706f5e4d3c2b1a0; Path=/; HttpOnly\n"));
    let s = sb.session().await;
    let r = s.run("cat colored.txt").await;
    let out = stdout_of(&r);
    assert!(!out.contains("ghp_0123456789"), "{out}");
    assert!(
        out.contains("PWD=/srv/app"),
        "a directory is not a password: {out}"
    );
    assert!(
        out.contains("Path=/; HttpOnly"),
        "cookie attributes stay: {out}"
    );
    assert!(!out.contains("9f8e7d6c5b4a39281706f5e4d3c2b1a0"), "{out}");
    // A secret as the word after --password: redacted in the echo and in the trail.
    let r = s.run("echo --password hunter2-Xq9-correct").await;
    assert!(!r.to_string().contains("hunter2-Xq9-correct"), "{r}");
    assert!(
        !std::fs::read_to_string(&sb.audit)
            .unwrap()
            .contains("hunter2-Xq9-correct")
    );
    // URL-encoded basic-auth credentials.
    let r = s
        .run("echo https://deploy:p%40ssw0rd%21Secret@git.example.com/repo")
        .await;
    assert!(!r.to_string().contains("p%40ssw0rd"), "{r}");
    match key {
        Some(key) => {
            sb.write_in_jail("key.pem", &key);
            let body = key.lines().nth(2).unwrap().to_owned();
            // The BEGIN line dropped: the body is still a key.
            let r = s.run("tail -n +2 key.pem").await;
            let out = stdout_of(&r);
            assert!(!out.contains(&body[..24]), "{out}");
            assert!(out.contains("[REDACTED:"), "{out}");
        }
        None => super::support::skip("skipping the key-body case: openssl is not installed here"),
    }
}

/// Round 3 (issue 27), item 15: in the spaced `key = value` form a secret's value ends at its line's end; the
/// next line (`region = …`) stays whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_redacted_value_ends_at_its_lines_end() {
    let sb = Sandbox::new("");
    let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    sb.write_in_jail(
        "credentials",
        format!("[default]\naws_secret_access_key = {key}\nregion = eu-west-1\noutput = json\n"),
    );
    let s = sb.session().await;
    let r = s.run("cat credentials").await;
    assert_eq!(r["code"], "OK", "{r}");
    let out = stdout(&r);
    assert!(!out.contains(key), "{out}");
    assert!(
        out.contains("]\nregion = eu-west-1\noutput = json\n"),
        "the next line was swallowed: {out:?}"
    );
}

/// Round 3 (issue 27), item 14: a secret a session prints in two parts, more than the quiet time apart, never
/// comes back whole across reads: within three quiet times the token a line ends in waits
/// for the rest; after a longer pause its first part is shown and the rest is judged at the
/// join (the marker), never in the clear.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_printed_in_two_parts_never_comes_back_whole() {
    let sb = python_sandbox("auto", "");
    let s = sb.session().await;
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    for pause in ["0.6", "1.5"] {
        let script = format!(
            "import sys, time\nsys.stdout.write('token {}'); sys.stdout.flush()\ntime.sleep({pause})\nsys.stdout.write('{}\\n'); sys.stdout.flush()\ntime.sleep(0.2)\n",
            &secret[..14],
            &secret[14..]
        );
        let handle = s
            .start_process(json!({"command": ["python3", "-c", script]}))
            .await;
        let mut all = String::new();
        for _ in 0..40 {
            let r = s.read_process(&handle, json!({"wait_seconds": 1})).await;
            all.push_str(stdout(&r));
            if r["detail"]["running"] == false && r["detail"]["stdout"] == "" {
                break;
            }
        }
        assert!(all.starts_with("token "), "{pause}: {all}");
        assert!(!all.contains(&secret[14..]), "{pause}: {all}");
        assert!(all.contains("[REDACTED:github_pat]"), "{pause}: {all}");
        if pause == "0.6" {
            assert_eq!(all, "token [REDACTED:github_pat]\n", "{pause}");
        }
    }
}
