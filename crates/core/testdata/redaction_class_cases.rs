// Data for tests/redaction/classes.rs: fake secrets in the shapes each class of round-2 finding
// took, and look-alikes that must stay.

// ---- 1. A private key whose BEGIN line was dropped ----

const RSA_BODY: &str = "MIIEpAIBAAKCAQEA1h2YfE1vWKTjHRH1yb0wdvuZvpknqu6SsVDa5+abL7WbT/ML\nlA2yApsm6Dfx3hlD+ZBam+UmhI1prja37ZQXwZ0N9JUpsPs5/lPb1sjBR0eMgLkl\nYVfp6Ifksvk+vM9k2b6rq+bMQNEBXddGQZ/Spl0vqonHKC3k4rONpw6v2OqaYPmb\n4MSvNqRSzh7hFq6265DE5wLrUaWJ/dIILBGsKgpIikY5IcCCtcv7uCp//jVKFNRQ\nHfD8NYfgIfp9Nxm5sTSxoR5hOZsINwJ6yyrFdgRWUDUMFciEmZYSE3bUdghXWjQp\nnC9c09gQLsgO6+tS5DvrYoT+VUtCJxr6bnMLRWnd56hZ0ujD5C8Kt379ojG7tGdI\nNZfePyi7pDXVt+yOqn1cXu7HpvoWg9sZnbNQMC9FYcNBm2tcB8DYCgAD981eh1uo\n1OxV5rOt5syusXap7/YcDfxu2Afp9mnRap5mx78silReaetqfamSf0CPJCkk+lgQ\nqfamSf0CPJCkk+lgQ1OxV5rOt5syusX==";

const HEADLESS_KEYS: &[(&str, &str, &[&str])] = &[
    (
        "1 sed 1d (RSA, END line kept)",
        concat!(
            "$ sed 1d deploy.pem\n",
            "MIIEpAIBAAKCAQEA1h2YfE1vWKTjHRH1yb0wdvuZvpknqu6SsVDa5+abL7WbT/ML\nlA2yApsm6Dfx3hlD+ZBam+UmhI1prja37ZQXwZ0N9JUpsPs5/lPb1sjBR0eMgLkl\nYVfp6Ifksvk+vM9k2b6rq+bMQNEBXddGQZ/Spl0vqonHKC3k4rONpw6v2OqaYPmb\n4MSvNqRSzh7hFq6265DE5wLrUaWJ/dIILBGsKgpIikY5IcCCtcv7uCp//jVKFNRQ\nHfD8NYfgIfp9Nxm5sTSxoR5hOZsINwJ6yyrFdgRWUDUMFciEmZYSE3bUdghXWjQp\nnC9c09gQLsgO6+tS5DvrYoT+VUtCJxr6bnMLRWnd56hZ0ujD5C8Kt379ojG7tGdI\nNZfePyi7pDXVt+yOqn1cXu7HpvoWg9sZnbNQMC9FYcNBm2tcB8DYCgAD981eh1uo\n1OxV5rOt5syusXap7/YcDfxu2Afp9mnRap5mx78silReaetqfamSf0CPJCkk+lgQ\nqfamSf0CPJCkk+lgQ1OxV5rOt5syusX==",
            "\n-----END RSA PRIVATE KEY-----\n$ "
        ),
        &[RSA_BODY],
    ),
    (
        "1 tail -n +2 | head (PKCS#8, no END line: DER header)",
        "$ tail -n +2 key.pem | head -n 5\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKdFhxPbztOBEMvaLAHQFOlPOLHEsKkJ\nbu7TU7O6hohKfAlrw+gNo4VUiXoO+BQkPsiaF1q8wLdWeUOm2ccXp5mc7NiY5g8U\niPHu7d/fZ/tGtaY2t8jJ6BRWqjNEcoU29suMDAVoy/gLF0f19X1TttKN9doVB0YZ\nd8iJCJzZXr/MeinjzOEa4YI23Hp5QjUbjra2sqOWSLNVR0TsEx4WPFKtgfzMxOuN\nJJXC6q4mHMCwFczmTScOTNYNMBxwmEV3AJswODdQekQoj+Bh85DOS9zwBTxodiBL\n$ ",
        &[
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKdFhxPbztOBEMvaLAHQFOlPOLHEsKkJ",
            "bu7TU7O6hohKfAlrw+gNo4VUiXoO+BQkPsiaF1q8wLdWeUOm2ccXp5mc7NiY5g8U",
            "iPHu7d/fZ/tGtaY2t8jJ6BRWqjNEcoU29suMDAVoy/gLF0f19X1TttKN9doVB0YZ",
            "d8iJCJzZXr/MeinjzOEa4YI23Hp5QjUbjra2sqOWSLNVR0TsEx4WPFKtgfzMxOuN",
            "JJXC6q4mHMCwFczmTScOTNYNMBxwmEV3AJswODdQekQoj+Bh85DOS9zwBTxodiBL",
        ],
    ),
    (
        "1 grep -v BEGIN (OpenSSH, 70 columns)",
        "$ grep -v BEGIN ~/.ssh/id_ed25519\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQm9sO/VblSELy3R+ks3MZu791RExp\ngQ0HoaNu5xiyUNbFX/5cCJaZiG1DovYDxTVGSm6mRwEBwznseh/isZYYUlsnzLHn1icy4T\nZMzK6uRmK8zxS0R1t2k6nUZ+H7/2DnQthUz7IWZTP80sQoioHLcq7N3MdTWcZ1McVwVleJ\nZl5ElXWa1k+U0AN27emg+jxx2LXt==\n-----END OPENSSH PRIVATE KEY-----\n",
        &[
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQm9sO/VblSELy3R+ks3MZu791RExp",
            "gQ0HoaNu5xiyUNbFX/5cCJaZiG1DovYDxTVGSm6mRwEBwznseh/isZYYUlsnzLHn1icy4T",
            "ZMzK6uRmK8zxS0R1t2k6nUZ+H7/2DnQthUz7IWZTP80sQoioHLcq7N3MdTWcZ1McVwVleJ",
            "Zl5ElXWa1k+U0AN27emg+jxx2LXt==",
        ],
    ),
    (
        "1 tail -n 4 (middle of a key, END line kept)",
        "$ tail -n 4 server.key\nnC9c09gQLsgO6+tS5DvrYoT+VUtCJxr6bnMLRWnd56hZ0ujD5C8Kt379ojG7tGdI\nNZfePyi7pDXVt+yOqn1cXu7HpvoWg9sZnbNQMC9FYcNBm2tcB8DYCgAD981eh1uo\n6k917BQ34oa81l2YzorRceQMMWeLtGVm+w==\n-----END PRIVATE KEY-----\n",
        &[
            "nC9c09gQLsgO6+tS5DvrYoT+VUtCJxr6bnMLRWnd56hZ0ujD5C8Kt379ojG7tGdI",
            "NZfePyi7pDXVt+yOqn1cXu7HpvoWg9sZnbNQMC9FYcNBm2tcB8DYCgAD981eh1uo",
            "6k917BQ34oa81l2YzorRceQMMWeLtGVm+w==",
        ],
    ),
    (
        "1 EC key (SEC1), BEGIN dropped, indented in YAML",
        "tls:\n  key: |\n    MHcCAQEEII6BXijOpFLkTi7qmsGZu/tlRQ+FIxhulJwPygateI6SoAoGCCqGSM49\n    AwEHoUQDQgAEmrNBfiZXVGJHkvil2GPIvLYeoqrhwg5DedMuQ4ttL7mm/8tMoMnA\n    6k917BQ34oa81l2YzorRceQMMWeLtGVm+w==\n    -----END EC PRIVATE KEY-----\n",
        &[
            "MHcCAQEEII6BXijOpFLkTi7qmsGZu/tlRQ+FIxhulJwPygateI6SoAoGCCqGSM49",
            "AwEHoUQDQgAEmrNBfiZXVGJHkvil2GPIvLYeoqrhwg5DedMuQ4ttL7mm/8tMoMnA",
            "6k917BQ34oa81l2YzorRceQMMWeLtGVm+w==",
        ],
    ),
    (
        "1 encrypted PKCS#8, BEGIN dropped, cut before END",
        "MIIFHDBOBgkqhkiG9w0BBQ0wQYmVR6d35LkG4JugVqnm6/Ac8baIlef25cWQbQfc\n9vnFWWMN1t3bSCe3/uISyFuT0nk0EekhFC0nevy0uiqC5iiaxVb/rZKFG8aNPuCx\nrMX8xip5QbVFdTRI3rvLe4Gb9alp1Vp5BtjgnxIBfyIu+jrB8UvqUv6a2UqWSOYY\nTLwcr9jSGqP8GT0FENFp+PnmvyjLFm1v2vi9cMWwMGzb1EkEJYlOeZVgSTm2Wblk",
        &[
            "MIIFHDBOBgkqhkiG9w0BBQ0wQYmVR6d35LkG4JugVqnm6/Ac8baIlef25cWQbQfc",
            "9vnFWWMN1t3bSCe3/uISyFuT0nk0EekhFC0nevy0uiqC5iiaxVb/rZKFG8aNPuCx",
            "rMX8xip5QbVFdTRI3rvLe4Gb9alp1Vp5BtjgnxIBfyIu+jrB8UvqUv6a2UqWSOYY",
            "TLwcr9jSGqP8GT0FENFp+PnmvyjLFm1v2vi9cMWwMGzb1EkEJYlOeZVgSTm2Wblk",
        ],
    ),
    (
        "1 legacy encrypted PEM, BEGIN dropped",
        "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\nr39aEmo/X91FS4BdyE0xqbpAgSLWxFILFawQOek36m7MgJomxLJpwSMNhj29lggv\nle0j0kOMbcU8C0EnvIpwHSVOepV0FXtnkes3EdlmpSh9Ngxe6KLexcvyCQijsBE5\nuRw9iLY4Ky5p6KIaH8Du==\n-----END RSA PRIVATE KEY-----",
        &[
            "r39aEmo/X91FS4BdyE0xqbpAgSLWxFILFawQOek36m7MgJomxLJpwSMNhj29lggv",
            "le0j0kOMbcU8C0EnvIpwHSVOepV0FXtnkes3EdlmpSh9Ngxe6KLexcvyCQijsBE5",
            "uRw9iLY4Ky5p6KIaH8Du==",
        ],
    ),
];

const HEADLESS_KEEPS: &[(&str, &str)] = &[
    (
        "1 certificate body without its BEGIN line",
        "$ sed 1d ca.pem\nMIIDdzCCAl+gAwIBAgIEuHuf18FZTKTJPOFQ8O30B00EMa8vFYTFP0HN501N0uU1\nnyVEKV/PbXN2rDsJ6c510XHJhts+EaCOldDE5NBLTml/AxKG7k5HgsYr0P7kpAG6\noa8yX7LO4L3EPZKD7XyOHvJVtK/U0jtJt8JNVd0LatlvOaIM2/FNOJFvEo4d2G4u\nrEO+kwelLBykVERtz8A0SC8MM5YkxhuQSTaPLZ9Btnk88tpkkGRARZ7elriQg5h0\n-----END CERTIFICATE-----\n",
    ),
    (
        "1 public key body without its BEGIN line",
        "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u\n-----END PUBLIC KEY-----",
    ),
    (
        "1 an ordinary base64 blob in 64 columns",
        "$ base64 -w 64 /bin/true | head -n 3\nf0VMRgIBAQAAAAAAAAAAAAMAPgABAAAAYCIAAAAAAABAAAAAAAAAAPDEAAAAAAAA\nAAAAAEAAOAANAEAAHwAeAAYAAAAEAAAAQAAAAAAAAABAAAAAAAAAAEAAAAAAAAAA\nGAIAAAAAAAAYAgAAAAAAAAgAAAAAAAAAAwAAAAQAAAAYAwAAAAAAABgDAAAAAAAA\n",
    ),
    (
        "1 a base64 text in 76 columns",
        "TG9yZW0gaXBzdW0gZG9sb3Igc2l0IGFtZXQsIGNvbnNlY3RldHVyIGFkaXBpc2NpbmcgZWxpdCwg\nc2VkIGRvIGVpdXNtb2QgdGVtcG9yIGluY2lkaWR1bnQgdXQgbGFib3JlIGV0IGRvbG9yZSBtYWdu\nYSBhbGlxdWEuIFV0IGVuaW0gYWQgbWluaW0gdmVuaWFtLCBxdWlzIG5vc3RydWQ=\n",
    ),
];

// ---- 2. base64-encoded PEM in kubeconfig / Secret `*-data` fields ----

const KUBE_KEY: &str = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBUEgxcWhUNjFxdGM0eGF0d3M4cGhQOW5oRnlKZm01ZGk0UHpKNTlGSHo1cjFwWTRPakUyakJNcHRVc0dyN0NtWSt1Q3UzWlIxelRPbFVjUjY0Y1hRTGlvRG5rSElmeElxMkhadC9QbEpoeDJqSWNsSGtDaUhwNmJSMUlxZkVvdUhneHpOTkFMNXdJU2NHZWJjeThGNW4zL1lOQkRSenJaU2dxYmpHM3Voa1dLRkxmNnh1STVhSFVRUEZlTkJUeGFRV2s4SnpGYWwKLS0tLS1FTkQgUlNBIFBSSVZBVEUgS0VZLS0tLS0K";

const KUBE_EC_KEY: &str = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUhsc1pmWWNNTURrdFhQL3RLc2YycmNEa2RmclVuVzVnY0YrSGE2aWxpOEdqSEVBRDYvV2o5S2Z6anNRR01yYjloK0ltQitMSzc3N3B6Tms4Y0w2ajVJWEFBamxzSFVxSm9VRC8KLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=";

const KUBE_CERT: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURkekNDQWwrZ0F3SUJBZ0lFK1lkdWErNVpNczFTV09wUWFQUllwemJMR1ZpWVhqVTJKZ0puZ0t0RkkzT3lWMmRaQWtnMDVySytncXY4MVJLTUdIWkVNOVlwdnVqQS9DNVE1MnJ5Rmx3UmxPRVZIemMwWDBBV0lSaC9KVXFCbElGWFo1M05jcWUyOCthalk3NUZuQ3R0bjZrZmFxRGVNcUczb21qTXlYCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";

// ---- 3. Tokens inside ANSI colour sequences ----

const ANSI: &[(&str, &str, &[&str])] = &[
    (
        "3 coloured token",
        "  \u{1b}[32m✓\u{1b}[0m Token: \u{1b}[1mghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d\u{1b}[0m\n",
        &["ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"],
    ),
    (
        "3 escape between prefix and body",
        "token: \u{1b}[2mghp_\u{1b}[0m\u{1b}[33mu8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d\u{1b}[0m",
        &["u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"],
    ),
    (
        "3 escape inside the body",
        "GITLAB_TOKEN=glpat-\u{1b}[4mIBXuDL7Dxt\u{1b}[24mpYlSXpfKtH done",
        &["IBXuDL7Dxt", "pYlSXpfKtH"],
    ),
    (
        "3 coloured key and value",
        "\u{1b}[36mDB_PASSWORD\u{1b}[0m=\u{1b}[33mS3cr3tValue99!\u{1b}[0m\n",
        &["S3cr3tValue99!"],
    ),
    (
        "3 coloured JSON",
        "{\u{1b}[1;34m\"access_token\"\u{1b}[0m: \u{1b}[0;32m\"gho_KLzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFR\"\u{1b}[0m}",
        &["gho_KLzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFR"],
    ),
];

// ---- 4. Tokens folded at 64/76/80 columns ----

const JWT_L1: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFj";

const JWT_L2: &str =
    "Y291bnQ6ZGVmYXVsdDpjaSIsImlzcyI6Imt1YmVybmV0ZXMvc2VydmljZWFjY291bnQifQ.ksnRH9ucA";
const JWT_L3: &str =
    "UsdMlHUvTCQCyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLE";

const FOLDED: &[(&str, &str, &[&str])] = &[
    (
        "4 JWT folded at 80 columns",
        concat!(
            "Name:         ci-token\nType:         kubernetes.io/service-account-token\n\nData\n====\ntoken:      ",
            "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFj\n",
            "Y291bnQ6ZGVmYXVsdDpjaSIsImlzcyI6Imt1YmVybmV0ZXMvc2VydmljZWFjY291bnQifQ.ksnRH9ucA\n",
            "UsdMlHUvTCQCyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLE\n",
            "ca.crt:     1066 bytes\n"
        ),
        &[JWT_L1, JWT_L2, JWT_L3],
    ),
    (
        "4 JWT folded at 80 columns with indented continuations",
        concat!(
            "    token:  eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFj\n",
            "            Y291bnQ6ZGVmYXVsdDpjaSIsImlzcyI6Imt1YmVybmV0ZXMvc2VydmljZWFjY291bnQifQ.ksnRH9ucA\n",
            "            UsdMlHUvTCQCyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLE\n"
        ),
        &[JWT_L1, JWT_L2, JWT_L3],
    ),
    (
        "4 fine-grained PAT folded at 76 columns",
        "GITHUB_TOKEN=github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDe\nFgHiJkLmNoPqRsTuVwXyZ01234567\n",
        &[
            "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDe",
            "FgHiJkLmNoPqRsTuVwXyZ01234567",
        ],
    ),
    (
        "4 a prefix alone at the end of a line",
        "curl -H 'PRIVATE-TOKEN: see below' https://gitlab.example.com/api/v4/ -v glpat-\nIBXuDL7DxtpYlSXpfKtH\n",
        &["IBXuDL7DxtpYlSXpfKtH"],
    ),
];

// ---- 6. URL-encoded basic-auth credentials ----

const URL_ENCODED: &[(&str, &str, &[&str])] = &[
    (
        "6 encoded characters in the password",
        "DATABASE_URL=postgresql://app:p%40ss%21word42@db.internal:5432/app",
        &["p%40ss%21word42"],
    ),
    (
        "6 encoded characters, https",
        "Cloning into 'repo'...\nfatal: unable to access 'https://deploy:S3cr%3Dt%2Fpw%21@git.example.com/r.git/'",
        &["S3cr%3Dt%2Fpw%21"],
    ),
    (
        "6 %3A between user and password",
        "remote: https://bot%40acme.com%3AT0kenValue%2Fabc%3D%3D@git.example.com/r.git",
        &["T0kenValue%2Fabc%3D%3D"],
    ),
    (
        "6 a whole URL encoded into a query parameter",
        "GET /login?next=https%3A%2F%2Fdeploy%3AHunter2Secret%2521x%40git.example.com%2Frepo HTTP/1.1",
        &["Hunter2Secret%2521x"],
    ),
];

// ---- 7. The back half of a split token ----

const SPLIT: &[(&str, &str, &[&str])] = &[
    (
        "7 Python repr wrapped at an odd width",
        "{'access_token': 'ghp_u8jzPde0Ig\n                  xLd6GncfBAepfJBd0Kh8oOOL8d'}\n",
        &["xLd6GncfBAepfJBd0Kh8oOOL8d"],
    ),
    (
        "7 JSON log line split by a writer",
        "{\"level\":\"debug\",\"token\":\"gho_KLzdocJ2isAj\nIhKtJ0RlgLKOmxgJTeKdNnFR\"}\n",
        &["IhKtJ0RlgLKOmxgJTeKdNnFR"],
    ),
    (
        "7 JWT whose signature runs onto the next line",
        "> Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJjaSJ9.ksnRH9ucAUsdMlHUvTCQ\nCyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLE\n> Accept: */*\n",
        &["CyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLE"],
    ),
    (
        "7 Slack token split across two lines",
        "SLACK_BOT_TOKEN=xoxb-75749118625-276018955597-LZDe1f8\nrESQedUStPKR0CsTy\n",
        &["rESQedUStPKR0CsTy"],
    ),
];

const MASKED: &[(&str, &str)] = &[
    ("10 gho_****", "token: gho_****"),
    (
        "10 gh auth status",
        "  - Token: gho_************************************",
    ),
    ("10 sk-…****", "OPENAI_API_KEY=sk-…****"),
    ("10 a masked middle", "api_key=sk-proj-****************abcd"),
    ("10 xxxx", "password: xxxx"),
    ("10 x-masked groups", "TOKEN=xxxx-xxxx-xxxx-xxxx"),
    ("10 <redacted>", "password=<redacted>"),
    ("10 [REDACTED]", "password=[REDACTED]"),
    ("10 ***REDACTED***", "DB_PASSWORD=***REDACTED***"),
    ("10 ${TOKEN}", "token=${TOKEN}"),
    ("10 $SECRET", "client_secret: $SECRET"),
    ("10 bullets", "\"password\": \"••••••••\""),
    (
        "10 aws configure list",
        "secret_key     ****************EKEY shared-credentials-file",
    ),
    (
        "10 a masked URL password",
        "origin  https://bot:****@github.com/acme/app.git (fetch)",
    ),
    ("10 Bearer ***", "Authorization: Bearer ***"),
    (
        "10 a masked Stripe key",
        "STRIPE_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
    ),
    (
        "10 a masked AWS key id",
        "aws_access_key_id = AKIAXXXXXXXXXXXXXXXX",
    ),
    (
        "10 our own markers",
        "token=[REDACTED:github_pat] and Authorization: Bearer [REDACTED:jwt]",
    ),
    (
        "10 a cookie marker",
        "Cookie: session=[REDACTED:http_cookie]",
    ),
];
