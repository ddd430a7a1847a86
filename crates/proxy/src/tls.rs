//! The TLS of the hosts the proxy terminates (credential hosts, and only those): a CA made
//! at start, whose key never leaves this process's memory; a leaf certificate per host,
//! made on first use; the bundle commands trust (the system's roots, `upstream_ca_file`'s
//! and the CA); the verified client side to the real host.
//!
//! The CA is name-constrained to the credential hosts, so a certificate for any other name
//! it could be made to sign is refused by every client that checks constraints. None of the
//! TLS is ours: rustls (ring) on both sides, rcgen for the certificates.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use safe_mcp_core::credentials::Vault;
use safe_mcp_core::egress::DomainRule;

/// What the proxy needs to terminate TLS.
pub(crate) struct Tls {
    issuer: Issuer<'static, KeyPair>,
    ca: CertificateDer<'static>,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    provider: Arc<CryptoProvider>,
    upstream: Arc<ClientConfig>,
    bundle: Bundle,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("bundle", &self.bundle.file)
            .finish_non_exhaustive()
    }
}

/// The bundle's directory, removed when the proxy ends.
struct Bundle {
    dir: PathBuf,
    file: PathBuf,
}

impl Drop for Bundle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The one protocol the terminated side speaks: the proxy reads HTTP/1.1 requests.
const ALPN: &[u8] = b"http/1.1";

/// This year and the next but one, from the clock: the certificates' validity.
fn validity() -> (Date, Date) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // 31 556 952 s is a Gregorian year on average; a day's error at a year's edge is
    // covered by starting on the 1st of January.
    let year = 1970 + i32::try_from(secs / 31_556_952).unwrap_or(0);
    ((year - 1, 1, 1), (year + 2, 1, 1))
}

/// Year, month, day.
type Date = (i32, u8, u8);

impl Tls {
    /// Makes the CA, the bundle and the upstream client, for the credentials in `vault`.
    pub(crate) fn new(vault: &Vault) -> Result<Tls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = KeyPair::generate().map_err(|e| format!("the proxy's CA key: {e}"))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| format!("the proxy's CA: {e}"))?;
        let mut name = DistinguishedName::new();
        name.push(
            DnType::CommonName,
            format!("safe-mcp egress proxy CA (pid {})", std::process::id()),
        );
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let mut permitted: Vec<GeneralSubtree> = Vec::new();
        for entry in vault.entries() {
            for host in &entry.hosts {
                let name = match host {
                    DomainRule::Exact(n) | DomainRule::Subdomains(n) => n.clone(),
                };
                let subtree = GeneralSubtree::DnsName(name);
                if !permitted.contains(&subtree) {
                    permitted.push(subtree);
                }
            }
        }
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: permitted,
            excluded_subtrees: Vec::new(),
        });
        let ((y0, m0, d0), (y1, m1, d1)) = validity();
        params.not_before = rcgen::date_time_ymd(y0, m0, d0);
        params.not_after = rcgen::date_time_ymd(y1, m1, d1);
        let ca = params
            .self_signed(&key)
            .map_err(|e| format!("the proxy's CA: {e}"))?;
        let ca_der = ca.der().clone();
        let issuer = Issuer::new(params, key);

        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in &native.certs {
            // A system root rustls cannot read is one it would not trust either.
            let _ = roots.add(cert.clone());
        }
        let mut extra: Vec<CertificateDer<'static>> = Vec::new();
        if let Some(file) = vault.upstream_ca_file() {
            let read = CertificateDer::pem_file_iter(file)
                .map_err(|e| format!("upstream_ca_file {}: {e}", file.display()))?;
            for cert in read {
                let cert = cert.map_err(|e| format!("upstream_ca_file {}: {e}", file.display()))?;
                roots
                    .add(cert.clone())
                    .map_err(|e| format!("upstream_ca_file {}: {e}", file.display()))?;
                extra.push(cert);
            }
            if extra.is_empty() {
                return Err(format!(
                    "upstream_ca_file {} holds no certificate",
                    file.display()
                ));
            }
        }
        if roots.is_empty() {
            return Err("no trusted root certificates: the system has none (install ca-certificates) and upstream_ca_file names none".into());
        }
        let mut upstream = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![ALPN.to_vec()];

        let pems: Vec<pem::Pem> = native
            .certs
            .iter()
            .chain(extra.iter())
            .chain(std::iter::once(&ca_der))
            .map(|c| pem::Pem::new("CERTIFICATE", c.to_vec()))
            .collect();
        let bundle = write_bundle(&pem::encode_many(&pems))?;
        Ok(Tls {
            issuer,
            ca: ca_der,
            leaves: Mutex::new(HashMap::new()),
            provider,
            upstream: Arc::new(upstream),
            bundle,
        })
    }

    /// The bundle commands trust.
    pub(crate) fn bundle(&self) -> &Path {
        &self.bundle.file
    }

    /// The verified client side to the real hosts.
    pub(crate) fn upstream(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(Arc::clone(&self.upstream))
    }

    /// The server side presented for `host`: a leaf the CA signs, made once per host.
    pub(crate) fn server_for(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        if let Ok(leaves) = self.leaves.lock()
            && let Some(config) = leaves.get(host)
        {
            return Ok(Arc::clone(config));
        }
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            CertificateParams::new(vec![host.to_owned()]).map_err(|e| e.to_string())?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, host);
        params.distinguished_name = name;
        params.is_ca = IsCa::NoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let ((y0, m0, d0), (y1, m1, d1)) = validity();
        params.not_before = rcgen::date_time_ymd(y0, m0, d0);
        params.not_after = rcgen::date_time_ymd(y1, m1, d1);
        let leaf = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| e.to_string())?;
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.ca.clone()], private)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        let config = Arc::new(config);
        if let Ok(mut leaves) = self.leaves.lock() {
            leaves.insert(host.to_owned(), Arc::clone(&config));
        }
        Ok(config)
    }
}

/// Writes the bundle into a fresh directory of the temporary directory, readable by all
/// (the commands may run as another user) and written only by this process.
fn write_bundle(text: &str) -> Result<Bundle, String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let tag = safe_mcp_core::random::hex(6).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("safe-mcp-ca-{}-{tag}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let bundle = Bundle {
        file: dir.join("ca-bundle.pem"),
        dir,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&bundle.file)
        .map_err(|e| format!("{}: {e}", bundle.file.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", bundle.file.display()))?;
    Ok(bundle)
}
