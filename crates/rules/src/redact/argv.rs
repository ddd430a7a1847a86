//! Secrets that an argument vector spreads over two words: `--password X`, `mysql -p X`,
//! `curl -u user:X`, `openssl … -passout pass:X`.
//!
//! Owns knowing which flag words take a secret as the next word: long and single-dash flags
//! whose name ends in a secret noun (`--password`, `--db-pass`, `-token`, `--api-key`,
//! `--client-secret`), and tools' own short flags (`-p` for mysql and mongo clients,
//! `sshpass` and `docker login`; `-a` for redis-cli; `-w` for ldap tools; `-P` for ipmitool,
//! sqlcmd and zip). It also knows a few glued forms (`mysql -pX`). It answers with the part
//! of a word to hide, never the text itself, and it must never hide an option, a
//! placeholder or a path in place of a value. It imports only its leaf sibling
//! [`super::placeholder`].

use super::placeholder::{is_path_like, is_placeholder};

/// What to hide in one word: from byte `from` to its end, under marker `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hide {
    pub word: usize,
    pub from: usize,
    pub kind: &'static str,
}

/// Secret nouns a long flag's name may end in.
const NOUNS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "passphrase",
    "pwd",
    "token",
    "secret",
    "api-key",
    "apikey",
    "api_key",
    "secret-key",
    "secret_key",
    "access-key",
    "auth-key",
    "bearer",
];

/// First words of a flag name that make it a switch, not a flag taking a value
/// (`--no-password`, `--ask-pass`, `--prompt-token`).
const SWITCHES: &[&str] = &[
    "no", "ask", "prompt", "skip", "require", "show", "allow", "disable", "enable", "without",
    "use", "reset", "print", "generate",
];

const MYSQL: &[&str] = &[
    "mysql",
    "mysqldump",
    "mysqladmin",
    "mysqlimport",
    "mysqlshow",
    "mysqlcheck",
    "mysqlpump",
    "mysqlsh",
    "mariadb",
    "mariadb-dump",
    "mariadb-admin",
    "mariadb-import",
    "mariadb-check",
    "mariadb-show",
];
const MONGO: &[&str] = &[
    "mongo",
    "mongosh",
    "mongodump",
    "mongorestore",
    "mongoexport",
    "mongoimport",
    "mongostat",
    "mongotop",
    "mongofiles",
];
/// Tools whose `-p` is a password only after their `login` subcommand.
const LOGIN: &[&str] = &[
    "docker", "podman", "nerdctl", "buildah", "helm", "oras", "skopeo", "crane", "az",
];
const LDAP: &[&str] = &[
    "ldapsearch",
    "ldapadd",
    "ldapmodify",
    "ldapdelete",
    "ldapwhoami",
    "ldappasswd",
    "ldapcompare",
    "ldapmodrdn",
    "ldapexop",
];

/// The tool an argv word names, as far as secret flags go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    Other,
    Mysql,
    Mongo,
    Sshpass,
    Login { logged: bool },
    Redis,
    Ldap,
    CapitalP,
    Curl,
    Openssl,
    Keytool,
    Smbclient,
}

fn tool_of(word: &str) -> Option<Tool> {
    let name = word.rsplit('/').next().unwrap_or(word);
    let tool = match name {
        n if MYSQL.contains(&n) => Tool::Mysql,
        n if MONGO.contains(&n) => Tool::Mongo,
        n if LOGIN.contains(&n) => Tool::Login { logged: false },
        n if LDAP.contains(&n) => Tool::Ldap,
        "sshpass" => Tool::Sshpass,
        "redis-cli" | "valkey-cli" | "keydb-cli" => Tool::Redis,
        "ipmitool" | "sqlcmd" | "bcp" | "zip" | "unzip" | "zipcloak" => Tool::CapitalP,
        "curl" => Tool::Curl,
        "openssl" => Tool::Openssl,
        "keytool" => Tool::Keytool,
        "smbclient" => Tool::Smbclient,
        _ => return None,
    };
    Some(tool)
}

/// How the word after a flag holds its secret.
#[derive(Clone, Copy)]
enum Value {
    /// The whole word.
    Whole(&'static str),
    /// After the first `:` (`user:password`); a word without one is left.
    AfterColon,
    /// After `pass:` (openssl); `env:`, `file:`, `fd:`, `stdin` are left.
    OpensslPass,
    /// After the first `%` (`user%password`).
    AfterPercent,
}

/// What the next word after `flag` is, for `tool`.
fn takes_secret(tool: Tool, flag: &str) -> Option<Value> {
    let short = match (tool, flag) {
        (Tool::Mysql, "-p") => Some(Value::Whole("mysql_cli_password")),
        (Tool::Mongo | Tool::Sshpass | Tool::Login { logged: true }, "-p") => {
            Some(Value::Whole("cli_password_flag"))
        }
        (Tool::Redis, "-a") | (Tool::Ldap, "-w") | (Tool::CapitalP, "-P") => {
            Some(Value::Whole("cli_password_flag"))
        }
        (Tool::Curl, "-u" | "--user" | "-U" | "--proxy-user") => Some(Value::AfterColon),
        (Tool::Openssl, "-pass" | "-passin" | "-passout" | "-password") => Some(Value::OpensslPass),
        (Tool::Openssl, "-k") => Some(Value::Whole("cli_password_flag")),
        (Tool::Smbclient, "-U" | "--user") => Some(Value::AfterPercent),
        (
            Tool::Keytool,
            "-storepass" | "-keypass" | "-srcstorepass" | "-deststorepass" | "-srckeypass"
            | "-destkeypass" | "-new",
        ) => Some(Value::Whole("cli_password_flag")),
        _ => None,
    };
    short.or_else(|| secret_flag(flag).then_some(Value::Whole("cli_password_flag")))
}

/// `--password`, `--db-pass`, `-token`, `--client-secret`: a flag (no `=`) whose name ends
/// in a secret noun and does not start with a switch word.
fn secret_flag(flag: &str) -> bool {
    let name = flag
        .strip_prefix("--")
        .or_else(|| flag.strip_prefix('-'))
        .unwrap_or("");
    if name.is_empty() || name.contains('=') || name.len() > 40 {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    let first = lower.split(['-', '_']).next().unwrap_or("");
    if SWITCHES.contains(&first) && lower != first {
        return false;
    }
    NOUNS.iter().any(|noun| {
        lower == *noun
            || lower
                .strip_suffix(noun)
                .is_some_and(|head| head.ends_with(['-', '_']))
    })
}

/// A word that cannot be a flag's secret value: another option, a placeholder, a path, a
/// `docker --secret` spec.
fn not_a_value(flag: &str, word: &str) -> bool {
    word.is_empty()
        || word.starts_with('-')
        || is_placeholder(word)
        || is_path_like(word)
        || (flag.ends_with("secret") && (word.starts_with("id=") || word.contains("src=")))
}

/// The parts of `argv`'s words that hold a secret because of the word before them (or, for
/// glued short flags, because of the tool).
pub(crate) fn hidden(argv: &[String]) -> Vec<Hide> {
    let mut out = Vec::new();
    let mut tool = Tool::Other;
    for (i, word) in argv.iter().enumerate() {
        if let Some(t) = tool_of(word) {
            tool = t;
        } else if word == "login"
            && let Tool::Login { .. } = tool
        {
            tool = Tool::Login { logged: true };
        }
        // `curl --user=bob:pw`, `curl -ubob:pw`: the credentials glued to their flag.
        if tool == Tool::Curl
            && let Some(glued) = ["--user=", "--proxy-user=", "-u", "-U"]
                .iter()
                .find(|f| word.starts_with(**f) && word.len() > f.len())
            && let Some(colon) = word[glued.len()..].find(':')
        {
            let from = glued.len() + colon + 1;
            if from < word.len() && !is_placeholder(&word[from..]) {
                out.push(Hide {
                    word: i,
                    from,
                    kind: "cli_password_flag",
                });
            }
        }
        // `mysql -pSECRET`: the password glued to its flag.
        if tool == Tool::Mysql
            && word.len() > 2
            && word.starts_with("-p")
            && !word.starts_with("--")
        {
            let value = &word[2..];
            if !is_placeholder(value) {
                out.push(Hide {
                    word: i,
                    from: 2,
                    kind: "mysql_cli_password",
                });
            }
        }
        let Some(prev) = i.checked_sub(1).map(|p| argv[p].as_str()) else {
            continue;
        };
        let Some(value) = takes_secret(tool, prev) else {
            continue;
        };
        if not_a_value(prev, word) {
            continue;
        }
        let from = match value {
            Value::Whole(_) => Some(0),
            Value::AfterColon => word.find(':').map(|p| p + 1),
            Value::AfterPercent => word.find('%').map(|p| p + 1),
            Value::OpensslPass => word.strip_prefix("pass:").map(|_| 5),
        };
        let kind = match value {
            Value::Whole(kind) => kind,
            _ => "cli_password_flag",
        };
        if let Some(from) = from.filter(|&f| f < word.len() && !is_placeholder(&word[f..])) {
            out.push(Hide {
                word: i,
                from,
                kind,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_flags() {
        for f in [
            "--password",
            "--db-pass",
            "-token",
            "--client-secret",
            "--API-KEY",
            "--pass",
        ] {
            assert!(secret_flag(f), "{f}");
        }
        for f in [
            "--password-stdin",
            "--no-password",
            "--ask-pass",
            "--token-file",
            "-p",
            "--passenger",
        ] {
            assert!(!secret_flag(f), "{f}");
        }
    }
}
