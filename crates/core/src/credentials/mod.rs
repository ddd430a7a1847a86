//! Credentials the model never sees (`[[terminal.credentials]]`, DESIGN §9).
//!
//! Owns what a credential is and what the proxy does with one, as decisions the proxy
//! (`safe_mcp_proxy`) carries out:
//! - a command's environment holds a **placeholder** for each credential: random per server
//!   start, shaped like the real token's type prefix (`ghp_`, `glpat-`) so tools accept it
//!   ([`placeholder`]);
//! - on a host the credential is bound to (its `hosts`, TLS-terminated by the proxy), the
//!   configured header gets the real value: where the request carries the placeholder, and
//!   where it carries no such header at all ([`Vault::authorization`]);
//! - a placeholder seen going to a host it is not bound to is refused ([`Vault::foreign`]);
//! - the real value coming back in a response is masked to the same length ([`Vault::mask`]);
//! - method and path rules on those hosts ([`hosts`]).
//!
//! What a credential is, how it is injected and the host rules are judged in
//! [`safe_mcp_rules::credentials`], re-exported here; this module holds the running vault.
//!
//! The real values live in a [`Vault`], read from the server's environment or a file at
//! start, files again on SIGHUP ([`Vault::reload`]); they are never formatted by `Debug`.
//! Every spelling of every value held since start stays masked ([`Vault::forms`]).
//! A leaf: it imports only the leaves `egress` and `random`.

pub use safe_mcp_rules::credentials::{
    CredentialSpec, Credentials, HostRule, Inject, KNOWN_PREFIXES, PathPattern, Secret, Source,
    SshKeySource, SshKeySpec, hosts, known_host_name, scan, type_prefix, value_of,
};

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use base64::Engine;

use crate::egress::DomainRule;

/// The shortest a placeholder's random part is.
const MIN_RANDOM: usize = 24;

/// A placeholder for `value`: its type prefix, then random letters and digits, as long as
/// the value (at least 24 random ones).
pub fn placeholder(value: &[u8]) -> std::io::Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let prefix = type_prefix(value);
    let want = value.len().saturating_sub(prefix.len()).max(MIN_RANDOM);
    let mut out = String::from_utf8_lossy(prefix).into_owned();
    while out.len() < prefix.len() + want {
        let bytes = hex::decode(crate::random::hex(64)?).unwrap_or_default();
        // 248 = 4 × 62: bytes above it are skipped, so every character is equally likely.
        for b in bytes.into_iter().filter(|b| *b < 248) {
            if out.len() == prefix.len() + want {
                break;
            }
            out.push(ALPHABET[usize::from(b % 62)] as char);
        }
    }
    Ok(out)
}

/// One credential at run time.
#[derive(Debug)]
pub struct Entry {
    /// The variable's name.
    pub name: String,
    /// The hosts it is bound to.
    pub hosts: Vec<DomainRule>,
    /// The placeholder commands see.
    pub placeholder: String,
    inject: Inject,
    source: Source,
    value: RwLock<Secret>,
    /// Every spelling of every value this entry has held since start (the value, and the
    /// base64 of a Basic pair): what is masked in answers and redacted in results.
    forms: RwLock<Vec<Vec<u8>>>,
}

impl Entry {
    /// Whether `host` (normalised) is one this credential is sent to.
    pub fn binds(&self, host: &str) -> bool {
        self.hosts.iter().any(|r| r.matches(host))
    }

    /// The header it goes into, lower case.
    pub fn header(&self) -> &str {
        self.inject.header()
    }

    /// The spellings a value travels in: as is, and a Basic pair's base64.
    fn spellings(&self, value: &Secret) -> Vec<Vec<u8>> {
        let mut forms = vec![value.expose().to_vec()];
        if let Inject::Basic { user, .. } = &self.inject {
            let pair = [user.as_bytes(), b":", value.expose()].concat();
            forms.push(
                base64::engine::general_purpose::STANDARD
                    .encode(pair)
                    .into_bytes(),
            );
        }
        forms
    }

    /// Adds `value`'s spellings to [`Entry::forms`].
    fn remember(&self, value: &Secret) {
        let fresh = self.spellings(value);
        let mut forms = self.forms.write().unwrap_or_else(|e| e.into_inner());
        for f in fresh {
            if !forms.contains(&f) {
                forms.push(f);
            }
        }
    }

    fn forms(&self) -> Vec<Vec<u8>> {
        self.forms
            .read()
            .map(|f| f.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    fn value(&self) -> Secret {
        self.value
            .read()
            .map(|v| v.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

/// The credentials of a running server: placeholders, real values, rules.
#[derive(Debug, Default)]
pub struct Vault {
    entries: Vec<Entry>,
    rules: Vec<HostRule>,
    upstream_ca_file: Option<PathBuf>,
    /// One automaton over every entry's forms, built at start and again when a reload adds
    /// a form: answers stream through the proxy a megabyte at a time, and one pass of a
    /// prebuilt searcher per piece costs a fraction of one naive search per form.
    masker: RwLock<Arc<Masker>>,
}

/// Every spelling of every real value, searched for at once.
#[derive(Debug, Default)]
struct Masker {
    /// `None` when there is nothing to mask.
    finder: Option<aho_corasick::AhoCorasick>,
    longest: usize,
}

impl Masker {
    /// The masker of every form `entries` hold; why not, when the searcher cannot be built
    /// (then nothing may be relayed unmasked: the caller fails).
    fn of(entries: &[Entry]) -> Result<Masker, String> {
        let forms: Vec<Vec<u8>> = entries.iter().flat_map(Entry::forms).collect();
        let longest = forms.iter().map(Vec::len).max().unwrap_or(0);
        if forms.is_empty() {
            return Ok(Masker::default());
        }
        // Standard semantics, so that overlapping matches are all found: a value that
        // overlaps another's spelling is masked whole, as each was when searched alone.
        let finder = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::Standard)
            .build(&forms)
            .map_err(|e| format!("the credentials' mask cannot be built: {e}"))?;
        Ok(Masker {
            finder: Some(finder),
            longest,
        })
    }
}

/// What [`Vault::authorization`] decided for a request's credential header.
#[derive(Debug, PartialEq, Eq)]
pub enum Authorization {
    /// Set the header to this value (the real credential).
    Set(Vec<u8>),
    /// Leave the request's own value (it carries no placeholder: the command's own).
    Keep,
}

impl Vault {
    /// The vault of `credentials`, with a fresh placeholder for each.
    pub fn new(credentials: &Credentials) -> std::io::Result<Vault> {
        let entries = credentials
            .specs
            .iter()
            .map(|spec| {
                let entry = Entry {
                    name: spec.name.clone(),
                    hosts: spec.hosts.clone(),
                    placeholder: placeholder(spec.value.expose())?,
                    inject: spec.inject.clone(),
                    source: spec.source.clone(),
                    value: RwLock::new(spec.value.clone()),
                    forms: RwLock::default(),
                };
                entry.remember(&spec.value);
                Ok(entry)
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let masker = Masker::of(&entries).map_err(std::io::Error::other)?;
        let masker = RwLock::new(Arc::new(masker));
        Ok(Vault {
            entries,
            rules: credentials.rules.clone(),
            upstream_ca_file: credentials.upstream_ca_file.clone(),
            masker,
        })
    }

    /// Whether there are no credentials.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each credential's variable and placeholder, for the commands' environment.
    pub fn env(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|e| (e.name.clone(), e.placeholder.clone()))
            .collect()
    }

    /// The credentials.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The credential bound to `host` (normalised): the first whose hosts match. The proxy
    /// terminates TLS to such a host, and only to such a host.
    pub fn bound(&self, host: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.binds(host))
    }

    /// The extra upstream certificates' file, if any.
    pub fn upstream_ca_file(&self) -> Option<&std::path::Path> {
        self.upstream_ca_file.as_deref()
    }

    /// The value the credential header of a request to `entry`'s host gets, given what the
    /// request `sent` in it: the real value where it sent the placeholder (raw, or inside a
    /// Basic pair) or nothing; its own value otherwise.
    pub fn authorization(&self, entry: &Entry, sent: Option<&[u8]>) -> Authorization {
        let carries = sent.is_none_or(|v| scan::carries(v, entry.placeholder.as_bytes()));
        if carries {
            Authorization::Set(entry.inject.render(entry.value().expose()))
        } else {
            Authorization::Keep
        }
    }

    /// The name of a credential whose placeholder `bytes` (a request's head, or the start of
    /// its body) carries to `host`, a host it is not bound to: raw, percent-encoded, or
    /// base64 in a Basic pair.
    pub fn foreign(&self, host: &str, bytes: &[u8]) -> Option<&str> {
        let decoded = scan::Decoded::of(bytes);
        self.entries
            .iter()
            .filter(|e| !e.binds(host))
            .find(|e| decoded.holds(e.placeholder.as_bytes()))
            .map(|e| e.name.as_str())
    }

    /// The longest spelling of a real value: a stream masked in pieces keeps this many
    /// bytes minus one back, so that a value split between two pieces is found whole.
    pub fn longest(&self) -> usize {
        self.masker().longest
    }

    /// Overwrites each spelling of each real value held since start (as is, and a Basic
    /// pair's base64) in `bytes` with as many `*` (the length kept, so a response's framing
    /// stands); how many were masked.
    pub fn mask(&self, bytes: &mut [u8]) -> usize {
        let masker = self.masker();
        let Some(finder) = &masker.finder else {
            return 0;
        };
        let spans: Vec<std::ops::Range<usize>> = finder
            .find_overlapping_iter(&*bytes)
            .map(|m| m.range())
            .collect();
        for span in &spans {
            bytes[span.clone()].fill(b'*');
        }
        spans.len()
    }

    fn masker(&self) -> Arc<Masker> {
        match self.masker.read() {
            Ok(m) => Arc::clone(&m),
            Err(e) => Arc::clone(&e.into_inner()),
        }
    }

    /// Every spelling of every real value held since start, for the redactor.
    pub fn forms(&self) -> Vec<String> {
        self.entries
            .iter()
            .flat_map(Entry::forms)
            .map(|f| String::from_utf8_lossy(&f).into_owned())
            .collect()
    }

    /// Whether `host` (normalised) has method and path rules.
    pub fn ruled(&self, host: &str) -> bool {
        self.rules.iter().any(|r| r.host.matches(host))
    }

    /// Whether a request `method path` to `host` (normalised) is allowed by the method and
    /// path rules; the refusal's reason when it is not.
    pub fn allows(&self, host: &str, method: &str, path: &str) -> Result<(), String> {
        hosts::allows(&self.rules, host, method, path)
    }

    /// Reads each `file:` credential again (SIGHUP); a line for each that failed (its old
    /// value stays) and each that changed.
    ///
    /// In three steps, so that no answer passes unmasked: every new value's forms are added
    /// and the masker that knows them is in place before any request carries a new value.
    /// When no masker can be built, no value changes.
    pub fn reload(&self) -> Vec<String> {
        let mut said = Vec::new();
        let mut fresh_values = Vec::new();
        for entry in &self.entries {
            let Source::File(path) = &entry.source else {
                continue;
            };
            match read_file(path) {
                Ok(fresh) => {
                    entry.remember(&fresh);
                    fresh_values.push((entry, path, fresh));
                }
                Err(why) => said.push(format!(
                    "{}: {why}; the value read before stays in use",
                    entry.name
                )),
            }
        }
        match Masker::of(&self.entries) {
            Ok(masker) => match self.masker.write() {
                Ok(mut m) => *m = Arc::new(masker),
                Err(e) => *e.into_inner() = Arc::new(masker),
            },
            Err(why) => {
                said.push(format!("{why}; every value read before stays in use"));
                return said;
            }
        }
        for (entry, path, fresh) in fresh_values {
            if let Ok(mut v) = entry.value.write()
                && *v != fresh
            {
                *v = fresh;
                said.push(format!(
                    "{}: read again from {}",
                    entry.name,
                    path.display()
                ));
            }
        }
        said
    }
}

/// A credential file's value: [`read_secret_file`], one line, the trailing newline dropped.
pub fn read_file(path: &std::path::Path) -> Result<Secret, String> {
    let bytes = read_secret_file(path)?;
    value_of(bytes.expose().to_vec()).map_err(|why| format!("{}: {why}", path.display()))
}

/// A secret file's bytes, as they are (an ssh private key, several lines): opened without
/// following a symlink, a regular file with one link, owned by this process's user, of mode
/// 0600 or stricter (no one else may read it), at most 64 KiB read.
pub fn read_secret_file(path: &std::path::Path) -> Result<Secret, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(at)?;
    let meta = file.metadata().map_err(at)?;
    if !meta.is_file() || meta.mode() & 0o077 != 0 || meta.nlink() != 1 {
        return Err(format!(
            "{} must be a regular file (no symlink, one link) with mode 0600",
            path.display()
        ));
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(format!(
            "{} must be owned by the server's user",
            path.display()
        ));
    }
    let mut bytes = Vec::new();
    file.take(64 * 1024).read_to_end(&mut bytes).map_err(at)?;
    Ok(Secret::new(bytes))
}

#[cfg(test)]
mod tests;
