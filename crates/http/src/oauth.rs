//! The OAuth 2.1 resource server in front of `/mcp` (DESIGN §11, `[http.auth] mode =
//! "oauth"`).
//!
//! Every request to `/mcp` needs `Authorization: Bearer <JWT>`, verified here:
//! - the header's `alg` must be RS256, ES256 or EdDSA and match the key's type (so `none`,
//!   and HMAC keyed with a public key, are refused); the key is the issuer's, by `kid`, from
//!   `jwks_file` or `jwks_url` ([`super::jwks`]), loaded at start (a failure stops it),
//!   again when a `kid` is unknown (key rotation; at most every 10 s, the request waiting
//!   for it), and in the background once the set is older than its refresh period (so a
//!   key the issuer removed stops verifying new tokens); a failed reload keeps the keys
//!   it had and says so on stderr;
//! - `iss` must be the issuer, `aud` must hold exactly the configured audience, `exp` is
//!   required and `nbf` honoured, each with `leeway_seconds`;
//! - the `scope` claim (or `scp`) must hold every `required_scopes` entry.
//!
//! A missing or bad token gets 401 with `WWW-Authenticate: Bearer resource_metadata=…,
//! scope=…` (RFC 6750, RFC 9728); missing scopes get 403 with `error="insufficient_scope"`.
//! A token in the query string is refused outright. The verified caller (`sub`, and
//! `client_id` or `azp`) goes into the request's extensions, whence the tools put it in
//! every audit record and [`super::limits`] binds sessions to it and counts it. Tokens
//! are never logged and never reach commands.
//! The protected-resource metadata is served at `/.well-known/oauth-protected-resource/mcp`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::middleware::Next;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use safe_mcp_core::audit::Caller;
use safe_mcp_core::config::OAuthSettings;
use serde_json::{Value, json};

/// The path of the protected-resource metadata for `/mcp`.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// How often an unknown `kid` may make the keys be loaded again.
const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// The verifier, shared by every request.
pub struct Guard {
    settings: OAuthSettings,
    keys: Mutex<Keys>,
    /// A reload is running (one at a time).
    reloading: AtomicBool,
    /// Tokens already verified, with their caller and `exp`: a client sends the same token
    /// with every request, and an RSA check each time is most of what auth costs.
    verified: Mutex<HashMap<String, (Caller, u64)>>,
}

/// Verified tokens remembered at most.
const VERIFIED_MAX: usize = 1024;

struct Keys {
    set: JwkSet,
    /// When the set was last loaded, and when a load was last tried.
    loaded: Instant,
    tried: Instant,
}

/// Why a request was refused: the code a client gets, and (for the server's stderr and
/// `safe-mcp auth check-token`, never for the client) why, in words. Never the token.
enum Refusal {
    /// 401: no token, or one that does not verify.
    Unauthorized(&'static str, String),
    /// 401 unless reloading the keys finds its `kid`.
    UnknownKey(String),
    /// 403: the token lacks a scope.
    Scope(String),
    /// 400: the request puts a token where tokens may not go.
    BadRequest(&'static str),
}

impl Refusal {
    /// Why, in words.
    fn why(&self) -> &str {
        match self {
            Refusal::Unauthorized(_, why) | Refusal::UnknownKey(why) | Refusal::Scope(why) => why,
            Refusal::BadRequest(why) => why,
        }
    }
}

/// A 401 for a token that does not verify, and why.
fn invalid(why: impl Into<String>) -> Refusal {
    Refusal::Unauthorized("invalid_token", why.into())
}

impl Guard {
    /// Loads the keys now: a source that fails or is not a JWKS stops the start.
    pub fn new(settings: OAuthSettings) -> Result<Arc<Guard>, String> {
        let set = super::jwks::load(&settings.jwks)?;
        Ok(Arc::new(Guard {
            settings,
            keys: Mutex::new(Keys {
                set,
                loaded: Instant::now(),
                tried: Instant::now(),
            }),
            reloading: AtomicBool::new(false),
            verified: Mutex::new(HashMap::new()),
        }))
    }

    /// RFC 9728 metadata for this resource.
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.settings.audience,
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": self.settings.required_scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    fn metadata_url(&self) -> String {
        // The metadata lives beside the resource: same scheme and authority.
        let resource = &self.settings.audience;
        let origin_end = resource
            .find("://")
            .and_then(|i| resource[i + 3..].find('/').map(|j| i + 3 + j))
            .unwrap_or(resource.len());
        format!("{}{METADATA_PATH}", &resource[..origin_end])
    }

    /// The caller a bearer token proves, or why not: from the cache while the token has not
    /// expired (its signature, issuer, audience and scopes cannot change), else checked.
    fn verify(&self, token: &str) -> Result<Caller, Refusal> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Ok(cache) = self.verified.lock()
            && let Some((caller, exp)) = cache.get(token)
            && now <= exp + self.settings.leeway_seconds
        {
            return Ok(caller.clone());
        }
        let (caller, exp) = self.check(token)?;
        if let Ok(mut cache) = self.verified.lock() {
            if cache.len() >= VERIFIED_MAX {
                cache.retain(|_, (_, e)| now <= *e);
                if cache.len() >= VERIFIED_MAX {
                    cache.clear();
                }
            }
            cache.insert(token.to_owned(), (caller.clone(), exp));
        }
        Ok(caller)
    }

    /// Checks a token in full: its signature, claims and scopes.
    fn check(&self, token: &str) -> Result<(Caller, u64), Refusal> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| invalid(format!("not a JWT: {e}")))?;
        if !matches!(
            header.alg,
            Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA
        ) {
            return Err(invalid(format!(
                "alg {:?} is not accepted (RS256, ES256 or EdDSA)",
                header.alg
            )));
        }
        let kid = header.kid.clone().unwrap_or_default();
        let key = self.key(&kid).ok_or_else(|| {
            Refusal::UnknownKey(format!(
                "no key with kid {kid:?} among the issuer's keys ({})",
                super::jwks::describe(&self.settings.jwks)
            ))
        })?;
        // The key's own family must be the header's: an RSA key never checks an EC or
        // HMAC signature.
        let matches = matches!(
            (&key.algorithm, header.alg),
            (
                jsonwebtoken::jwk::AlgorithmParameters::RSA(_),
                Algorithm::RS256
            ) | (
                jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_),
                Algorithm::ES256
            ) | (
                jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_),
                Algorithm::EdDSA
            )
        );
        if !matches {
            return Err(invalid(format!(
                "the key {kid:?} is not of alg {:?}'s family",
                header.alg
            )));
        }
        let decoding = DecodingKey::from_jwk(&key)
            .map_err(|e| invalid(format!("the key {kid:?} cannot be used: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.leeway = self.settings.leeway_seconds;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Value>(token, &decoding, &validation)
            .map_err(|e| invalid(self.explain_error(&e)))?
            .claims;
        let scopes: Vec<String> = match (&claims["scope"], &claims["scp"]) {
            (Value::String(s), _) => s.split_whitespace().map(str::to_owned).collect(),
            (_, Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            (_, Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        let missing: Vec<&String> = self
            .settings
            .required_scopes
            .iter()
            .filter(|needed| !scopes.contains(needed))
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::Scope(format!(
                "lacks the scopes {missing:?} ([http.auth] required_scopes); it has {scopes:?}"
            )));
        }
        let text = |k: &str| {
            claims[k]
                .as_str()
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        // Limits and ownership are per `sub`: an empty one would be nobody's, and shared.
        if text("sub").is_none() {
            return Err(invalid(
                "its sub is empty: limits and ownership need a caller",
            ));
        }
        let exp = claims["exp"].as_u64().unwrap_or(0);
        Ok((
            Caller {
                sub: text("sub"),
                client_id: text("client_id").or_else(|| text("azp")),
            },
            exp,
        ))
    }

    /// A JWT check's failure as the operator reads it: which claim, and what was expected.
    fn explain_error(&self, e: &jsonwebtoken::errors::Error) -> String {
        use jsonwebtoken::errors::ErrorKind;
        match e.kind() {
            ErrorKind::InvalidSignature => {
                "the signature does not verify with the issuer's key".into()
            }
            ErrorKind::ExpiredSignature => format!(
                "it has expired (exp, with {} s of leeway)",
                self.settings.leeway_seconds
            ),
            ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".into(),
            ErrorKind::InvalidAudience => format!(
                "its aud does not name {} ([http.auth] audience)",
                self.settings.audience
            ),
            ErrorKind::InvalidIssuer => format!(
                "its iss is not {} ([http.auth] issuer)",
                self.settings.issuer
            ),
            ErrorKind::MissingRequiredClaim(claim) => format!("it has no {claim} claim"),
            other => format!("it does not verify: {other:?}"),
        }
    }

    /// What `safe-mcp auth check-token` prints: the caller a token proves, or why it would
    /// be refused (never the token itself).
    pub fn explain(&self, token: &str) -> Result<String, String> {
        self.check(token.trim())
            .map(|(caller, exp)| {
                format!(
                    "accepted: sub {:?}, client_id {:?}, expires at {exp} (unix time)",
                    caller.sub.unwrap_or_default(),
                    caller.client_id.unwrap_or_default()
                )
            })
            .map_err(|r| r.why().to_owned())
    }

    /// The key named `kid`, from the keys loaded.
    fn key(&self, kid: &str) -> Option<jsonwebtoken::jwk::Jwk> {
        let keys = self.keys.lock().ok()?;
        keys.set
            .keys
            .iter()
            .find(|k| k.common.key_id.as_deref().unwrap_or_default() == kid)
            .cloned()
    }

    /// Takes the one reload slot if `due` says a reload is due; the caller then runs
    /// [`Guard::reload`].
    fn claim_reload(&self, due: impl FnOnce(&Keys) -> bool) -> bool {
        let Ok(mut keys) = self.keys.lock() else {
            return false;
        };
        // Checked and claimed under the keys' lock, and the attempt's time taken at once, so
        // that no second request can start another load right after this one ends.
        if !due(&keys)
            || self
                .reloading
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return false;
        }
        keys.tried = Instant::now();
        true
    }

    /// Loads the keys again (blocking: run it on `spawn_blocking`), keeping the old ones if
    /// that fails. When the set changed, the tokens remembered as verified are forgotten: a
    /// key the issuer removed (say, because it leaked) stops every token it signed, not only
    /// new ones. Releases the slot [`Guard::claim_reload`] took.
    fn reload(&self) {
        let loaded = super::jwks::load(&self.settings.jwks);
        let mut changed = false;
        if let Ok(mut keys) = self.keys.lock() {
            keys.tried = Instant::now();
            match loaded {
                Ok(set) => {
                    let same = |a: &JwkSet, b: &JwkSet| {
                        serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
                    };
                    changed = !same(&keys.set, &set);
                    keys.set = set;
                    keys.loaded = Instant::now();
                }
                Err(e) => tracing::warn!("keeping the keys loaded before: {e}"),
            }
        }
        if changed && let Ok(mut verified) = self.verified.lock() {
            verified.clear();
        }
        self.reloading.store(false, Ordering::Release);
    }

    /// Verifies `token`, loading the keys again first when its `kid` is unknown (and that
    /// was not tried in the last [`RELOAD_EVERY`]); starts a background reload when the
    /// keys are older than their refresh period.
    async fn verify_now(self: &Arc<Self>, token: &str) -> Result<Caller, Refusal> {
        let refresh = super::jwks::refresh_every(&self.settings.jwks);
        if self.claim_reload(|k| k.loaded.elapsed() >= refresh && k.tried.elapsed() >= RELOAD_EVERY)
        {
            let me = Arc::clone(self);
            tokio::task::spawn_blocking(move || me.reload());
        }
        match self.verify(token) {
            Err(Refusal::UnknownKey(_))
                if self.claim_reload(|k| k.tried.elapsed() >= RELOAD_EVERY) =>
            {
                let me = Arc::clone(self);
                let _ = tokio::task::spawn_blocking(move || me.reload()).await;
                self.verify(token)
            }
            other => other,
        }
    }

    fn refuse(&self, refusal: &Refusal) -> Response<Body> {
        // The operator's side of the refusal: why, on stderr (never the token).
        tracing::info!("http: refused a request: {}", refusal.why());
        let scope = self.settings.required_scopes.join(" ");
        let metadata = self.metadata_url();
        let unauthorized = |error: &str| {
            (
                StatusCode::UNAUTHORIZED,
                Some(format!(
                    "Bearer resource_metadata=\"{metadata}\", scope=\"{scope}\", error=\"{error}\""
                )),
                "a valid bearer token for this resource is required",
            )
        };
        let (status, challenge, message) = match refusal {
            Refusal::UnknownKey(_) => unauthorized("invalid_token"),
            Refusal::Unauthorized(error, _) => unauthorized(error),
            Refusal::Scope(_) => (
                StatusCode::FORBIDDEN,
                Some(format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{metadata}\""
                )),
                "the token lacks a required scope",
            ),
            Refusal::BadRequest(why) => (StatusCode::BAD_REQUEST, None, *why),
        };
        let mut response = Response::new(Body::from(json!({"error": message}).to_string()));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(c) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            headers.insert(header::WWW_AUTHENTICATE, c);
        }
        response
    }
}

/// The middleware: authenticate, pass the caller on.
pub async fn authenticate(
    State(guard): State<Arc<Guard>>,
    mut request: Request<Body>,
    next: Next,
) -> Response<Body> {
    let query = request.uri().query().unwrap_or_default();
    if query
        .split('&')
        .any(|p| p.starts_with("access_token=") || p.starts_with("token="))
    {
        return guard.refuse(&Refusal::BadRequest(
            "tokens go in the Authorization header, never in the URL",
        ));
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return guard.refuse(&Refusal::Unauthorized(
            "invalid_request",
            "no bearer token in the Authorization header".into(),
        ));
    };
    let caller = match guard.verify_now(token).await {
        Ok(c) => c,
        Err(r) => return guard.refuse(&r),
    };
    // The token itself goes no further than this check.
    request.headers_mut().remove(header::AUTHORIZATION);
    request.extensions_mut().insert(caller);
    next.run(request).await
}
