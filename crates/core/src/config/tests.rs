//! Unit tests of the policy loader: both layouts, environment overrides, every startup
//! failure.
//!
//! Owns nothing but tests. It must never run a policy example (that is tested in
//! [`crate::load`]) nor touch the process environment: every test injects its [`Env`].

use std::ffi::OsString;

use super::*;

fn no_env(_: &str) -> Option<OsString> {
    None
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("jail")).unwrap();
        std::fs::create_dir(dir.path().join("inbox")).unwrap();
        Fixture { dir }
    }
    fn load(&self, text: &str, section: Section) -> Result<Policy, ConfigError> {
        self.load_env(text, section, &no_env)
    }
    fn load_env(&self, text: &str, section: Section, env: &dyn Env) -> Result<Policy, ConfigError> {
        let path = self.dir.path().join("policy.toml");
        std::fs::write(&path, text).unwrap();
        super::read(Some(&path), env, section)
    }
}

const SECTIONED: &str = r#"
audit_log = "audit.jsonl"
[terminal]
jail_root = "jail"
[terminal.allowlist]
commands = ["ls", "git"]
[terminal.denylist]
commands = ["rm"]
[[terminal.rules]]
command = "git"
deny_args = ["push --force"]
reason = "history"
"#;

#[test]
fn sectioned_layout_resolves_relative_to_the_file() {
    let f = Fixture::new();
    let p = f.load(SECTIONED, Section::Terminal).unwrap();
    let t = p.terminal.unwrap();
    let base = std::fs::canonicalize(f.dir.path()).unwrap();
    assert_eq!(t.jail_root, base.join("jail"));
    assert_eq!(p.audit.log.unwrap(), base.join("audit.jsonl"));
    assert!(t.allow.contains("git") && t.deny.contains("rm"));
    assert_eq!(t.rules[0].deny_args, ["push --force"]);
    assert_eq!(t.sandbox.mode, SandboxMode::Enforce);
    assert_eq!(p.audit.fail_mode, AuditFailMode::Closed);
}

#[test]
fn flat_layout_loads_as_the_terminal_section() {
    let f = Fixture::new();
    let text = "audit_log = \"a.jsonl\"\njail_root = \"jail\"\n[allowlist]\ncommands = [\"ls\"]\n[denylist]\ncommands = [\"rm\"]\n[[rules]]\ncommand = \"ls\"\ndeny_args = [\"-R\"]\n";
    let t = f.load(text, Section::Terminal).unwrap().terminal.unwrap();
    assert!(t.allow.contains("ls") && t.deny.contains("rm"));
    assert_eq!(t.rules.len(), 1);
    let mixed = format!("{text}[terminal]\njail_root = \"jail\"\n");
    assert!(matches!(
        f.load(&mixed, Section::Terminal),
        Err(ConfigError::Invalid { .. })
    ));
}

#[test]
fn env_overrides() {
    let f = Fixture::new();
    let other = f.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let other_s = other.clone().into_os_string();
    let env = move |k: &str| match k {
        "SAFE_MCP_JAIL_ROOT" => Some(other_s.clone()),
        "SAFE_MCP_ALLOW_COMMANDS" => Some("echo, cat,,".into()),
        "SAFE_MCP_AUDIT_FAIL_MODE" => Some("open".into()),
        _ => None,
    };
    let p = f.load_env(SECTIONED, Section::Terminal, &env).unwrap();
    let t = p.terminal.unwrap();
    assert_eq!(t.jail_root, std::fs::canonicalize(other).unwrap());
    assert_eq!(t.allow.iter().cloned().collect::<Vec<_>>(), ["cat", "echo"]);
    assert_eq!(p.audit.fail_mode, AuditFailMode::Open);
}

#[test]
fn startup_failures() {
    let f = Fixture::new();
    assert!(matches!(
        read(None, &no_env, Section::Terminal),
        Err(ConfigError::NoPolicyPath)
    ));
    let missing = f.dir.path().join("nope.toml");
    assert!(matches!(
        read(Some(&missing), &no_env, Section::Terminal),
        Err(ConfigError::Read { .. })
    ));
    assert!(matches!(
        f.load("[terminal", Section::Terminal),
        Err(ConfigError::Parse { .. })
    ));
    let unknown = SECTIONED.replace("[terminal.allowlist]", "[terminal.allowlist]\ncomands = []");
    let err = f.load(&unknown, Section::Terminal).unwrap_err().to_string();
    assert!(err.contains("comands"), "{err}");
    let no_root = SECTIONED.replace("jail_root = \"jail\"", "");
    assert!(matches!(
        f.load(&no_root, Section::Terminal),
        Err(ConfigError::RootUnset { .. })
    ));
    let file_root = SECTIONED.replace("jail_root = \"jail\"", "jail_root = \"policy.toml\"");
    assert!(matches!(
        f.load(&file_root, Section::Terminal),
        Err(ConfigError::RootNotDirectory { .. })
    ));
    let inside = SECTIONED.replace("audit.jsonl", "jail/audit.jsonl");
    assert!(matches!(
        f.load(&inside, Section::Terminal),
        Err(ConfigError::InsideRoot { .. })
    ));
    let regex =
        format!("{SECTIONED}[redaction]\nextra_patterns = [{{ name = \"x\", regex = \"(\" }}]\n");
    assert!(
        f.load(&regex, Section::Terminal)
            .unwrap_err()
            .to_string()
            .contains("regex")
    );
    let unlabelled = format!(
        "{SECTIONED}[files]\nworkspace_root = \"inbox\"\n[[files.skip]]\nwhen = [\"dotfile\"]\nreason = \"x\"\n"
    );
    assert!(
        f.load(&unlabelled, Section::Files)
            .unwrap_err()
            .to_string()
            .contains("layer")
    );
    assert!(matches!(
        f.load(SECTIONED, Section::Files),
        Err(ConfigError::MissingSection("files"))
    ));
    let no_audit = SECTIONED.replace("audit_log = \"audit.jsonl\"", "");
    assert!(
        f.load(&no_audit, Section::Terminal)
            .unwrap_err()
            .to_string()
            .contains("audit_log")
    );
    let slash = SECTIONED.replace("\"ls\", \"git\"", "\"/bin/ls\"");
    assert!(
        f.load(&slash, Section::Terminal)
            .unwrap_err()
            .to_string()
            .contains("bare program")
    );
    let jail_path = SECTIONED.replace(
        "[terminal.allowlist]",
        "path = [\"jail\"]\n[terminal.allowlist]",
    );
    assert!(f.load(&jail_path, Section::Terminal).is_err());
}

#[test]
fn files_starts_without_terminal() {
    let f = Fixture::new();
    let text =
        "audit_log = \"a.jsonl\"\n[files]\nworkspace_root = \"inbox\"\njournal = \"j.json\"\n";
    let p = f.load(text, Section::Files).unwrap();
    assert!(p.terminal.is_none());
    assert!(p.files.unwrap().journal.is_some());
    let bad = text.replace("\"j.json\"", "\"inbox/j.json\"");
    assert!(matches!(
        f.load(&bad, Section::Files),
        Err(ConfigError::InsideRoot { .. })
    ));
}

const FILES: &str =
    "audit_log = \"a.jsonl\"\n[files]\nworkspace_root = \"inbox\"\njournal = \"j.json\"\n";

#[test]
fn skip_conditions_keep_their_spellings() {
    let spelt = [
        "unsafe-name",
        "dotfile",
        "installer",
        "executable",
        "app-bundle",
        "system-file",
        "directory",
        "sensitive",
        "tool-config",
        "recent",
        "partial-download",
        "hardlink",
        "uncategorized",
    ];
    let all: Vec<&str> = SkipCondition::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(all, spelt);
    for c in SkipCondition::ALL {
        assert_eq!(c.as_str().parse::<SkipCondition>(), Ok(c));
    }
    let f = Fixture::new();
    let text = format!(
        "{FILES}[[files.skip]]\nlayer = \"protection\"\nwhen = [{}]\nreason = \"all\"\n",
        spelt.map(|s| format!("{s:?}")).join(", ")
    );
    let files = f.load(&text, Section::Files).unwrap().files.unwrap();
    assert_eq!(files.skip[0].when, SkipCondition::ALL);
    assert_eq!(files.skip[0].layer, SkipLayer::Protection);
}

#[test]
fn an_unknown_skip_condition_fails_to_load_naming_it() {
    let f = Fixture::new();
    let text = format!(
        "{FILES}[[files.skip]]\nlayer = \"protection\"\nwhen = [\"dotfile\"]\nreason = \"x\"\n[[files.skip]]\nlayer = \"protection\"\nwhen = [\"sensitive\", \"sensitve\"]\nreason = \"typo\"\n"
    );
    let err = f.load(&text, Section::Files).unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownCondition { key, error }
            if key == "files.skip[1].when" && error.0 == "sensitve"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid `files.skip[1].when`: unknown condition \"sensitve\"; known: unsafe-name, \
         dotfile, installer, executable, app-bundle, system-file, directory, sensitive, tool-config, recent, \
         partial-download, hardlink, uncategorized"
    );
    // Case matters: the file's spellings are exact.
    let upper = text.replace("\"sensitve\"", "\"Dotfile\"");
    assert!(
        f.load(&upper, Section::Files)
            .unwrap_err()
            .to_string()
            .contains("unknown condition \"Dotfile\"")
    );
}

#[test]
fn the_network_table_and_the_older_switch_agree_or_the_load_fails() {
    let f = Fixture::new();
    let with = |extra: &str| f.load(&format!("{SECTIONED}\n{extra}"), Section::Terminal);
    let network = |p: &Policy| p.terminal.as_ref().unwrap().network.clone();
    let open = with("[terminal.sandbox]\nnetwork = true").unwrap();
    assert_eq!(network(&open).mode, crate::egress::NetworkMode::Open);
    assert!(open.terminal.as_ref().unwrap().sandbox.network);
    let off = with("").unwrap();
    assert_eq!(network(&off).mode, crate::egress::NetworkMode::Off);
    let allow = with(
        "[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"*.Crates.IO.\", \"github.com\"]\ndeny_domains = [\"evil.crates.io\"]\nhosts = { \"reg.internal\" = [\"10.0.0.5\"] }",
    )
    .unwrap();
    let n = network(&allow);
    assert_eq!(n.mode, crate::egress::NetworkMode::Allowlist);
    assert!(!allow.terminal.as_ref().unwrap().sandbox.network);
    assert_eq!(n.allow[0].text(), "*.crates.io");
    assert_eq!(n.pinned("reg.internal").unwrap().len(), 1);
    for (bad, key) in [
        (
            "[terminal.sandbox]\nnetwork = true\n[terminal.network]\nmode = \"allowlist\"",
            "terminal.network.mode",
        ),
        (
            "[terminal.network]\nmode = \"off\"\nallow_domains = [\"github.com\"]",
            "terminal.network.allow_domains",
        ),
        (
            "[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"a.*.com\"]",
            "terminal.network.allow_domains",
        ),
        (
            "[terminal.network]\nmode = \"allowlist\"\ndeny_domains = [\"10.0.0.1\"]",
            "terminal.network.deny_domains",
        ),
        (
            "[terminal.network]\nmode = \"allowlist\"\nhosts = { \"x.test\" = [\"not-an-ip\"] }",
            "terminal.network.hosts",
        ),
        ("[terminal.network]\nmode = \"everything\"", ""),
        ("[terminal.network]\nmod = \"allowlist\"", ""),
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains(key), "{bad}: {e}");
    }
}

#[test]
fn limits_per_caller_fit_inside_the_totals() {
    let f = Fixture::new();
    let invalid_key = |extra: &str| match f.load(&format!("{SECTIONED}{extra}"), Section::Terminal)
    {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("{extra}: {:?}", other.map(|_| ())),
    };
    assert_eq!(
        invalid_key("[terminal.sessions]\nmax_sessions = 4\nmax_sessions_per_caller = 5\n"),
        "terminal.sessions.max_sessions_per_caller"
    );
    assert_eq!(
        invalid_key("[http]\nmax_requests = 8\nmax_requests_per_caller = 9\n"),
        "http.max_requests_per_caller"
    );
    assert_eq!(
        invalid_key("[http]\nmax_mcp_sessions_per_caller = 0\n"),
        "http.max_mcp_sessions_per_caller"
    );
    assert_eq!(
        invalid_key("[http]\nmax_requests = 0\n"),
        "http.max_requests"
    );
    // Unset, a caller's limit follows a lowered total; set, it stands.
    let p = f
        .load(
            &format!("{SECTIONED}[http]\nmax_mcp_sessions = 4\nmax_requests_per_caller = 2\n"),
            Section::Terminal,
        )
        .unwrap();
    assert_eq!(
        p.http.limits,
        HttpLimits {
            max_mcp_sessions: 4,
            max_mcp_sessions_per_caller: 4,
            max_requests: 64,
            max_requests_per_caller: 2,
        }
    );
    let t = f
        .load(
            &format!(
                "{SECTIONED}[terminal.sessions]\nmax_sessions = 6\nmax_sessions_per_caller = 2\n"
            ),
            Section::Terminal,
        )
        .unwrap()
        .terminal
        .unwrap();
    assert_eq!(
        t.sessions.capacity(),
        crate::sessions::Capacity {
            total: 6,
            per_caller: 2
        }
    );
}

#[test]
fn keys_come_from_one_file_or_one_https_url() {
    let f = Fixture::new();
    let auth = |keys: &str| {
        format!(
            "{SECTIONED}[http.auth]\nmode = \"oauth\"\nissuer = \"https://i.test\"\naudience = \"https://m.test/mcp\"\n{keys}\n"
        )
    };
    let load = |keys: &str| f.load(&auth(keys), Section::Terminal);
    let source = |keys: &str| load(keys).unwrap().http.oauth.unwrap().jwks;
    assert_eq!(
        source("jwks_url = \"https://i.test/.well-known/jwks.json\""),
        JwksSource::Url {
            url: "https://i.test/.well-known/jwks.json".into(),
            ca_file: None
        }
    );
    assert!(matches!(
        source("jwks_url = \"https://i.test/k\"\njwks_ca_file = \"ca.pem\""),
        JwksSource::Url { ca_file: Some(p), .. } if p.ends_with("ca.pem")
    ));
    for (keys, key) in [
        ("jwks_url = \"http://i.test/k\"", "http.auth.jwks_url"),
        ("jwks_url = \"https://user@i.test/k\"", "http.auth.jwks_url"),
        ("jwks_url = \"https:///k\"", "http.auth.jwks_url"),
        (
            "jwks_url = \"https://i.test/k\"\njwks_file = \"k.json\"",
            "http.auth.jwks_url",
        ),
        (
            "jwks_file = \"k.json\"\njwks_ca_file = \"ca.pem\"",
            "http.auth.jwks_ca_file",
        ),
        ("", "http.auth.jwks_file"),
    ] {
        match load(keys) {
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{keys}"),
            other => panic!("{keys}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn a_profile_works_offline_only_without_network() {
    let f = Fixture::new();
    let policy = |network: &str| {
        format!(
            "audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\nprofiles = [\"rust\"]\ncache_dir = \"cache\"\n{network}"
        )
    };
    let offline = |text: &str| {
        let t = f.load(text, Section::Terminal).unwrap().terminal.unwrap();
        t.env
            .set
            .iter()
            .find(|(name, _)| name == "CARGO_NET_OFFLINE")
            .map(|(_, value)| value.clone())
    };
    assert_eq!(offline(&policy("")).as_deref(), Some("true"));
    // With egress on, cargo fetches through the proxy from the names allowed.
    let egress = "[terminal.network]\nmode = \"allowlist\"\nallow_domains = [\"index.crates.io\", \"static.crates.io\"]\n";
    assert_eq!(offline(&policy(egress)), None);
    // The operator's own value wins either way.
    let mine = format!("{egress}[terminal.env]\nset = {{ CARGO_NET_OFFLINE = \"true\" }}\n");
    assert_eq!(offline(&policy(&mine)).as_deref(), Some("true"));
}

#[test]
fn credentials_are_refused_where_commands_could_reach_the_real_value() {
    let (_dir, base) = crate::testing::scratch(&["jail"]);
    let (outside, inside) = (base.join("token"), base.join("jail/token"));
    crate::testing::secret_file(&outside, "ghp_0123456789abcdef\n");
    crate::testing::secret_file(&inside, "ghp_0123456789abcdef\n");
    let load = |network: &str, credential: &str| {
        let text = format!(
            "audit_log = \"audit.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [\"curl\"]\n[terminal.network]\n{network}\n[[terminal.credentials]]\n{credential}\n"
        );
        let path = base.join("policy.toml");
        std::fs::write(&path, text).unwrap();
        super::read(Some(&path), &no_env, Section::Terminal)
    };
    let allowlist = "mode = \"allowlist\"\nallow_domains = [\"github.com\"]";
    let entry = |from: &str, host: &str, format: &str| {
        format!(
            "name = \"GH_TOKEN\"\nfrom = \"{from}\"\nhosts = [\"{host}\"]\ninject = {{ header = \"Authorization\", format = \"{format}\" }}"
        )
    };
    let file = format!("file:{}", outside.display());
    let ok = load(allowlist, &entry(&file, "github.com", "Bearer {}")).unwrap();
    let creds = &ok.terminal.unwrap().credentials;
    assert_eq!(creds.specs[0].name, "GH_TOKEN");
    assert_eq!(format!("{:?}", creds.specs[0].value), "[secret: 20 bytes]");
    for (network, credential, says) in [
        (
            "mode = \"off\"",
            entry(&file, "github.com", "Bearer {}"),
            "allowlist",
        ),
        (
            allowlist,
            entry(&file, "gitlab.com", "Bearer {}"),
            "not allowed",
        ),
        (
            allowlist,
            entry(
                &format!("file:{}", inside.display()),
                "github.com",
                "Bearer {}",
            ),
            "root",
        ),
        (
            allowlist,
            entry("env:NOT_SET_ANYWHERE", "github.com", "Bearer {}"),
            "no NOT_SET_ANYWHERE",
        ),
        (
            allowlist,
            entry("plain", "github.com", "Bearer {}"),
            "env:VAR",
        ),
        (allowlist, entry(&file, "github.com", "Bearer"), "{}"),
    ] {
        let err = load(network, &credential).unwrap_err().to_string();
        assert!(err.contains(says), "{says}: {err}");
    }
}

#[test]
fn a_server_id_comes_from_the_environment_else_the_policy_and_must_be_a_plain_name() {
    let f = Fixture::new();
    assert_eq!(
        f.load(SECTIONED, Section::Terminal)
            .unwrap()
            .audit
            .server_id,
        None
    );
    let named = format!("server_id = \"replica-a\"\n{SECTIONED}");
    let p = f.load(&named, Section::Terminal).unwrap();
    assert_eq!(p.audit.server_id.as_deref(), Some("replica-a"));
    assert_eq!(
        crate::load::audit_options(&p).server_id.as_deref(),
        Some("replica-a")
    );
    // Each replica its own name from one shared policy.
    let env = |k: &str| (k == "SAFE_MCP_SERVER_ID").then(|| OsString::from("pod-7d9f8c-x2k4p"));
    let p = f.load_env(&named, Section::Terminal, &env).unwrap();
    assert_eq!(p.audit.server_id.as_deref(), Some("pod-7d9f8c-x2k4p"));
    for bad in ["a b", "", "x/y"] {
        let text = format!("server_id = {bad:?}\n{SECTIONED}");
        let err = f.load(&text, Section::Terminal).unwrap_err().to_string();
        assert!(
            err.contains("server_id") && err.contains("a server id is"),
            "{err}"
        );
    }
    let env = |k: &str| (k == "SAFE_MCP_SERVER_ID").then(|| OsString::from("no spaces please"));
    let err = f
        .load_env(SECTIONED, Section::Terminal, &env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("SAFE_MCP_SERVER_ID"), "{err}");
}
