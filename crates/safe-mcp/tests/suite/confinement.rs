//! Kernel confinement seen from outside: what a command cannot do even when the policy's
//! argument checks are bypassed (here by allowlisting `sh`, which opens paths on its own).

use std::io::Read;
use std::time::Duration;

use serde_json::json;

use super::support::{Sandbox, Session, eventually, live_processes_with};

fn sh(script: &str) -> serde_json::Value {
    json!({"command": ["sh", "-c", script]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_cannot_read_or_write_outside_the_jail() {
    let sb = Sandbox::new("");
    let outside = sb.base().join("outside-secret.txt");
    std::fs::write(&outside, "top secret").unwrap();
    let s = sb.session().await;

    let r = s
        .call("run_command", sh(&format!("cat {}", outside.display())))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_ne!(r["detail"]["exit_code"], 0);
    assert!(
        r["detail"]["stderr"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{r}"
    );
    assert!(
        !r["detail"]["stdout"]
            .as_str()
            .unwrap()
            .contains("top secret")
    );

    // A symlink the command makes inside the jail does not help.
    let r = s
        .call(
            "run_command",
            sh(&format!("ln -s {} link && cat link", outside.display())),
        )
        .await;
    assert!(
        !r["detail"]["stdout"]
            .as_str()
            .unwrap()
            .contains("top secret"),
        "{r}"
    );

    let target = sb.base().join("written-outside");
    let r = s
        .call("run_command", sh(&format!("echo x > {}", target.display())))
        .await;
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert!(!target.exists());

    // Inside the jail, reading and writing work.
    let r = s
        .call("run_command", sh("echo inside > made.txt && cat made.txt"))
        .await;
    assert_eq!(r["detail"]["stdout"], "inside\n", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_cannot_connect_to_tcp_on_loopback() {
    let sb = Sandbox::new("");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = std::fs::read_to_string(&sb.policy)
        .unwrap()
        .replace("\"sh\",", "\"sh\", \"bash\",");
    std::fs::write(&sb.policy, policy).unwrap();
    let s = sb.session().await;
    let args = json!({"command": ["bash", "-c", format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")]});
    let r = s.call("run_command", args).await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(
        !r["detail"]["stdout"]
            .as_str()
            .unwrap()
            .contains("connected"),
        "{r}"
    );
    let mut accepted = listener.accept();
    if let Ok((stream, _)) = &mut accepted {
        let mut buf = [0u8; 1];
        let _ = stream.read(&mut buf);
    }
    assert!(
        accepted.is_err(),
        "the listener must never see a connection"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_child_has_no_new_privs_and_a_seccomp_filter() {
    let sb = Sandbox::new("");
    let s = sb.session().await;
    let call = s.call(
        "run_command",
        json!({"command": "sleep 4.731", "timeout_seconds": 8}),
    );
    let probe = async {
        assert!(eventually(5, || !live_processes_with("sleep 4.731").is_empty()).await);
        let pid = live_processes_with("sleep 4.731")[0];
        std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap()
    };
    let (r, status) = tokio::join!(call, probe);
    assert_eq!(r["code"], "OK");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
}

/// Landlock allows at most 16 stacked domains. A server started inside 16 permissive
/// domains cannot add its own, so every command must be refused with SANDBOX_UNAVAILABLE.
#[tokio::test(flavor = "multi_thread")]
async fn sandbox_unavailable_when_landlock_cannot_be_stacked() {
    use landlock::{
        ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, path_beneath_rules,
    };
    let sb = Sandbox::new("");
    let mut layers = Vec::new();
    for _ in 0..16 {
        let all = AccessFs::from_all(ABI::V1);
        let created = Ruleset::default()
            .handle_access(all)
            .unwrap()
            .create()
            .unwrap()
            .add_rules(path_beneath_rules(["/"], all))
            .unwrap();
        layers.push(Some(created));
    }
    let s = Session::start(&sb.policy, move |c| {
        // SAFETY: the closure only takes prepared rulesets and calls landlock_restrict_self.
        unsafe {
            c.pre_exec(move || {
                for layer in layers.iter_mut() {
                    if let Some(r) = layer.take() {
                        r.restrict_self()
                            .map_err(|_| std::io::Error::from_raw_os_error(libc_eperm()))?;
                    }
                }
                Ok(())
            });
        }
    })
    .await;
    let r = s.run("touch sandbox-marker").await;
    assert_eq!(r["code"], "SANDBOX_UNAVAILABLE", "{r}");
    assert_eq!(r["ok"], false);
    assert!(!sb.jail.join("sandbox-marker").exists());
    tokio::time::sleep(Duration::from_millis(10)).await;
}

fn libc_eperm() -> i32 {
    1
}
