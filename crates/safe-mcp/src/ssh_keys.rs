//! The ssh keys the server's agent signs with (issue 54): read from the policy's key file
//! (ed25519 or ecdsa, opened with its passphrase), or held by the operator's running agent,
//! which the server's agent asks to sign only what it decided to sign.
//!
//! The operator's agent holds every key of theirs, so its socket must be out of the
//! commands' reach (the loader checks it) and only the key with the policy's fingerprint is
//! ever asked for; a key the operator's agent constrains to destinations (`ssh-add -h`) is
//! asked without the session's binding, and refuses.

use std::path::PathBuf;

use safe_mcp_core::credentials::{SshKeySource, SshKeySpec};
use ssh_agent_lib::proto::SignRequest;
use ssh_key::public::KeyData;
use ssh_key::{HashAlg, PrivateKey, Signature};

/// A key the server's agent signs with.
pub(crate) enum Key {
    /// Read from the policy's key file: signed here.
    Local(Box<PrivateKey>),
    /// Held by the operator's agent at `socket`: signed there.
    Upstream { socket: PathBuf, public: KeyData },
}

impl Key {
    /// Its public half.
    pub(crate) fn public(&self) -> &KeyData {
        match self {
            Key::Local(key) => key.public_key().key_data(),
            Key::Upstream { public, .. } => public,
        }
    }

    /// Signs `data` (blocking: the operator's agent is asked over its socket).
    pub(crate) fn sign(&self, data: &[u8], flags: u32) -> Result<Signature, String> {
        match self {
            Key::Local(key) => {
                use signature::Signer;
                key.try_sign(data).map_err(|e| e.to_string())
            }
            Key::Upstream { socket, public } => {
                let stream = std::os::unix::net::UnixStream::connect(socket)
                    .map_err(|e| format!("the operator's agent {}: {e}", socket.display()))?;
                ssh_agent_lib::blocking::Client::new(stream)
                    .sign(SignRequest {
                        pubkey: public.clone(),
                        data: data.to_vec(),
                        flags,
                    })
                    .map_err(|e| format!("the operator's agent refused: {e}"))
            }
        }
    }
}

/// The key of `spec`, or why the server cannot hold it (the start stops with it).
pub(crate) fn load(spec: &SshKeySpec) -> Result<Key, String> {
    match &spec.source {
        SshKeySource::File {
            key, passphrase, ..
        } => {
            let text = std::str::from_utf8(key.expose())
                .map_err(|_| "key_file is not an OpenSSH private key".to_owned())?;
            let mut key = PrivateKey::from_openssh(text)
                .map_err(|e| format!("key_file is not an OpenSSH private key: {e}"))?;
            if key.is_encrypted() {
                let Some(passphrase) = passphrase else {
                    return Err("key_file is encrypted: give its passphrase_file".into());
                };
                key = key
                    .decrypt(passphrase.expose())
                    .map_err(|e| format!("the passphrase does not open key_file: {e}"))?;
            }
            if matches!(key.algorithm(), ssh_key::Algorithm::Rsa { .. }) {
                return Err("use an ed25519 or ecdsa key (ssh-keygen -t ed25519)".into());
            }
            Ok(Key::Local(Box::new(key)))
        }
        SshKeySource::Agent {
            socket,
            fingerprint,
        } => {
            let stream = std::os::unix::net::UnixStream::connect(socket)
                .map_err(|e| format!("agent {}: {e}", socket.display()))?;
            let identities = ssh_agent_lib::blocking::Client::new(stream)
                .request_identities()
                .map_err(|e| format!("agent {}: {e}", socket.display()))?;
            let public = identities
                .into_iter()
                .map(|i| i.pubkey)
                .find(|k| k.fingerprint(HashAlg::Sha256).to_string() == *fingerprint)
                .ok_or_else(|| {
                    format!(
                        "the agent at {} holds no key {fingerprint} (ssh-add -l lists what it holds)",
                        socket.display()
                    )
                })?;
            Ok(Key::Upstream {
                socket: socket.clone(),
                public,
            })
        }
    }
}
