//! The profiles' caches (round 3, issue 27): one set per jail, their tools' configuration
//! files read-only placeholders, and a shared cache only as the operator's named choice.

use serde_json::json;

use super::builders::{session_with, stdout, walkdir};
use super::support::{Sandbox, Session};

/// A sandbox allowing `sh` (an interpreter: only the kernel stands in its way) with
/// `profiles`, its caches beneath `cache_dir`, and `namespaces`.
fn with_profiles(
    profiles: &str,
    cache_dir: &std::path::Path,
    extra: &str,
    namespaces: &str,
) -> Sandbox {
    // The exec allowlist off: the scripts plant with rm, mv and chmod, and what must
    // stop them is the caches' own read-only binding, not a refused exec.
    Sandbox::builder()
        .allow(&["echo", "cat", "sh"])
        .roomy(120)
        .sandbox(&format!(
            "namespaces = \"{namespaces}\"\nexec_allowlist = false"
        ))
        .terminal(&format!(
            "profiles = [{profiles}]\ncache_dir = \"{}\"\n{extra}",
            cache_dir.display()
        ))
        .build()
}

/// What a command prints for `script`, with its code.
pub(super) async fn sh(s: &Session, script: &str) -> (String, String) {
    let r = s.run_with(json!({"command": ["sh", "-c", script]})).await;
    (
        r["code"].as_str().unwrap_or_default().to_owned(),
        stdout(&r).to_owned(),
    )
}

/// Tries every way a command could plant the tool configuration of a cache: write it,
/// replace it, remove it, rename it, and the same for the other names the tool reads.
const PLANT: &str = r#"for f in "$@"; do
  p="$CACHE/$f"
  (echo '[build]' > "$p") 2>/dev/null && echo "wrote $f"
  rm -f "$p" 2>/dev/null && echo "removed $f"
  mv "$p" "$CACHE/moved" 2>/dev/null && echo "moved $f"
  chmod 644 "$p" 2>/dev/null && (echo x >> "$p") 2>/dev/null && echo "chmod $f"
done
mv "$CACHE" "$CACHE.x" 2>/dev/null && echo "moved the cache"
echo done"#;

/// Round 3 (issue 27), item 1 (High): one project's model cannot configure what another project's cache runs.
/// Caches are per jail by default; the tool configuration files inside each cache are
/// read-only placeholders that no command can write, replace or remove; sharing is the
/// operator's named choice.
#[tokio::test(flavor = "multi_thread")]
async fn profile_caches_are_per_jail_and_their_tool_config_is_read_only() {
    // The python profile: its interpreter is the system's, so an unprivileged server has it.
    let path = "/usr/bin:/bin";
    let root = rustix::process::geteuid().is_root();
    let uids: &[Option<u32>] = if root { &[None, Some(65534)] } else { &[None] };
    for &uid in uids {
        // One cache directory named by both policies, as two projects of one user would.
        let shared = tempfile::tempdir().unwrap();
        let cache = std::fs::canonicalize(shared.path()).unwrap();
        let a = with_profiles("\"python\"", &cache, "", "auto");
        let b = with_profiles("\"python\"", &cache, "", "auto");
        if let Some(uid) = uid {
            for sb in [&a, &b] {
                sb.give_to(uid);
            }
            std::os::unix::fs::chown(&cache, Some(uid), Some(uid)).unwrap();
            for entry in walkdir(&cache) {
                std::os::unix::fs::lchown(&entry, Some(uid), Some(uid)).unwrap();
            }
        }
        let sa = session_with(&a, path, uid).await;
        let sb_ = session_with(&b, path, uid).await;
        let (_, cache_a) = sh(&sa, "echo $PIP_CACHE_DIR").await;
        let (_, cache_b) = sh(&sb_, "echo $PIP_CACHE_DIR").await;
        assert!(cache_a.starts_with(cache.to_str().unwrap()), "{cache_a}");
        assert_ne!(cache_a, cache_b, "two jails share one cache");
        assert!(cache_a.contains("/jails/jail-"), "{cache_a}");
        // A's model tries to plant what B's tool would read: it reaches only A's cache, and
        // even there the placeholders hold.
        let (code, out) = sh(
            &sa,
            &format!("CACHE=$PIP_CACHE_DIR; set -- pip.conf; {PLANT}"),
        )
        .await;
        assert_eq!(code, "OK");
        assert_eq!(out, "done\n", "uid {uid:?}: {out}");
        let conf = std::path::Path::new(cache_a.trim()).join("pip.conf");
        assert_eq!(std::fs::metadata(&conf).unwrap().len(), 0);
        // The cache itself stays writable: it is a cache.
        let (_, out) = sh(
            &sa,
            "echo w > $PIP_CACHE_DIR/entry && cat $PIP_CACHE_DIR/entry",
        )
        .await;
        assert_eq!(out, "w\n");
        drop((sa, sb_));
    }
    // The control: with the host view nothing binds the placeholder, and the same script
    // gets through (what the fallback does not hold, and THREAT_MODEL says).
    let shared = tempfile::tempdir().unwrap();
    let cache = std::fs::canonicalize(shared.path()).unwrap();
    let c = with_profiles("\"python\"", &cache, "", "off");
    if !root {
        return;
    }
    let s = session_with(&c, path, None).await;
    let (_, out) = sh(
        &s,
        &format!("CACHE=$PIP_CACHE_DIR; set -- pip.conf; {PLANT}"),
    )
    .await;
    assert!(out.contains("removed pip.conf"), "{out}");
}

/// Round 3 (issue 27), item 1: with `shared_cache = true` two projects share the cache, as the operator chose,
/// and `describe_policy` says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_cache_is_the_operators_named_choice() {
    let shared = tempfile::tempdir().unwrap();
    let cache = std::fs::canonicalize(shared.path()).unwrap();
    let a = with_profiles("\"python\"", &cache, "shared_cache = true", "auto");
    let b = with_profiles("\"python\"", &cache, "shared_cache = true", "auto");
    let sa = session_with(&a, "/usr/bin:/bin", None).await;
    let sb_ = session_with(&b, "/usr/bin:/bin", None).await;
    let (_, cache_a) = sh(&sa, "echo $PIP_CACHE_DIR").await;
    let (_, cache_b) = sh(&sb_, "echo $PIP_CACHE_DIR").await;
    assert_eq!(cache_a, cache_b);
    assert_eq!(cache_a.trim(), cache.join("pip").to_str().unwrap());
    let d = sa.call("describe_policy", json!({"verbose": true})).await;
    let text = d["detail"].to_string();
    assert!(text.contains("shared_cache = true"), "{text}");
    // Shared or not, the placeholders hold.
    let (_, out) = sh(
        &sa,
        &format!("CACHE=$PIP_CACHE_DIR; set -- pip.conf; {PLANT}"),
    )
    .await;
    assert_eq!(out, "done\n", "{out}");
}
