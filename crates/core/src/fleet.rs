//! A server's name in a fleet: the shape a `server_id` must have, and one made at start
//! when the operator named none.
//!
//! A leaf. Several servers behind one balancer, shipping to one receiver, tell their records
//! apart by this name (each record's `server`, the chain it belongs to), and a handle, plan id
//! or ticket names the replica that owns it with it.

/// Longest server id, in bytes.
pub const MAX_SERVER_ID: usize = 64;

/// Whether `id` is 1 to [`MAX_SERVER_ID`] of `A-Z a-z 0-9 . _ -`: it stands in a handle, a
/// log line and a file name as it is.
pub fn valid_server_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SERVER_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A fresh server id, `s-` and 12 random hex digits; one made from the clock and the
/// process id when the kernel's random source cannot be read.
pub fn generated_server_id() -> String {
    match crate::random::hex(6) {
        Ok(hex) => format!("s-{hex}"),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            format!("s-{:x}-{nanos:x}", std::process::id())
        }
    }
}

/// The `server` a sealed trail line names, when it names a valid one.
pub fn server_named_in(line: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()?
        .get("server")?
        .as_str()
        .filter(|s| valid_server_id(s))
        .map(str::to_owned)
}

/// `id` as owned by `server`: `id@server` (`@` is in no server id), or `id` alone where
/// the server has no name.
pub fn owned(id: &str, server: &str) -> String {
    if server.is_empty() {
        id.to_owned()
    } else {
        format!("{id}@{server}")
    }
}

/// The server another than `here` that `handle` names as its owner, if it names one: the
/// request reached another replica than the one that made it.
pub fn elsewhere<'a>(handle: &'a str, here: &str) -> Option<&'a str> {
    handle
        .rsplit_once('@')
        .map(|(_, owner)| owner)
        .filter(|owner| *owner != here && valid_server_id(owner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_id_is_a_plain_name() {
        for ok in [
            "a",
            "safe-mcp-7d9f8c-x2k4p",
            "replica_1.eu",
            &"x".repeat(64),
        ] {
            assert!(valid_server_id(ok), "{ok}");
        }
        for bad in ["", "a b", "a/b", "ä", "a\n", &"x".repeat(65)] {
            assert!(!valid_server_id(bad), "{bad:?}");
        }
        let made = generated_server_id();
        assert!(valid_server_id(&made) && made.starts_with("s-"), "{made}");
        assert_ne!(made, generated_server_id());
    }

    #[test]
    fn an_owned_id_names_its_server_and_only_another_is_elsewhere() {
        let handle = owned("9f3a", "replica-a");
        assert_eq!(handle, "9f3a@replica-a");
        assert_eq!(elsewhere(&handle, "replica-a"), None);
        assert_eq!(elsewhere(&handle, "replica-b"), Some("replica-a"));
        assert_eq!(
            elsewhere("9f3a", "replica-b"),
            None,
            "an unowned id is judged here"
        );
        // A suffix no server could have is not echoed as an owner.
        assert_eq!(elsewhere("9f3a@a\nforged line", "replica-b"), None);
        assert_eq!(owned("9f3a", ""), "9f3a");
    }
}
