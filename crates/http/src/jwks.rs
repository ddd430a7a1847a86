//! Where the issuer's public keys come from (`[http.auth] jwks_file` or `jwks_url`).
//!
//! A URL is fetched with ureq over rustls: `https://` only (the loader refuses anything
//! else), the server's certificate checked against Mozilla's roots, or only against
//! `jwks_ca_file`'s when set (an issuer behind a private CA); no redirects (give the final
//! URL); 10 s in all; at most 1 MiB; status 200 only. A proxy named by the server's own
//! `HTTPS_PROXY` is used, as by any other client of the host.
//!
//! Loading blocks: [`super::oauth`] runs it at startup and on `spawn_blocking` after.

use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use safe_mcp_core::config::JwksSource;

/// The most a key set may weigh.
const MAX_BYTES: u64 = 1 << 20;
/// The longest a fetch may take, connect to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The key set `source` holds now.
pub fn load(source: &JwksSource) -> Result<JwkSet, String> {
    let (text, what) = match source {
        JwksSource::File(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| format!("[http.auth] jwks_file {}: {e}", path.display()))?,
            format!("jwks_file {}", path.display()),
        ),
        JwksSource::Url { url, ca_file } => (
            fetch(url, ca_file.as_deref())
                .map_err(|e| format!("[http.auth] jwks_url {url}: {e}"))?,
            format!("jwks_url {url}"),
        ),
    };
    serde_json::from_str(&text).map_err(|e| format!("[http.auth] {what}: not a JWKS document: {e}"))
}

/// The source, for a message: the file or the URL.
pub fn describe(source: &JwksSource) -> String {
    match source {
        JwksSource::File(path) => format!("jwks_file {}", path.display()),
        JwksSource::Url { url, .. } => format!("jwks_url {url}"),
    }
}

/// How often a source is read again even when every `kid` is known, so that a key the
/// issuer removed stops verifying new tokens: a file is cheap to read, a URL is not.
pub fn refresh_every(source: &JwksSource) -> Duration {
    match source {
        JwksSource::File(_) => Duration::from_secs(30),
        JwksSource::Url { .. } => Duration::from_secs(300),
    }
}

fn fetch(url: &str, ca_file: Option<&std::path::Path>) -> Result<String, String> {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let roots = match ca_file {
        None => RootCerts::WebPki,
        Some(path) => {
            let pem =
                std::fs::read(path).map_err(|e| format!("jwks_ca_file {}: {e}", path.display()))?;
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<_, _>>()
                .map_err(|e| format!("jwks_ca_file {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "jwks_ca_file {}: no certificate in it",
                    path.display()
                ));
            }
            RootCerts::new_with_certs(&certs)
        }
    };
    let agent = ureq::Agent::config_builder()
        .https_only(true)
        .max_redirects(0)
        .timeout_global(Some(FETCH_TIMEOUT))
        .http_status_as_error(false)
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .build()
        .new_agent();
    let mut response = agent
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status != 200 {
        return Err(format!("answered {status}, not 200"));
    }
    response
        .body_mut()
        .with_config()
        .limit(MAX_BYTES)
        .read_to_string()
        .map_err(|e| e.to_string())
}
