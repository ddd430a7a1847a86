use super::*;

fn spec(name: &str, value: &str, hosts: &[&str], header: &str, format: &str) -> CredentialSpec {
    CredentialSpec {
        name: name.into(),
        source: Source::Env(name.into()),
        value: Secret::new(value.as_bytes().to_vec()),
        hosts: hosts
            .iter()
            .map(|h| DomainRule::parse(h).unwrap())
            .collect(),
        inject: Inject::parse(header, format).unwrap(),
    }
}

#[test]
fn a_placeholder_keeps_the_type_prefix_and_nothing_else_of_the_value() {
    assert_eq!(type_prefix(b"ghp_abc123XYZ"), b"ghp_");
    assert_eq!(type_prefix(b"github_pat_11AB"), b"github_pat_");
    assert_eq!(type_prefix(b"glpat-xyz"), b"glpat-");
    assert_eq!(type_prefix(b"sk-proj-AbC"), b"sk-proj-");
    // Only known prefixes: a word before a dash may be the token's own random part.
    assert_eq!(type_prefix(b"deadbeef-0000-1111"), b"");
    assert_eq!(type_prefix(b"a1b2c3-rest"), b"");
    assert_eq!(type_prefix(b"ABC_def"), b"");
    assert_eq!(type_prefix(b"_abc"), b"");
    let real = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let p = placeholder(real.as_bytes()).unwrap();
    assert!(p.starts_with("ghp_"), "{p}");
    assert_eq!(p.len(), real.len());
    assert!(p[4..].bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_ne!(p, real);
    assert_ne!(p, placeholder(real.as_bytes()).unwrap(), "random each time");
    let short = placeholder(b"abcdefgh").unwrap();
    assert_eq!(short.len(), MIN_RANDOM);
}

#[test]
fn formats_parse_into_a_template_or_a_basic_pair() {
    let bearer = Inject::parse("Authorization", "Bearer {}").unwrap();
    assert_eq!(bearer.header(), "authorization");
    assert_eq!(bearer.render(b"tok"), b"Bearer tok");
    let basic = Inject::parse("Authorization", "Basic x-access-token:{}").unwrap();
    assert_eq!(
        String::from_utf8(basic.render(b"tok")).unwrap(),
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("x-access-token:tok")
        )
    );
    assert_eq!(
        Inject::parse("PRIVATE-TOKEN", "{}").unwrap().render(b"t"),
        b"t"
    );
    for (header, format) in [
        ("Host", "{}"),
        ("Content-Length", "{}"),
        ("Bad Header", "{}"),
        ("Authorization", "Bearer"),
        ("Authorization", "{} {}"),
        ("Authorization", "Basic {}"),
        ("Authorization", "Basic :{}"),
        ("Authorization", "Bearer {}\r\nX: y"),
    ] {
        assert!(Inject::parse(header, format).is_err(), "{header} {format}");
    }
}

#[test]
fn the_real_value_goes_where_the_placeholder_or_nothing_was() {
    let vault = Vault::new(&Credentials {
        specs: vec![spec(
            "GH_TOKEN",
            "ghp_realvalue0123456789",
            &["git.example"],
            "Authorization",
            "Basic x-access-token:{}",
        )],
        ..Credentials::default()
    })
    .unwrap();
    let entry = vault.bound("git.example").unwrap();
    assert!(vault.bound("other.example").is_none());
    let real = entry.inject.render(b"ghp_realvalue0123456789");
    assert_eq!(
        vault.authorization(entry, None),
        Authorization::Set(real.clone())
    );
    let bearer = format!("Bearer {}", entry.placeholder);
    assert_eq!(
        vault.authorization(entry, Some(bearer.as_bytes())),
        Authorization::Set(real.clone())
    );
    // git sends the URL's user and the placeholder as a Basic pair.
    let pair =
        base64::engine::general_purpose::STANDARD.encode(format!("me:{}", entry.placeholder));
    assert_eq!(
        vault.authorization(entry, Some(format!("Basic {pair}").as_bytes())),
        Authorization::Set(real)
    );
    assert_eq!(
        vault.authorization(entry, Some(b"Bearer the-commands-own")),
        Authorization::Keep
    );
}

#[test]
fn a_placeholder_to_a_host_it_is_not_bound_to_is_found_in_each_spelling() {
    let vault = Vault::new(&Credentials {
        specs: vec![spec(
            "API_KEY",
            "sk-proj-0123456789abcdef",
            &["*.api.example"],
            "Authorization",
            "Bearer {}",
        )],
        ..Credentials::default()
    })
    .unwrap();
    let p = vault.entries()[0].placeholder.clone();
    assert_eq!(vault.foreign("evil.example", p.as_bytes()), Some("API_KEY"));
    assert_eq!(vault.foreign("v1.api.example", p.as_bytes()), None);
    let encoded: String = p.bytes().map(|b| format!("%{b:02X}")).collect();
    let url = format!("GET /?k={encoded} HTTP/1.1");
    assert_eq!(
        vault.foreign("evil.example", url.as_bytes()),
        Some("API_KEY")
    );
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("u:{p}"));
    let head = format!("Authorization: basic {pair}\r\n");
    assert_eq!(
        vault.foreign("evil.example", head.as_bytes()),
        Some("API_KEY")
    );
    assert_eq!(
        vault.foreign("evil.example", b"GET / HTTP/1.1\r\nHost: x\r\n"),
        None
    );
}

#[test]
fn values_that_overlap_in_an_answer_are_each_masked_whole() {
    let vault = Vault::new(&Credentials {
        specs: vec![
            spec("A", "abcdefgh12", &["a.example"], "Authorization", "{}"),
            spec("B", "gh12345678", &["b.example"], "Authorization", "{}"),
        ],
        ..Credentials::default()
    })
    .unwrap();
    // One search that stopped at the first match would leave B's tail, "345678", in view.
    let mut body = b"[abcdefgh12345678]".to_vec();
    assert_eq!(vault.mask(&mut body), 2);
    assert_eq!(body, b"[****************]");
    let mut none = b"nothing to see".to_vec();
    assert_eq!(vault.mask(&mut none), 0);
    assert_eq!(none, b"nothing to see");
    assert_eq!(Vault::default().mask(&mut none), 0);
}

#[test]
fn a_real_value_in_a_response_is_masked_to_its_length() {
    let vault = Vault::new(&Credentials {
        specs: vec![spec(
            "T",
            "secretvalue42",
            &["a.example"],
            "Authorization",
            "Bearer {}",
        )],
        ..Credentials::default()
    })
    .unwrap();
    let mut body = b"you sent secretvalue42 and secretvalue42.".to_vec();
    let len = body.len();
    assert_eq!(vault.mask(&mut body), 2);
    assert_eq!(body.len(), len);
    assert_eq!(body, b"you sent ************* and *************.");
    assert_eq!(vault.longest(), 13);
}

#[test]
fn a_file_credential_is_read_again_and_a_bad_file_keeps_the_old_value() {
    let (_dir, base) = crate::testing::scratch(&[]);
    let path = base.join("token");
    crate::testing::secret_file(&path, "first-value-123\n");
    let value = read_file(&path).unwrap();
    let mut s = spec(
        "T",
        "unused-unused",
        &["a.example"],
        "Authorization",
        "Bearer {}",
    );
    s.source = Source::File(path.clone());
    s.value = value;
    let vault = Vault::new(&Credentials {
        specs: vec![s],
        ..Credentials::default()
    })
    .unwrap();
    let placeholder = vault.entries()[0].placeholder.clone();
    assert!(vault.reload().is_empty(), "unchanged");
    std::fs::write(&path, "second-value-456\n").unwrap();
    assert_eq!(vault.reload().len(), 1);
    let entry = vault.bound("a.example").unwrap();
    assert_eq!(
        vault.authorization(entry, None),
        Authorization::Set(b"Bearer second-value-456".to_vec())
    );
    assert_eq!(
        entry.placeholder, placeholder,
        "the placeholder lives as long as the server"
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let said = vault.reload();
    assert!(said[0].contains("mode 0600"), "{said:?}");
    assert_eq!(
        vault.authorization(entry, None),
        Authorization::Set(b"Bearer second-value-456".to_vec())
    );
    assert!(value_of(b"short\n".to_vec()).is_err());
    assert!(value_of(b"two words here\n".to_vec()).is_err());
    assert!(format!("{:?}", read_file(&path)).contains("0600"));
    assert_eq!(
        format!("{:?}", Secret::new(b"abc".to_vec())),
        "[secret: 3 bytes]"
    );
}

#[test]
fn method_and_path_rules_allow_what_they_name_and_plain_paths_only() {
    let rules = vec![
        HostRule::parse("git.example", &["GET".into()], &["/**".into()]).unwrap(),
        HostRule::parse(
            "git.example",
            &["post".into()],
            &[
                "/org/repo.git/git-receive-pack".into(),
                "/org/*.git/git-upload-pack".into(),
            ],
        )
        .unwrap(),
    ];
    let ok = |m: &str, p: &str| hosts::allows(&rules, "git.example", m, p);
    assert!(ok("GET", "/org/repo.git/info/refs?service=git-receive-pack").is_ok());
    assert!(ok("POST", "/org/repo.git/git-receive-pack").is_ok());
    assert!(ok("POST", "/org/other.git/git-upload-pack").is_ok());
    assert!(ok("POST", "/org/other.git/git-receive-pack").is_err());
    assert!(
        ok("POST", "/org/a/b.git/git-upload-pack").is_err(),
        "* stays in a segment"
    );
    assert!(ok("DELETE", "/org/repo.git").is_err());
    for sneaky in [
        "/org/repo.git/../other.git/git-receive-pack",
        "/org/repo.git/%2e%2e/other.git/git-receive-pack",
        "/org/repo.git%2F..%2Fother.git/git-receive-pack",
        "/org//repo.git/git-receive-pack",
        "/org/repo.git\\..\\x",
        "/org/repo.git/..;/other.git/git-receive-pack",
        "/org/repo.git/%00/git-receive-pack",
        "/org/repo.git/%252e%252e/git-receive-pack",
    ] {
        assert!(ok("POST", sneaky).is_err(), "{sneaky}");
        assert!(ok("GET", sneaky).is_err(), "{sneaky}");
    }
    assert!(ok("GET", "/org/repo.git/info/refs?_method=DELETE").is_err());
    // A long path against several `**` (which a backtracking matcher would take years on)
    // is one pass; and still matches where it should.
    let many = HostRule::parse(
        "h.example",
        &["GET".into()],
        &["/a/**/x/**/y/**/refs".into()],
    )
    .unwrap();
    let long = format!("/a{}", "/x".repeat(30_000));
    assert!(hosts::allows(std::slice::from_ref(&many), "h.example", "GET", &long).is_err());
    assert!(hosts::allows(&[many], "h.example", "GET", "/a/b/x/c/y/d/e/refs").is_ok());
    // Hosts without rules are not ruled.
    assert!(hosts::allows(&rules, "other.example", "DELETE", "/../x").is_ok());
    assert!(HostRule::parse("h.example", &[], &["/".into()]).is_err());
    assert!(HostRule::parse("h.example", &["GET".into()], &["x".into()]).is_err());
    assert!(HostRule::parse("h.example", &["G T".into()], &["/".into()]).is_err());
}

#[test]
fn a_basic_pair_and_an_old_value_are_masked_too() {
    let (_dir, base) = crate::testing::scratch(&[]);
    let path = base.join("token");
    crate::testing::secret_file(&path, "ghp_firstvalue0123\n");
    let mut s = spec(
        "T",
        "unused-unused",
        &["a.example"],
        "Authorization",
        "Basic x-access-token:{}",
    );
    s.source = Source::File(path.clone());
    s.value = read_file(&path).unwrap();
    let vault = Vault::new(&Credentials {
        specs: vec![s],
        ..Credentials::default()
    })
    .unwrap();
    let pair =
        base64::engine::general_purpose::STANDARD.encode("x-access-token:ghp_firstvalue0123");
    let mut echoed = format!("Authorization: Basic {pair}").into_bytes();
    assert_eq!(vault.mask(&mut echoed), 1);
    assert!(!String::from_utf8_lossy(&echoed).contains(&pair));
    std::fs::write(&path, "ghp_secondvalue456\n").unwrap();
    vault.reload();
    let mut both = b"ghp_firstvalue0123 ghp_secondvalue456".to_vec();
    assert_eq!(
        vault.mask(&mut both),
        2,
        "the value read before stays masked"
    );
    assert_eq!(vault.forms().len(), 4);
    // A symlink, a second link or a file of another mode is refused.
    let link = base.join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(read_file(&link).is_err());
    let hard = base.join("hard");
    std::fs::hard_link(&path, &hard).unwrap();
    assert!(read_file(&hard).unwrap_err().contains("one link"));
}
