//! The live scopes without a server: granted, used, bound to their caller and session,
//! kept in and read back from the approvals file, revoked, expired, and owned.
use super::*;

const LIFE: Lifetimes = Lifetimes {
    session_seconds: 3600,
    rule_seconds: 86_400,
};

fn push(branch: &str, cwd: &str) -> OwnedCall {
    OwnedCall::Command {
        tool: "run_command".into(),
        stages: vec![(
            PathBuf::from("/usr/bin/git"),
            ["git", "push", "origin", branch]
                .map(str::to_owned)
                .to_vec(),
        )],
        cwd: PathBuf::from(cwd),
    }
}

fn grant<'a>(kind: ScopeKind, free: &'a [usize], caller: &'a str, session: &'a str) -> Grant<'a> {
    Grant {
        kind,
        free,
        caller,
        session,
        via: "form",
        approver_uid: None,
    }
}

#[test]
fn a_session_scope_covers_its_shape_for_its_caller_and_session_only() {
    let scopes = Scopes::load("a", Path::new("/j"), None, LIFE).unwrap();
    let s = scopes
        .grant(
            &push("main", "/j/p"),
            &grant(ScopeKind::Session, &[3], "alice", "s1"),
            str::to_owned,
        )
        .unwrap();
    assert!(
        s.id.ends_with("@a") && s.described.contains("<any name>"),
        "{s:?}"
    );
    let used = scopes
        .covering(&push("feature", "/j/p/sub"), "alice", "s1")
        .unwrap();
    assert_eq!((used.id.as_str(), used.uses), (s.id.as_str(), 1));
    assert!(
        scopes
            .covering(&push("--force", "/j/p"), "alice", "s1")
            .is_none()
    );
    assert!(
        scopes
            .covering(&push("main", "/j"), "alice", "s1")
            .is_none()
    );
    assert!(
        scopes
            .covering(&push("main", "/j/p"), "bob", "s1")
            .is_none()
    );
    assert!(
        scopes
            .covering(&push("main", "/j/p"), "alice", "s2")
            .is_none()
    );
    scopes.end_session("s1");
    assert!(
        scopes
            .covering(&push("main", "/j/p"), "alice", "s1")
            .is_none()
    );
    assert_eq!(
        scopes
            .grant(
                &push("main", "/j/p"),
                &grant(ScopeKind::Once, &[], "", ""),
                str::to_owned
            )
            .err(),
        Some(ScopeError::Once)
    );
}

#[test]
fn a_rule_is_kept_in_the_file_read_back_revoked_and_expires() {
    let (_guard, dir) = crate::testing::scratch(&[]);
    let file = dir.join("policy.toml.scopes.json");
    let scopes = Scopes::load("a", Path::new("/j"), Some(&file), LIFE).unwrap();
    let rule = scopes
        .grant(
            &push("main", "/j/p"),
            &grant(ScopeKind::Rule, &[], "alice", "s1"),
            str::to_owned,
        )
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Another session of the same caller, and a server started again, use it.
    let again = Scopes::load("a", Path::new("/j"), Some(&file), LIFE).unwrap();
    assert!(
        again
            .covering(&push("main", "/j/p"), "alice", "s9")
            .is_some()
    );
    // Another replica reading the same file neither applies nor revokes it.
    let other = Scopes::load("b", Path::new("/j"), Some(&file), LIFE).unwrap();
    assert!(
        other
            .covering(&push("main", "/j/p"), "alice", "s9")
            .is_none()
    );
    assert_eq!(
        other
            .elsewhere_covering(&push("main", "/j/p"), "alice")
            .map(|s| s.id),
        Some(rule.id.clone())
    );
    assert!(matches!(
        other.revoke(&rule.id),
        Err(ScopeError::Elsewhere { .. })
    ));
    again.revoke(&rule.id).unwrap();
    assert!(
        again
            .covering(&push("main", "/j/p"), "alice", "s9")
            .is_none()
    );
    let after = Scopes::load("a", Path::new("/j"), Some(&file), LIFE).unwrap();
    assert!(after.list().is_empty(), "the revocation is kept");
    assert!(matches!(
        after.revoke(&rule.id),
        Err(ScopeError::Unknown(_))
    ));
    // A rule of no lifetime has expired at once: enforced at every use.
    let short = Scopes::load(
        "a",
        Path::new("/j"),
        Some(&file),
        Lifetimes {
            rule_seconds: 0,
            ..LIFE
        },
    )
    .unwrap();
    short
        .grant(
            &push("main", "/j/p"),
            &grant(ScopeKind::Rule, &[], "alice", ""),
            str::to_owned,
        )
        .unwrap();
    assert!(short.covering(&push("main", "/j/p"), "alice", "").is_none());
    // A file that is not scopes stops the server rather than drop rules.
    std::fs::write(&file, "{not json").unwrap();
    let why = Scopes::load("a", Path::new("/j"), Some(&file), LIFE).unwrap_err();
    assert!(why.contains("not a list of scopes"), "{why}");
}
