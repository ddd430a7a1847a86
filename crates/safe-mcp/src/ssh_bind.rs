//! Which SSH logins the server's agent signs (issue 54, item 2): only one bound to a
//! session with a host whose key the operator pinned for the key's entry.
//!
//! OpenSSH (8.9 and later) sends the agent `session-bind@openssh.com` before it asks for a
//! login's signature: the host's key, the session's identifier and the host's signature of
//! it. The agent verifies that signature, so the binding cannot be forged by a command that
//! talks to the socket itself, and finds the host among the pinned `known_hosts` lines. A
//! login's request then signs that session's identifier: the agent signs only when it is
//! the bound session's, and only for a key whose entry names that host. A host key nobody
//! pinned (trust on first use) binds nothing.

use ssh_agent_lib::proto::Extension;
use ssh_agent_lib::proto::extension::SessionBind;
use ssh_key::public::{KeyData, PublicKey};

/// The session a connection is bound to: its identifier, and the host its key names
/// (`None`: the host's key is pinned for no key of this agent).
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    session_id: Vec<u8>,
    host: Option<String>,
}

/// The pinned lines read: each name of a line with its key.
pub(crate) fn pinned(lines: &[String]) -> Result<Vec<(String, KeyData)>, String> {
    let mut out = Vec::new();
    for line in lines {
        let mut fields = line.split_whitespace();
        let (Some(names), Some(kind), Some(key)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(format!(
                "known_hosts line {line:?} has no name, type and key"
            ));
        };
        let public = PublicKey::from_openssh(&format!("{kind} {key}"))
            .map_err(|e| format!("known_hosts line for {names}: {e}"))?;
        for name in names.split(',') {
            out.push((name.to_ascii_lowercase(), public.key_data().clone()));
        }
    }
    Ok(out)
}

/// Binds a connection to the session `extension` names, once its signature verifies;
/// `pinned` are every key's pinned hosts.
pub(crate) fn bind<'a>(
    mut pinned: impl Iterator<Item = &'a (String, KeyData)>,
    extension: &Extension,
) -> Result<Bound, String> {
    let bind = extension
        .parse_message::<SessionBind>()
        .map_err(|e| format!("a session-bind that does not parse: {e}"))?
        .ok_or_else(|| format!("the agent takes no extension {:?}", extension.name))?;
    bind.verify_signature()
        .map_err(|e| format!("the session's binding does not verify: {e}"))?;
    if bind.is_forwarding {
        return Err("this agent is never forwarded: log in from the command itself".into());
    }
    let host = pinned
        .find(|(_, key)| *key == bind.host_key)
        .map(|(name, _)| name.clone());
    Ok(Bound {
        session_id: bind.session_id,
        host,
    })
}

/// A login with the key `name` (which may log in to `hosts`) in the session `bound`: the
/// host and the user, or why not. `data` is the request to sign: the session's identifier,
/// then `SSH_MSG_USERAUTH_REQUEST` (50) and the user.
pub(crate) fn login(
    (name, hosts): (&str, &[String]),
    bound: Option<&Bound>,
    data: &[u8],
) -> Result<(String, String), String> {
    let (session_id, rest) = string(data)
        .filter(|(_, rest)| rest.first() == Some(&50))
        .ok_or_else(|| {
            format!("key {name} signs git objects and SSH logins only; this request is neither")
        })?;
    let (user, _) =
        string(&rest[1..]).ok_or_else(|| "a login request without a user".to_owned())?;
    let Some(bound) = bound.filter(|b| b.session_id == session_id) else {
        return Err(format!(
            "a login with key {name} not bound to its session (OpenSSH 8.9 or later binds it, through the server's ssh_config): refused"
        ));
    };
    let Some(host) = &bound.host else {
        return Err(format!(
            "the host's key is pinned nowhere: key {name} logs in only to hosts whose key its [[terminal.credentials]] known_hosts pins"
        ));
    };
    if !hosts.contains(host) {
        return Err(format!(
            "key {name} may log in to {} only, not {host}: add it to the entry's hosts (and known_hosts)",
            hosts.join(", ")
        ));
    }
    Ok((host.clone(), String::from_utf8_lossy(user).into_owned()))
}

/// One SSH wire string at the front of `data`, and the rest.
pub(crate) fn string(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let rest = &data[4..];
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// `s` as an SSH wire string, for the tests that build requests.
#[cfg(test)]
pub(crate) fn wire(s: &[u8]) -> Vec<u8> {
    let mut out = (s.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A login's request in session `id` for `user` (what is after the user is not read).
    fn request(id: &[u8], user: &str) -> Vec<u8> {
        let mut data = wire(id);
        data.push(50);
        data.extend(wire(user.as_bytes()));
        data.extend(wire(b"ssh-connection"));
        data
    }

    #[test]
    fn a_login_is_signed_only_in_its_bound_session_for_a_host_of_its_key() {
        let hosts = vec!["[git.test]:2222".to_owned()];
        let key = ("deploy", hosts.as_slice());
        let bound = Bound {
            session_id: vec![7; 32],
            host: Some("[git.test]:2222".into()),
        };
        assert_eq!(
            login(key, Some(&bound), &request(&[7; 32], "git")),
            Ok(("[git.test]:2222".to_owned(), "git".to_owned()))
        );
        // Another session's identifier, no binding, an unpinned host, another host.
        let why =
            |bound: Option<&Bound>, id: &[u8]| login(key, bound, &request(id, "git")).unwrap_err();
        assert!(why(Some(&bound), &[8; 32]).contains("not bound"));
        assert!(why(None, &[7; 32]).contains("not bound"));
        let unpinned = Bound {
            host: None,
            ..bound.clone()
        };
        assert!(why(Some(&unpinned), &[7; 32]).contains("pinned nowhere"));
        let other = Bound {
            host: Some("other.test".into()),
            ..bound.clone()
        };
        assert!(why(Some(&other), &[7; 32]).contains("not other.test"));
        // Not a login's request at all.
        assert!(
            login(key, Some(&bound), b"SSHSIG")
                .unwrap_err()
                .contains("neither")
        );
    }

    #[test]
    fn pinned_lines_name_each_host_with_its_key() {
        let line = "[git.test]:2222,git.test ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ6uOyGB5u6uM7Q1MwZL2n6j0HbY3Q4m1eXcW6cV2bS";
        let found = pinned(&[line.to_owned()]).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["[git.test]:2222", "git.test"]);
        assert!(pinned(&["git.test ssh-ed25519".to_owned()]).is_err());
        use safe_mcp_core::credentials::known_host_name;
        assert_eq!(known_host_name("git.test", 22), "git.test");
        assert_eq!(known_host_name("git.test", 2222), "[git.test]:2222");
    }
}
