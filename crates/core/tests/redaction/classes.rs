//! Regression tests for the classes of secrets a held-out corpus of command outputs found
//! missed (1–7) or over-redacted (8–12). Each class has realistic positives, which must lose
//! every 12-character window of each secret piece and gain a marker, and negatives, which
//! must come back unchanged. Argument vectors (class 5) go through `Redactor::redact_argv`.
//! All secrets are fake, with real shapes.

use super::{positives, redactor, without_markers};

include!("../../testdata/redaction_class_cases.rs");

/// The first 12-character window of `secret` still visible in `out` that the text does not
/// also hold outside the secret.
fn leaked(text: &str, out: &str, secret: &str) -> Option<String> {
    let visible = without_markers(out);
    let outside = text.replace(secret, "\u{0}");
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 12 {
        return visible.contains(secret).then(|| secret.to_owned());
    }
    (0..=chars.len() - 12)
        .map(|i| chars[i..i + 12].iter().collect::<String>())
        .find(|w| visible.contains(w.as_str()) && !outside.contains(w.as_str()))
}

fn check_positives(cases: &[(&str, &str, &[&str])]) {
    let r = redactor();
    let mut failures = Vec::new();
    for (class, text, secrets) in cases {
        let out = r.redact(text);
        for secret in *secrets {
            assert!(text.contains(secret), "{class}: case lacks {secret:?}");
            if let Some(w) = leaked(text, &out, secret) {
                failures.push(format!("{class}: {w:?} survived in {out:?}"));
            }
        }
        if !out.contains("[REDACTED:") {
            failures.push(format!("{class}: no marker in {out:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check_negatives(cases: &[(&str, &str)]) {
    let r = redactor();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(class, text)| {
            let out = r.redact(text);
            (out != *text).then(|| format!("{class}: {text:?}\n  -> {out:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn class_1_a_key_body_without_its_begin_line_is_hidden() {
    check_positives(HEADLESS_KEYS);
    check_negatives(HEADLESS_KEEPS);
    // The END line and the prompt around the body stay.
    let out = redactor().redact(HEADLESS_KEYS[0].1);
    assert!(out.starts_with("$ sed 1d deploy.pem\n[REDACTED:"), "{out}");
    assert!(
        out.ends_with("\n-----END RSA PRIVATE KEY-----\n$ "),
        "{out}"
    );
}

#[test]
fn class_2_base64_pem_keys_in_data_fields_are_hidden_and_certificates_stay() {
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {KUBE_CERT}\n    server: https://10.0.0.1:6443\n  name: prod\nusers:\n- name: admin\n  user:\n    client-certificate-data: {KUBE_CERT}\n    client-key-data: {KUBE_KEY}\n"
    );
    let secret_yaml = format!(
        "apiVersion: v1\ndata:\n  tls.crt: {KUBE_CERT}\n  tls.key: {KUBE_EC_KEY}\nkind: Secret\ntype: kubernetes.io/tls\n"
    );
    let json = format!("{{\"name\":\"admin\",\"user\":{{\"client-key-data\":\"{KUBE_EC_KEY}\"}}}}");
    let folded: String = KUBE_KEY
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let piped = format!("$ base64 < admin.key\n{folded}\n$ ");
    let pieces: Vec<&str> = folded.lines().collect();
    // A bundle whose first block is public still holds a key.
    let bundle = base64(&format!(
        "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEuHuf18FZTKTJPOFQ8O30B00EMa8vFYTF\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        &RSA_BODY[..194]
    ));
    let bundled = format!("  tls.pem: {bundle}\n");
    let bundle_secret = [bundle.as_str()];
    let cases: Vec<(&str, &str, &[&str])> = vec![
        ("2 kubeconfig client-key-data", &kubeconfig, &[KUBE_KEY]),
        ("2 Secret tls.key", &secret_yaml, &[KUBE_EC_KEY]),
        ("2 JSON client-key-data", &json, &[KUBE_EC_KEY]),
        ("2 base64 of a key, 76 columns", &piped, &pieces),
        ("2 a certificate-and-key bundle", &bundled, &bundle_secret),
    ];
    check_positives(&cases);
    let r = redactor();
    // Certificates are public: their data stays readable next to the hidden key.
    for text in [&kubeconfig, &secret_yaml] {
        assert!(r.redact(text).contains(KUBE_CERT), "{}", r.redact(text));
    }
    let certs_only = format!(
        "    certificate-authority-data: {KUBE_CERT}\n    client-certificate-data: {KUBE_CERT}\n"
    );
    let omitted = "    client-certificate-data: DATA+OMITTED\n    client-key-data: DATA+OMITTED\n    token: REDACTED\n".to_owned();
    let prose =
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVk is base64 for the start of a PEM header".to_owned();
    check_negatives(&[
        ("2 certificates only", &certs_only),
        ("2 kubectl config view", &omitted),
        ("2 a header named in prose", &prose),
    ]);
}

/// Standard base64 with padding.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in text.as_bytes().chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= group.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn class_3_tokens_inside_ansi_sequences_are_hidden() {
    check_positives(ANSI);
    check_negatives(&[
        (
            "3 coloured test output",
            "\u{1b}[32mPASS\u{1b}[0m test_login_with_token (0.02s)\n\u{1b}[1;31merror\u{1b}[0m: could not read token file\n",
        ),
        (
            "3 coloured git log",
            "\u{1b}[33mcommit 3f786850e387550fdab836ed7e6dc881de23001b\u{1b}[m\nAuthor: Jane <jane@example.com>",
        ),
    ]);
    // The colours around a hidden token survive.
    let out = redactor().redact(ANSI[0].1);
    assert!(
        out.starts_with("  \u{1b}[32m✓\u{1b}[0m Token: \u{1b}[1m[REDACTED:"),
        "{out:?}"
    );
    assert!(out.ends_with("]\u{1b}[0m\n"), "{out:?}");
}

#[test]
fn class_4_folded_tokens_are_hidden_whole() {
    assert_eq!(FOLDED[0].1.lines().nth(5).unwrap().len(), 80);
    assert_eq!(FOLDED[2].1.lines().next().unwrap().len(), 76);
    check_positives(FOLDED);
    check_negatives(&[
        (
            "4 prose wrapped at 80 columns",
            "This release changes how the server reads its configuration: settings files\nare now merged in order, and a missing file is no longer an error.\n",
        ),
        (
            "4 a checksum list",
            "3f786850e387550fdab836ed7e6dc881de23001b\na94a8fe5ccb19ba61c4c0873d391e987982fbbd3\n",
        ),
        (
            "4 ls -1",
            "package.json\npackage-lock.json\nnode_modules\nREADME.md\n",
        ),
    ]);
    // The lines after the folded token stay.
    let out = redactor().redact(FOLDED[0].1);
    assert!(out.ends_with("\nca.crt:     1066 bytes\n"), "{out}");
}

// ---- 5. Secret flags and their values as separate argv words ----

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Each argv, the index of the secret word in it, and the secret.
const HIDDEN: &[(&[&str], usize, &str)] = &[
    (
        &["mysql", "-u", "root", "-p", "S3cretRoot!", "appdb"],
        4,
        "S3cretRoot!",
    ),
    (
        &["mysqldump", "-pBkp2024pw", "--all-databases"],
        1,
        "Bkp2024pw",
    ),
    (
        &["some-cli", "--password", "correcthorsebatterystaple"],
        2,
        "correcthorsebatterystaple",
    ),
    (
        &["gh", "api", "--token", "plainwordtokenvalue"],
        3,
        "plainwordtokenvalue",
    ),
    (
        &["app", "--api-key", "abcd1234efgh5678ijkl"],
        2,
        "abcd1234efgh5678ijkl",
    ),
    (
        &["app", "--client-secret", "kq8s7d6f5g4h3j2k1l"],
        2,
        "kq8s7d6f5g4h3j2k1l",
    ),
    (
        &["redis-cli", "-h", "cache", "--pass", "Red1sPass!", "ping"],
        4,
        "Red1sPass!",
    ),
    (
        &["redis-cli", "-a", "RedisAuthValue", "ping"],
        2,
        "RedisAuthValue",
    ),
    (
        &[
            "docker",
            "login",
            "-u",
            "ci",
            "-p",
            "Dock3rPw!",
            "registry.example.com",
        ],
        5,
        "Dock3rPw!",
    ),
    (
        &["sshpass", "-p", "SshPassw0rdValue", "ssh", "deploy@host"],
        2,
        "SshPassw0rdValue",
    ),
    (
        &[
            "mongosh",
            "-u",
            "admin",
            "-p",
            "MongoAdminPw",
            "--host",
            "db",
        ],
        4,
        "MongoAdminPw",
    ),
    (
        &[
            "ldapsearch",
            "-x",
            "-D",
            "cn=admin",
            "-w",
            "LdapBindPw",
            "-b",
            "dc=x",
        ],
        5,
        "LdapBindPw",
    ),
    (
        &["sudo", "-u", "postgres", "mysql", "-p", "SudoMysqlPw"],
        5,
        "SudoMysqlPw",
    ),
    (
        &[
            "curl",
            "-u",
            "bob:CurlUserPassword",
            "https://api.example.com",
        ],
        2,
        "CurlUserPassword",
    ),
    (
        &[
            "openssl",
            "pkcs12",
            "-export",
            "-passout",
            "pass:ExportPassValue",
        ],
        4,
        "ExportPassValue",
    ),
    (
        &[
            "keytool",
            "-list",
            "-keystore",
            "ks.jks",
            "-storepass",
            "ChangedStorePw",
        ],
        5,
        "ChangedStorePw",
    ),
    (
        &[
            "az",
            "login",
            "--service-principal",
            "-u",
            "app-id",
            "-p",
            "AzSpSecretValue",
            "--tenant",
            "t",
        ],
        6,
        "AzSpSecretValue",
    ),
];

#[test]
fn class_5_a_word_after_a_secret_flag_is_hidden() {
    let r = redactor();
    let hidden = HIDDEN;
    for (words, i, secret) in hidden {
        let out = r.redact_argv(&argv(words));
        assert_eq!(out.len(), words.len());
        assert!(!out[*i].contains(secret), "{words:?} -> {out:?}");
        assert!(out[*i].contains("[REDACTED:"), "{words:?} -> {out:?}");
        for (j, w) in words.iter().enumerate() {
            if j != *i {
                assert_eq!(out[j], r.redact(w), "{words:?} -> {out:?}");
            }
        }
    }
    let kept: &[&[&str]] = &[
        &["ssh", "-p", "2222", "deploy@bastion"],
        &["docker", "run", "-p", "8080:80", "nginx"],
        &["cp", "-p", "a.txt", "b.txt"],
        &["mysql", "-u", "root", "-p"],
        &["mysql", "-u", "root", "-p", "--database", "app"],
        &["docker", "login", "--password-stdin", "ghcr.io"],
        &["psql", "--no-password", "-h", "db", "app"],
        &["ansible-playbook", "--ask-pass", "site.yml"],
        &["app", "--token", "$TOKEN"],
        &["app", "--password", "${DB_PASSWORD}"],
        &["app", "--token-file", "/run/secrets/token"],
        &[
            "kubectl",
            "create",
            "secret",
            "generic",
            "db",
            "--from-file=password=./pw.txt",
        ],
        &[
            "openssl",
            "pkcs12",
            "-passin",
            "env:P12_PASS",
            "-in",
            "a.p12",
        ],
        &["curl", "-u", "bob", "https://api.example.com"],
        &[
            "docker",
            "buildx",
            "build",
            "--secret",
            "id=npmrc,src=.npmrc",
            ".",
        ],
        &["git", "log", "-p", "main"],
    ];
    for words in kept {
        let w = argv(words);
        assert_eq!(r.redact_argv(&w), w, "{words:?}");
    }
}

#[test]
fn class_6_url_encoded_credentials_are_hidden() {
    check_positives(URL_ENCODED);
    check_negatives(&[
        (
            "6 an encoded URL without credentials",
            "redirect=https%3A%2F%2Fgithub.com%2Facme%2Fapp%3Ftab%3Dreadme",
        ),
        (
            "6 an encoded user without a password",
            "https://user%40example.com@git.example.com/r.git",
        ),
        (
            "6 an encoded placeholder",
            "https://ci:%24%7BCI_TOKEN%7D@git.example.com/r.git",
        ),
        ("6 a port", "http://localhost%3A8080/health"),
    ]);
}

#[test]
fn class_7_the_back_half_of_a_split_token_is_hidden() {
    check_positives(SPLIT);
    check_negatives(&[
        (
            "7 words on consecutive lines",
            "build finished\ncompleted_successfully_all\n",
        ),
        (
            "7 identifiers",
            "Downloading packages\nnode_modules_cache_v2\n",
        ),
    ]);
    // A complete token does not swallow the next line.
    let r = redactor();
    let out =
        r.redact("GH_TOKEN=ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d\nDEPLOY_TARGET_ENVIRONMENT\n");
    assert!(out.ends_with("\nDEPLOY_TARGET_ENVIRONMENT\n"), "{out}");
}

// ---- 8–12. Over-redaction ----

#[test]
fn class_8_directories_in_pwd_like_variables_stay() {
    check_negatives(&[
        ("8 PWD", "PWD=/srv/app"),
        ("8 OLDPWD", "OLDPWD=/home/deploy/releases/20240501"),
        (
            "8 env dump",
            "HOME=/home/app\nPWD=/srv/app\nOLDPWD=/srv\nSHLVL=1\n",
        ),
        (
            "8 declare -x",
            "declare -x OLDPWD=\"/home/deploy\"\ndeclare -x PWD=\"/srv/app/current\"",
        ),
        ("8 a Windows PWD", "PWD=C:\\Users\\deploy\\app"),
        (
            "8 a credentials file",
            "GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json",
        ),
        ("8 a pass-named path", "KEYRING_PASS=/dev/null"),
    ]);
    check_positives(&[
        (
            "8 a real password in a pwd-named variable",
            "DB_PWD=Tr0ub4dor&3x",
            &["Tr0ub4dor&3x"],
        ),
        (
            "8 a random value after a slash",
            "API_SECRET=/aB3kQ9zX7mW2pL5nR8tY4vC6",
            &["/aB3kQ9zX7mW2pL5nR8tY4vC6"],
        ),
    ]);
}

#[test]
fn related_variants_are_hidden_too() {
    check_positives(&[
        (
            "1 a PuTTY key file",
            "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQABAAABAQC7\nPrivate-Lines: 2\nAAABAQCmXk3f5Rk2qzsV9m1F3yYt7pQ8aLwzJ0cN4dHx1vR6uBk9eWq2sT\nZmM3nH8kP1xQ7vL2cR4tY6uI9oA0sD3fG5hJ8kL1zX4cV7bN0mQ2wE5rT8yU\nPrivate-MAC: 7b0a6b1c",
            &[
                "AAABAQCmXk3f5Rk2qzsV9m1F3yYt7pQ8aLwzJ0cN4dHx1vR6uBk9eWq2sT",
                "ZmM3nH8kP1xQ7vL2cR4tY6uI9oA0sD3fG5hJ8kL1zX4cV7bN0mQ2wE5rT8yU",
            ],
        ),
        (
            "2 a Secret's .dockerconfigjson",
            "apiVersion: v1\ndata:\n  .dockerconfigjson: eyJhdXRocyI6eyJnaGNyLmlvIjp7ImF1dGgiOiJZbTkwT21kb2NGOTFPR3A2VUdSbE1FbG5lRXhrTmtkdVkyWkNRV1Z3WmtwQ1pEQkxhRGh2VDA5TU9HUT0ifX19\nkind: Secret\n",
            &[
                "eyJhdXRocyI6eyJnaGNyLmlvIjp7ImF1dGgiOiJZbTkwT21kb2NGOTFPR3A2VUdSbE1FbG5lRXhrTmtkdVkyWkNRV1Z3WmtwQ1pEQkxhRGh2VDA5TU9HUT0ifX19",
            ],
        ),
        (
            "a bare Google access token",
            "$ gcloud auth print-access-token\nya29.a0AfB_byC8kQ2zVx9Lm3NpR7sT1uW4yE6iO0pA5dF8gH2jK9lZ3xC7vB1nM4qW6eR8tY0uI2oP\n",
            &["ya29.a0AfB_byC8kQ2zVx9Lm3NpR7sT1uW4yE6iO0pA5dF8gH2jK9lZ3xC7vB1nM4qW6eR8tY0uI2oP"],
        ),
        (
            "6 a raw @ and : in a URL password",
            "mongodb://admin:p@ss:w0rd!x@db.internal:27017/admin",
            &["p@ss:w0rd!x"],
        ),
        (
            "9 a Set-Cookie header in JSON",
            "{\"headers\": {\"set-cookie\": \"sid=Zq8Lk2VbT9xR4mWn7YpC; Path=/; HttpOnly\"}}",
            &["Zq8Lk2VbT9xR4mWn7YpC"],
        ),
        (
            "4 a prefix alone at the end of an 80-column line",
            "curl: (22) The requested URL returned error: 401 Unauthorized; token sent:  ghp_\nu8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d (check scopes)\n",
            &["u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"],
        ),
    ]);
    assert_eq!(
        "curl: (22) The requested URL returned error: 401 Unauthorized; token sent:  ghp_".len(),
        80
    );
    let r = redactor();
    let out = r.redact(
        "Private-Lines: 1\nAAABAQCmXk3f5Rk2qzsV9m1F3yYt7pQ8aLwzJ0cN\nPrivate-MAC: 7b0a6b1c",
    );
    assert!(
        out.ends_with("\nPrivate-MAC: 7b0a6b1c") || out.ends_with("]Private-MAC: 7b0a6b1c"),
        "{out}"
    );
    let out = r.redact("{\"set-cookie\": \"sid=Zq8Lk2VbT9xR4mWn7YpC; Path=/; HttpOnly\"}");
    assert_eq!(
        out,
        "{\"set-cookie\": \"sid=[REDACTED:http_cookie]; Path=/; HttpOnly\"}"
    );
    let words = argv(&[
        "curl",
        "--user=bob:CurlGluedPw1",
        "-ualice:CurlShortPw2",
        "https://x",
    ]);
    let out = r.redact_argv(&words);
    assert_eq!(out[1], "--user=bob:[REDACTED:cli_password_flag]");
    assert_eq!(out[2], "-ualice:[REDACTED:cli_password_flag]");
    check_negatives(&[
        ("10 a Windows variable", "set DB_PASSWORD=%DB_PASSWORD%"),
        ("10 REPLACE_ME", "api_key: REPLACE_ME"),
    ]);
}

#[test]
fn class_9_cookie_attributes_stay() {
    let r = redactor();
    let cases = [
        (
            "Set-Cookie: session=Zq8Lk2VbT9xR4mWn7YpC3sDf; Path=/; HttpOnly; Secure",
            "Set-Cookie: session=[REDACTED:http_cookie]; Path=/; HttpOnly; Secure",
        ),
        (
            "< set-cookie: __Host-sid=8f2kq9d7s6a5; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=3600",
            "< set-cookie: __Host-sid=[REDACTED:http_cookie]; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=3600",
        ),
        (
            "Set-Cookie: token=\"abc123def456ghi\"; Domain=example.com; Path=/",
            "Set-Cookie: token=\"[REDACTED:http_cookie]\"; Domain=example.com; Path=/",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(r.redact(text), want);
    }
    check_negatives(&[(
        "9 a deleted cookie",
        "Set-Cookie: session=deleted; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
    )]);
}

#[test]
fn class_10_masked_values_and_markers_stay() {
    check_negatives(MASKED);
}

#[test]
fn redaction_is_idempotent() {
    let r = redactor();
    let mut texts: Vec<&str> = positives().map(|(_, t, _)| *t).collect();
    for table in [HEADLESS_KEYS, ANSI, FOLDED, URL_ENCODED, SPLIT] {
        texts.extend(table.iter().map(|(_, t, _)| *t));
    }
    let failures: Vec<String> = texts
        .into_iter()
        .filter_map(|t| {
            let once = r.redact(t);
            let twice = r.redact(&once);
            (once != twice).then(|| format!("{once:?}\n  -> {twice:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn class_11_a_pem_header_in_prose_is_not_a_key() {
    check_negatives(&[
        (
            "11 one line",
            "the file must start with -----BEGIN PRIVATE KEY----- and end with -----END PRIVATE KEY----- exactly",
        ),
        (
            "11 an error message",
            "Error: key must begin with \"-----BEGIN RSA PRIVATE KEY-----\"; got \"ssh-rsa AAAA\"\nhint: convert it with ssh-keygen -p -m PEM",
        ),
        (
            "11 documentation",
            "A key file looks like this:\n\n-----BEGIN OPENSSH PRIVATE KEY-----\n(base64 data)\n-----END OPENSSH PRIVATE KEY-----\n\nKeep it secret.",
        ),
        (
            "11 a header followed by other output",
            "-----BEGIN EC PRIVATE KEY-----\n$ echo done\ndone",
        ),
    ]);
    // A real key with its header still goes, and output after a key cut short stays.
    let r = redactor();
    let text = format!(
        "$ head -n 3 key.pem; echo ok\n-----BEGIN RSA PRIVATE KEY-----\n{}\n$ ls\nkey.pem notes.txt",
        &RSA_BODY[..129]
    );
    let out = r.redact(&text);
    assert!(!out.contains("MIIEpAIBAAKCAQEA"), "{out}");
    assert!(out.ends_with("\n$ ls\nkey.pem notes.txt"), "{out}");
    let env = "PRIVATE_KEY=-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKdFhxPbztOBEMvaLAHQFOlPOLHEsKkJ -----END PRIVATE KEY-----";
    assert!(
        !r.redact(env).contains("MIIEvQIBADANBgkq"),
        "{}",
        r.redact(env)
    );
}

#[test]
fn class_12_paths_given_to_secret_names_stay() {
    check_negatives(&[
        (
            "12 --from-file",
            "kubectl create secret generic db --from-file=password=./secrets/db-password.txt",
        ),
        (
            "12 --from-file, absolute",
            "kubectl create secret generic ssh --from-file=ssh-privatekey=/home/ci/.ssh/id_rsa",
        ),
        (
            "12 --from-file, home",
            "kubectl create secret generic tok --from-file=token=~/tokens/ci.txt",
        ),
        (
            "12 a password file",
            "pg_dump --password-file=/run/secrets/pg app",
        ),
    ]);
    check_positives(&[(
        "12 --from-literal still counts",
        "kubectl create secret generic db --from-literal=password=S3cr3tPw!x",
        &["S3cr3tPw!x"],
    )]);
}

/// A tiny deterministic generator (no dependency): xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[test]
fn hostile_text_never_panics_and_never_grows_a_secret() {
    // Pieces that exercise every view and detector, glued at random: escapes next to
    // multi-byte characters, folds, PEM fragments, encoded URLs, markers.
    let pieces = [
        "\u{1b}",
        "\u{1b}[",
        "\u{1b}(",
        "\u{1b}]8;;",
        "\u{7}",
        "[0m",
        "é",
        "…",
        "•",
        "\n",
        "\r\n",
        "    ",
        "ghp_",
        " ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d ",
        "MIIEpAIBAAKCAQEA",
        "b3BlbnNzaC1rZXktdjE",
        "-----END RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
        "LS0tLS1CRUdJTi",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF",
        "password=",
        "token: ",
        "https://u:",
        "%3A",
        "%40",
        "@h.io",
        "[REDACTED:jwt]",
        "Set-Cookie: a=",
        "; Path=/",
        "db:5432:app:bob:",
        "=",
        "/",
        "+",
        "AAAA",
        "x",
        "*",
        "$",
        "'",
        "\"",
    ];
    let r = redactor();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..3000 {
        let n = 1 + (rng.next() % 40) as usize;
        let mut text = String::new();
        for _ in 0..n {
            text.push_str(rng.pick(&pieces));
        }
        // Sometimes make a long line of base64 so folds and key lines appear.
        if round % 7 == 0 {
            text.push_str(&"QUJDRA".repeat(13));
            text.push('\n');
            text.push_str(&"ZWZnaA".repeat(5));
        }
        let out = r.redact(&text);
        let cut = (rng.next() as usize) % (text.len() + 1);
        let (_, safe) = r.redact_until(&text, cut);
        assert!(safe <= out.len(), "{text:?}");
        let words: Vec<String> = text.split(' ').map(str::to_owned).collect();
        assert_eq!(r.redact_argv(&words).len(), words.len());
        assert!(
            !out.contains("ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"),
            "{text:?} -> {out:?}"
        );
    }
}

#[test]
fn hostile_shapes_stay_fast() {
    // Shapes that would be quadratic if a pass re-read what it had read: many key-start
    // lines in one body, many markers under many spans, many folds, many END lines.
    let r = redactor();
    let key_line = "MIIEpAIBAAKCAQEA1h2YfE1vWKTjHRH1yb0wdvuZvpknqu6SsVDa5+abL7WbT/ML\n";
    let texts = [
        key_line.repeat(20_000),
        "token=[REDACTED:x]".repeat(20_000),
        format!("{}\n", "Q".repeat(76)).repeat(20_000),
        "AAAA\n-----END PRIVATE KEY-----\n".repeat(20_000),
        "\u{1b}[1mx".repeat(50_000),
        format!("password={}b1", "a".repeat(200_000)),
        format!("{}\n", "ab=".repeat(30)).repeat(20_000),
    ];
    for text in &texts {
        let started = std::time::Instant::now();
        let out = r.redact(text);
        // Generous even for an unoptimised build on a busy machine; quadratic would take minutes.
        assert!(
            started.elapsed().as_secs() < 20,
            "{} bytes took {:?}",
            text.len(),
            started.elapsed()
        );
        assert!(!out.is_empty());
    }
}
