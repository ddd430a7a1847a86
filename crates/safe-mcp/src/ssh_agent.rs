//! The server's own SSH agent (issue 54): it holds only the policy's ssh keys, and signs
//! only what the policy lets it, each signature recorded before it is made.
//!
//! Commands reach it through `SSH_AUTH_SOCK` ([`safe_mcp_core::agent_dir`]); the key's file
//! is never in their view, so the agent is the only way to use the key, and no command
//! ever holds its bytes. The agent protocol is `ssh-agent-lib`'s, the keys `ssh-key`'s
//! (RustCrypto; or the operator's running agent, asked for one key: [`crate::ssh_keys`]):
//! we write only the decisions, which an operator's running agent (`ssh-add -h`) cannot
//! make per request, and which OpenSSH's own agent does not record. A request to sign is
//! granted only when it is an SSH signature (`SSHSIG`) in the `git` namespace (`git commit
//! -S` with `gpg.format = ssh`, through `ssh-keygen -Y sign -U`) by a key with `sign =
//! true`, or an SSH login in a session bound to a host the key's entry names and pins
//! ([`crate::ssh_bind`]); everything else (another namespace, an unbound login, a key this
//! agent does not hold) is refused, and the refusal is recorded with the policy key that
//! would be needed. Adding or removing keys, locking and other extensions get the
//! protocol's failure.
//!
//! Each record is an `ssh` record: the key's name, what was signed (the namespace, the
//! hash algorithm and the hash of the message: a commit's content hashed, which
//! `git cat-file commit` of the commit, its signature left out, hashes again), the login
//! (host and user), or why not.
//! The agent's identity list (the public keys) is added to the redactor at start, so it
//! never reaches a result either.

use std::sync::Arc;

use safe_mcp_core::terminal::TerminalService;
use serde_json::json;
use ssh_agent_lib::agent::Session;
use ssh_agent_lib::error::AgentError;
use ssh_agent_lib::proto::{Identity, SignRequest};
use ssh_agent_lib::ssh_key::{self, Signature};

use crate::ssh_keys::Key;

/// One key as the agent holds it: what it may sign, the hosts it may log in to and the
/// host keys pinned for them.
struct Held {
    name: String,
    key: Arc<Key>,
    sign: bool,
    hosts: Vec<String>,
    pinned: Vec<(String, ssh_key::public::KeyData)>,
}

/// The agent: the keys, the service whose trail it writes, and (per connection: the
/// agent is cloned for each) the host an SSH session bound this connection to.
#[derive(Clone)]
struct Agent {
    keys: Arc<Vec<Held>>,
    service: Arc<TerminalService>,
    bound: Option<crate::ssh_bind::Bound>,
}

/// What a request asks to have signed.
#[derive(Debug, PartialEq, Eq)]
enum Signing<'a> {
    /// An SSH signature (`ssh-keygen -Y sign`): its namespace, hash algorithm and the hash
    /// of the message.
    Sshsig {
        namespace: &'a str,
        hash_algorithm: &'a str,
        hash: &'a [u8],
    },
    /// Anything else: an SSH login's user-authentication request, or data of no known
    /// shape.
    Other,
}

/// What `data` is: the blob `ssh-keygen -Y sign` hands an agent is `SSHSIG`, then the
/// namespace, a reserved string, the hash algorithm and the message's hash (OpenSSH's
/// PROTOCOL.sshsig), and nothing after.
fn signing(data: &[u8]) -> Signing<'_> {
    let parse = || {
        let rest = data.strip_prefix(b"SSHSIG")?;
        let (namespace, rest) = crate::ssh_bind::string(rest)?;
        let (_reserved, rest) = crate::ssh_bind::string(rest)?;
        let (hash_algorithm, rest) = crate::ssh_bind::string(rest)?;
        let (hash, rest) = crate::ssh_bind::string(rest)?;
        rest.is_empty().then_some(Signing::Sshsig {
            namespace: std::str::from_utf8(namespace).ok()?,
            hash_algorithm: std::str::from_utf8(hash_algorithm).ok()?,
            hash,
        })
    };
    parse().unwrap_or(Signing::Other)
}

/// Why a request is refused, for the record and the refusal.
fn refused(why: String) -> AgentError {
    AgentError::Other(why.into())
}

impl Agent {
    /// Appends an `ssh` record, durable: a signature is made only once its record is.
    fn record(&self, entry: serde_json::Value) -> Result<(), AgentError> {
        self.service
            .gate()
            .append("ssh", &entry, true)
            .map_err(|e| {
                refused(format!(
                    "the signature could not be recorded ({e}); nothing was signed"
                ))
            })
    }

    /// The key of `request` and the record of what it would sign, or why it may not: one
    /// reading of the request, which both the decision and the record use.
    fn decide(&self, request: &SignRequest) -> Result<(&Held, serde_json::Value), String> {
        let Some(held) = self.keys.iter().find(|h| h.key.public() == &request.pubkey) else {
            return Err("a key this agent does not hold: it holds only the policy's [[terminal.credentials]] kind = \"ssh\" keys (describe_policy names them)".into());
        };
        match signing(&request.data) {
            Signing::Sshsig {
                namespace: "git",
                hash_algorithm,
                hash,
            } if held.sign => Ok((
                held,
                json!({
                    "event": "sign", "key": held.name, "namespace": "git",
                    "hash_algorithm": hash_algorithm, "message_hash": hex::encode(hash),
                }),
            )),
            Signing::Sshsig {
                namespace: "git", ..
            } => Err(format!(
                "key {} may not sign git objects: its [[terminal.credentials]] entry needs sign = true",
                held.name
            )),
            Signing::Sshsig { namespace, .. } => Err(format!(
                "key {} signs git objects only (namespace \"git\"), not namespace {namespace:?}",
                held.name
            )),
            Signing::Other => {
                let (host, user) = crate::ssh_bind::login(
                    (&held.name, &held.hosts),
                    self.bound.as_ref(),
                    &request.data,
                )?;
                Ok((
                    held,
                    json!({"event": "login", "key": held.name, "host": host, "user": user}),
                ))
            }
        }
    }
}

#[ssh_agent_lib::async_trait]
impl Session for Agent {
    async fn request_identities(&mut self) -> Result<Vec<Identity>, AgentError> {
        Ok(self
            .keys
            .iter()
            .map(|h| Identity {
                pubkey: h.key.public().clone(),
                comment: h.name.clone(),
            })
            .collect())
    }

    async fn extension(
        &mut self,
        extension: ssh_agent_lib::proto::Extension,
    ) -> Result<Option<ssh_agent_lib::proto::Extension>, AgentError> {
        // OpenSSH binds the connection to the session it logs in to before it asks for a
        // signature: the host key, verified against the session, decides the host.
        let pinned = self.keys.iter().flat_map(|k| k.pinned.iter());
        let bound = crate::ssh_bind::bind(pinned, &extension).map_err(refused)?;
        self.bound = Some(bound);
        Ok(None)
    }

    async fn sign(&mut self, request: SignRequest) -> Result<Signature, AgentError> {
        let (held, entry) = match self.decide(&request) {
            Ok(decided) => decided,
            Err(why) => {
                self.record(json!({"event": "sign-refused", "reason": why}))?;
                return Err(refused(why));
            }
        };
        self.record(entry)?;
        // Signed off the runtime's threads: the operator's agent is asked over its socket.
        let (key, name) = (Arc::clone(&held.key), held.name.clone());
        let (data, flags) = (request.data, request.flags);
        tokio::task::spawn_blocking(move || key.sign(&data, flags))
            .await
            .map_err(|e| refused(format!("key {name} could not sign: {e}")))?
            .map_err(|e| refused(format!("key {name} could not sign: {e}")))
    }
}

/// The agent of `service`, listening on its socket until the server ends; `Ok(None)` when
/// the policy holds no ssh key. A key that cannot be read (not an OpenSSH private key, a
/// wrong passphrase, an RSA key) stops the start with the reason.
pub(crate) fn listener(
    service: &Arc<TerminalService>,
) -> Result<Option<impl std::future::Future<Output = ()> + Send + 'static>, String> {
    let Some(dir) = service.ssh_agent() else {
        return Ok(None);
    };
    let mut keys = Vec::new();
    for spec in service.ssh_keys() {
        let at = |m: String| format!("[[terminal.credentials]] {}: {m}", spec.name);
        let key = crate::ssh_keys::load(spec).map_err(at)?;
        // The identity list never reaches a result or a record.
        if let Ok(public) = ssh_key::PublicKey::from(key.public().clone()).to_openssh() {
            for part in public.split_whitespace().skip(1).take(1) {
                service.redact_also(part);
            }
        }
        let pinned = crate::ssh_bind::pinned(&spec.known_hosts).map_err(at)?;
        keys.push(Held {
            name: spec.name.clone(),
            key: Arc::new(key),
            sign: spec.sign,
            hosts: spec
                .hosts
                .iter()
                .map(|(h, p)| safe_mcp_core::credentials::known_host_name(h, *p))
                .collect(),
            pinned,
        });
    }
    // Bound now (a failure stops the start), served once the runtime runs.
    let socket = dir.socket();
    let bound = std::os::unix::net::UnixListener::bind(&socket)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| format!("the ssh agent's socket {}: {e}", socket.display()))?;
    let agent = Agent {
        keys: Arc::new(keys),
        service: Arc::clone(service),
        bound: None,
    };
    Ok(Some(async move {
        let served = match tokio::net::UnixListener::from_std(bound) {
            Ok(listener) => ssh_agent_lib::agent::listen(listener, agent).await,
            Err(e) => Err(AgentError::IO(e)),
        };
        if let Err(e) = served {
            tracing::error!("the ssh agent stopped: {e}");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ssh_bind::wire as string;

    fn sshsig(namespace: &str) -> Vec<u8> {
        let mut data = b"SSHSIG".to_vec();
        for part in [namespace.as_bytes(), b"", b"sha512", &[7u8; 64][..]] {
            data.extend(string(part));
        }
        data
    }

    #[test]
    fn only_a_whole_sshsig_blob_reads_as_one() {
        let git = sshsig("git");
        assert_eq!(
            signing(&git),
            Signing::Sshsig {
                namespace: "git",
                hash_algorithm: "sha512",
                hash: &[7u8; 64]
            }
        );
        assert!(matches!(
            signing(&sshsig("file")),
            Signing::Sshsig {
                namespace: "file",
                ..
            }
        ));
        // A login's request (session id, then 50 and the user), a blob cut short or with
        // more after it: none is an SSH signature.
        let mut login = string(&[1u8; 32]);
        login.push(50);
        login.extend(string(b"git"));
        for data in [
            login,
            git[..git.len() - 1].to_vec(),
            [git.clone(), vec![0]].concat(),
        ] {
            assert_eq!(signing(&data), Signing::Other);
        }
    }
}
