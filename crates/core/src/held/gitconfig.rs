//! Git's configuration format, read just far enough to keep what cannot run anything.
//!
//! A repository the model made is its own to use inside the sandbox, but the operator may
//! later run git in it unconfined, and git's configuration names programs in dozens of
//! keys (`core.fsmonitor`, `core.pager`, aliases, filters, credential helpers, …) and pulls
//! in more through `include.path`. A list of dangerous keys would be the wrong shape: git
//! adds keys every release. So a model-made configuration is *rewritten* by the server
//! from the keys on `INERT`, each with a value of the shape that key takes, and nothing
//! else: deny by default. What this parser misreads can only be dropped, never promoted:
//! git reads the file the server wrote, not the model's.
//!
//! For the operator's own configuration the server changes nothing; it asks only which
//! values name a path ([`path_values`]), so that a hooks directory or an included file the
//! operator's configuration points at inside the jail is held like `.git/hooks`.

/// One `section[.subsection].key = value` line as git would read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Lower-cased section name.
    pub section: String,
    /// The subsection, case kept (`[remote "origin"]`).
    pub subsection: Option<String>,
    /// Lower-cased key name.
    pub key: String,
    /// The value, unquoted; `None` for a bare key (boolean true).
    pub value: Option<String>,
}

impl Setting {
    /// `section.subsection.key`, as `git config --list` names it.
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// The shape a kept value must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A short word: `true`, `0`, `sha256`, `input`.
    Word,
    /// A single printable line (a name, an e-mail address).
    Line,
    /// A branch or ref name, or a refspec.
    Ref,
    /// A remote's address: over the network (`https://`, `ssh://`, `git://`, `host:path`),
    /// or a local path the caller vouches for (a push there runs that repository's hooks).
    RemoteUrl,
}

/// The keys a model-made configuration keeps: `(section, has subsection, key, shape)`.
/// None of them names a program, a path git reads configuration from, or a hook directory.
const INERT: &[(&str, bool, &str, Shape)] = &[
    ("core", false, "repositoryformatversion", Shape::Word),
    ("core", false, "filemode", Shape::Word),
    ("core", false, "bare", Shape::Word),
    ("core", false, "logallrefupdates", Shape::Word),
    ("core", false, "ignorecase", Shape::Word),
    ("core", false, "precomposeunicode", Shape::Word),
    ("core", false, "symlinks", Shape::Word),
    ("core", false, "autocrlf", Shape::Word),
    ("core", false, "eol", Shape::Word),
    ("extensions", false, "objectformat", Shape::Word),
    ("extensions", false, "refstorage", Shape::Word),
    ("extensions", false, "worktreeconfig", Shape::Word),
    ("user", false, "name", Shape::Line),
    ("user", false, "email", Shape::Line),
    ("init", false, "defaultbranch", Shape::Ref),
    ("pull", false, "rebase", Shape::Word),
    ("pull", false, "ff", Shape::Word),
    ("merge", false, "ff", Shape::Word),
    ("fetch", false, "prune", Shape::Word),
    ("push", false, "default", Shape::Word),
    ("push", false, "autosetupremote", Shape::Word),
    ("remote", true, "url", Shape::RemoteUrl),
    ("remote", true, "pushurl", Shape::RemoteUrl),
    ("remote", true, "fetch", Shape::Ref),
    ("remote", true, "push", Shape::Ref),
    ("remote", true, "tagopt", Shape::Word),
    ("remote", true, "prune", Shape::Word),
    ("branch", true, "remote", Shape::Ref),
    ("branch", true, "merge", Shape::Ref),
    ("branch", true, "rebase", Shape::Word),
    ("submodule", true, "url", Shape::RemoteUrl),
    ("submodule", true, "active", Shape::Word),
    ("submodule", true, "branch", Shape::Ref),
];

/// Parses `text`. Lines it cannot read as git would are left out (and counted): the caller
/// only ever keeps what it read.
pub fn parse(text: &str) -> (Vec<Setting>, usize) {
    let mut out = Vec::new();
    let mut unread = 0;
    let mut section: Option<(String, Option<String>)> = None;
    for raw in text.lines() {
        let mut line = raw.trim_start();
        if line.starts_with('[') {
            match header(line) {
                Some((name, sub, rest)) => {
                    section = Some((name, sub));
                    line = rest.trim_start();
                }
                None => {
                    // An unreadable header: nothing after it belongs to a known section.
                    section = None;
                    unread += 1;
                    continue;
                }
            }
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (Some((name, sub)), Some((key, value))) = (&section, key_value(line)) else {
            unread += 1;
            continue;
        };
        out.push(Setting {
            section: name.clone(),
            subsection: sub.clone(),
            key,
            value,
        });
    }
    (out, unread)
}

/// `[name]`, `[name "sub"]` or `[name.sub]`, and what follows the `]`.
fn header(line: &str) -> Option<(String, Option<String>, &str)> {
    let inner = line.strip_prefix('[')?;
    if let Some((name, rest)) = inner.split_once(" \"") {
        let mut sub = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => sub.push(chars.next()?.1),
                '"' => {
                    let after = rest[i + 1..].strip_prefix(']')?;
                    return section_name(name).map(|n| (n, Some(sub), after));
                }
                c if c.is_control() => return None,
                c => sub.push(c),
            }
        }
        return None;
    }
    let (name, after) = inner.split_once(']')?;
    match name.split_once('.') {
        Some((n, sub)) => section_name(n).map(|n| (n, Some(sub.to_lowercase()), after)),
        None => section_name(name).map(|n| (n, None, after)),
    }
}

fn section_name(name: &str) -> Option<String> {
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .then(|| name.to_ascii_lowercase())
}

/// `key`, `key = value` (quotes, escapes and comments as git reads them). A line that
/// continues onto the next (a trailing backslash) is not read.
fn key_value(line: &str) -> Option<(String, Option<String>)> {
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(line.len());
    let key = &line[..end];
    if key.is_empty() || !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let rest = line[end..].trim_start();
    if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
        return Some((key.to_ascii_lowercase(), None));
    }
    let raw = rest.strip_prefix('=')?.trim_start();
    let mut value = String::new();
    let (mut quoted, mut pending_space) = (false, String::new());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                let escaped = match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'b' => '\u{8}',
                    '\\' => '\\',
                    '"' => '"',
                    _ => return None,
                };
                value.push_str(&std::mem::take(&mut pending_space));
                value.push(escaped);
                continue;
            }
            '#' | ';' if !quoted => break,
            c if c.is_whitespace() && !quoted => {
                pending_space.push(c);
                continue;
            }
            c => {
                value.push_str(&std::mem::take(&mut pending_space));
                value.push(c);
                continue;
            }
        }
        value.push_str(&std::mem::take(&mut pending_space));
    }
    if quoted {
        return None;
    }
    Some((key.to_ascii_lowercase(), Some(value)))
}

/// Whether `value` has `shape`; `local_ok` judges a remote given as a local path.
fn fits(shape: Shape, value: &str, local_ok: &dyn Fn(&str) -> bool) -> bool {
    let printable = !value.is_empty() && value.chars().all(|c| !c.is_control());
    match shape {
        Shape::Word => {
            !value.is_empty()
                && value.len() <= 32
                && value.chars().all(|c| c.is_ascii_alphanumeric())
        }
        Shape::Line => printable && value.len() <= 256,
        Shape::Ref => {
            printable
                && !value.starts_with('-')
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/_.-+*:^".contains(c))
        }
        Shape::RemoteUrl => printable && (network_url(value) || local_url(value, local_ok)),
    }
}

/// `https://`, `http://`, `ssh://`, `git://`, or scp's `[user@]host:path`: an address git
/// reaches over the network. A local path (or `file://`, `ext::`) could name a repository
/// whose hooks git would run on a push, so it is not kept.
fn network_url(value: &str) -> bool {
    if value.starts_with('-') || value.chars().any(char::is_whitespace) {
        return false;
    }
    for scheme in ["https://", "http://", "ssh://", "git://"] {
        if let Some(rest) = value.strip_prefix(scheme) {
            return !rest.is_empty() && !rest.starts_with('-');
        }
    }
    if value.contains("://") || value.contains("::") {
        return false; // another scheme, or a remote helper (`<transport>::<address>`)
    }
    match value.split_once(':') {
        Some((host, path)) => {
            let host = host.rsplit('@').next().unwrap_or(host);
            !host.is_empty()
                && !host.contains('/')
                && !host.starts_with('-')
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-_[]".contains(c))
                && !path.starts_with(':')
        }
        None => false,
    }
}

/// A local repository (`/abs`, `../rel`, `file://…`) that `local_ok` accepts; never a
/// remote helper (`<transport>::…`) or anything that reads as an option.
fn local_url(value: &str, local_ok: &dyn Fn(&str) -> bool) -> bool {
    let path = value.strip_prefix("file://").unwrap_or(value);
    !path.is_empty()
        && !path.starts_with('-')
        && !path.contains("::")
        && (!path.contains(':') || path.contains('/'))
        && local_ok(path)
}

/// What of `settings` a model-made repository keeps, and the names of what it loses;
/// `local_ok` judges a remote given as a local path.
pub fn keep_inert(
    settings: &[Setting],
    local_ok: &dyn Fn(&str) -> bool,
) -> (Vec<Setting>, Vec<String>) {
    let (mut kept, mut dropped) = (Vec::new(), Vec::new());
    for s in settings {
        let inert = INERT.iter().any(|(section, sub, key, shape)| {
            *section == s.section
                && *sub == s.subsection.is_some()
                && *key == s.key
                && s.subsection
                    .as_deref()
                    .is_none_or(|n| fits(Shape::Line, n, local_ok))
                && s.value
                    .as_deref()
                    .is_some_and(|v| fits(*shape, v, local_ok))
        });
        if inert {
            kept.push(s.clone());
        } else {
            dropped.push(s.name());
        }
    }
    (kept, dropped)
}

/// `settings` written the way git reads them back exactly: every value quoted and escaped.
pub fn render(settings: &[Setting]) -> String {
    let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out =
        String::from("# Rewritten by safe-mcp: only settings that run nothing were kept.\n");
    let mut current: Option<(&str, Option<&str>)> = None;
    for s in settings {
        let here = (s.section.as_str(), s.subsection.as_deref());
        if current != Some(here) {
            match here.1 {
                Some(sub) => out.push_str(&format!("[{} \"{}\"]\n", here.0, quote(sub))),
                None => out.push_str(&format!("[{}]\n", here.0)),
            }
            current = Some(here);
        }
        let value = s.value.as_deref().unwrap_or("true");
        out.push_str(&format!(
            "\t{} = \"{}\"\n",
            s.key,
            quote(value).replace('\n', "\\n").replace('\t', "\\t")
        ));
    }
    out
}

/// Every word of every value in `text` that could be a path (it holds a `/`, or starts
/// with `.` or `~`): what the operator's configuration may point git at.
pub fn path_values(text: &str) -> Vec<String> {
    let (settings, _) = parse(text);
    let mut out = Vec::new();
    for value in settings.iter().filter_map(|s| s.value.as_deref()) {
        let value = value.strip_prefix('!').unwrap_or(value);
        for word in value.split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|') {
            let word = word.trim_matches(|c| c == '\'' || c == '"');
            let word = word
                .strip_prefix("gitdir:")
                .or_else(|| word.strip_prefix("gitdir/i:"))
                .unwrap_or(word);
            if word.contains('/') || word.starts_with('.') || word.starts_with('~') {
                out.push(word.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> (Vec<String>, Vec<String>) {
        let (settings, _) = parse(text);
        let (kept, dropped) = keep_inert(&settings, &|p: &str| !p.starts_with("/cache"));
        (kept.iter().map(Setting::name).collect(), dropped)
    }

    #[test]
    fn a_model_made_config_keeps_only_what_runs_nothing() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tfsmonitor = touch /tmp/x\n\tpager = less\n[alias]\n\tst = !sh -c evil\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\tuploadpack = evil\n[remote \"local\"]\n\turl = ../elsewhere.git\n[remote \"cache\"]\n\turl = file:///cache/evil.git\n[include]\n\tpath = ../x\n[user]\n\tname = A \"B\" C\n";
        let (kept, dropped) = names(text);
        assert_eq!(
            kept,
            [
                "core.repositoryformatversion",
                "core.filemode",
                "remote.origin.url",
                "remote.origin.fetch",
                "remote.local.url",
                "user.name"
            ]
        );
        for d in [
            "core.fsmonitor",
            "core.pager",
            "alias.st",
            "remote.origin.uploadpack",
            "remote.cache.url",
            "include.path",
        ] {
            assert!(dropped.contains(&d.to_owned()), "{d}: {dropped:?}");
        }
    }

    #[test]
    fn what_is_written_back_reads_back_the_same() {
        let (settings, _) = parse(
            "[user]\n\tname = \"a \\\"quoted\\\" name\" # c\n[branch \"x\\\"y\"]\n\tmerge = refs/heads/x\n",
        );
        let (kept, _) = keep_inert(&settings, &|_: &str| false);
        let again = parse(&render(&kept)).0;
        assert_eq!(again, kept);
        assert_eq!(kept[0].value.as_deref(), Some("a \"quoted\" name"));
    }

    #[test]
    fn tricks_are_dropped_not_promoted() {
        // A continuation line, a header with a key on it, odd case, a bare key.
        let (kept, dropped) = names(
            "[user]\n\tname = a\\\nfsmonitor = evil\n[core] fsMonitor = evil\n[CORE]\n\tFileMode\n[core.x]\n\tbare = true\n",
        );
        assert!(kept.is_empty(), "{kept:?}");
        assert!(
            dropped.contains(&"core.fsmonitor".to_owned()),
            "{dropped:?}"
        );
        assert!(!network_url("-oProxyCommand=x:y"));
        assert!(network_url("git@github.com:o/r.git"));
        assert!(!network_url("file:///tmp/r"));
        assert!(!network_url("ext::sh -c x"));
    }

    #[test]
    fn path_values_name_what_the_operator_config_points_at() {
        let found = path_values(
            "[core]\n\thooksPath = .githooks\n\tpager = less\n[include]\n\tpath = ../shared.inc\n[includeIf \"gitdir:~/w/\"]\n\tpath = /srv/p/x.inc\n[alias]\n\tb = !./scripts/build.sh --fast\n",
        );
        assert_eq!(
            found,
            [
                ".githooks",
                "../shared.inc",
                "/srv/p/x.inc",
                "./scripts/build.sh"
            ]
        );
    }
}
