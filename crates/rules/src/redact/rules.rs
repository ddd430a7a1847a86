//! The built-in secret rules: (kind, prefilter keywords, regex).
//!
//! Owns data only. Shapes follow the public rule sets of gitleaks, TruffleHog and
//! detect-secrets, rewritten for the `regex` crate (no lookaround, no backreferences). Every
//! rule's keywords are lower-case literals that its own match always contains (matched
//! case-insensitively), so the prefilter can skip a rule but never hide a secret. A named
//! group `secret` marks the part to hide; without one the whole match is hidden. Values that
//! a regex cannot tell from placeholders are dropped by [`super::is_placeholder`].
//!
//! Each kind has positive and negative cases in `crates/core/testdata/redaction_cases.rs`
//! (and the files it includes), run by `crates/core/tests/redaction.rs`; the classes a
//! held-out corpus found have theirs in `crates/core/testdata/redaction_class_cases.rs`, run
//! by `crates/core/tests/redaction/classes.rs`.
//! Finders that are not one regex (headless and base64-encoded PEM keys) live in `pem.rs`.

/// (kind, keywords, regex).
pub const RULES: &[(&str, &[&str], &str)] = &[
    (
        "aws_access_key_id",
        &["akia", "asia", "abia", "acca", "a3t"],
        r"(?-u:\b)(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)",
    ),
    (
        "aws_secret_access_key",
        &["secret"],
        r#"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)["']?(?:[ \t]*(?::|=|=>)[ \t]*|[ \t]+)["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
    ),
    (
        "aws_session_token",
        &["session", "security"],
        r#"(?i)(?:aws_?session_?token|aws_?security_?token|sessiontoken)["']?(?:[ \t]*(?::|=|=>)[ \t]*|[ \t]+)["']?(?P<secret>[A-Za-z0-9/+=]{100,})"#,
    ),
    (
        "gcp_service_account_private_key",
        &["private_key"],
        r#""private_key"[ \t]*:[ \t]*"(?P<secret>-----BEGIN[A-Z ]{0,30}PRIVATE KEY-----[^"]*)""#,
    ),
    ("gcp_api_key", &["aiza"], r"(?-u:\b)AIza[0-9A-Za-z_-]{35}"),
    (
        // What `gcloud auth print-access-token` prints, bare.
        "gcp_oauth_access_token",
        &["ya29."],
        r"(?-u:\b)ya29\.[0-9A-Za-z_-]{30,}",
    ),
    (
        "azure_storage_account_key",
        &["accountkey", "account_key", "azure_storage"],
        r#"(?i)(?:(?-u:\b)AccountKey=|account_?key["']?[ \t]*[:=][ \t]*["']?|azure_storage_(?:account_)?(?:access_)?key["']?[ \t]*[:=][ \t]*["']?)(?P<secret>[A-Za-z0-9+/]{86}==)"#,
    ),
    (
        "azure_sas_token",
        &["sig="],
        r"(?-u:\b)sig=(?P<secret>[A-Za-z0-9%+/=]{30,})",
    ),
    (
        "azure_shared_access_key",
        &["sharedaccesskey="],
        r"(?i)(?-u:\b)SharedAccessKey=(?P<secret>[A-Za-z0-9+/]{42,43}=)",
    ),
    (
        "azure_ad_client_secret",
        &["q~"],
        r#"(?:^|[\\'"\x60\s>=:(,)])(?P<secret>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?:$|[\\'"\x60\s<),])"#,
    ),
    (
        "github_pat",
        &["ghp_"],
        r"(?-u:\b)ghp_[A-Za-z0-9]{36,255}(?-u:\b)",
    ),
    (
        "github_fine_grained_pat",
        &["github_pat_"],
        r"(?-u:\b)github_pat_[A-Za-z0-9_]{82,255}(?-u:\b)",
    ),
    (
        "github_oauth_token",
        &["gho_"],
        r"(?-u:\b)gho_[A-Za-z0-9]{36,255}(?-u:\b)",
    ),
    (
        "github_user_to_server_token",
        &["ghu_"],
        r"(?-u:\b)ghu_[A-Za-z0-9]{36,255}(?-u:\b)",
    ),
    (
        "github_server_to_server_token",
        &["ghs_"],
        r"(?-u:\b)ghs_[A-Za-z0-9]{36,255}(?-u:\b)",
    ),
    (
        "github_refresh_token",
        &["ghr_"],
        r"(?-u:\b)ghr_[A-Za-z0-9]{36,255}(?-u:\b)",
    ),
    (
        "gitlab_pat",
        &["glpat-"],
        r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{9})?",
    ),
    (
        "gitlab_runner_token",
        &["glrt-", "gr1348941"],
        r"(?-u:\b)(?:glrt-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{9})?|GR1348941[A-Za-z0-9_-]{20,64})",
    ),
    (
        "gitlab_deploy_token",
        &["gldt-"],
        r"(?-u:\b)gldt-[A-Za-z0-9_-]{20,64}",
    ),
    (
        "gitlab_ci_build_token",
        &["glcbt-"],
        r"(?-u:\b)glcbt-[A-Za-z0-9]{1,5}_[A-Za-z0-9_-]{20,64}",
    ),
    (
        "gitlab_pipeline_trigger_token",
        &["glptt-"],
        r"(?-u:\b)glptt-[A-Za-z0-9_-]{20,64}",
    ),
    (
        "gitlab_other_token",
        &[
            "glft-", "glimt-", "glagent-", "gloas-", "glsoat-", "glffct-",
        ],
        r"(?-u:\b)(?:glft|glimt|glagent|gloas|glsoat|glffct)-[A-Za-z0-9_-]{20,100}",
    ),
    (
        "bitbucket_app_password",
        &["atbb"],
        r"(?-u:\b)ATBB[A-Za-z0-9_=.-]{28,64}",
    ),
    (
        "circleci_token",
        &["ccipat_", "cciprj_"],
        r"(?-u:\b)CCIP(?:AT|RJ)_[A-Za-z0-9]{22}_[a-f0-9]{40}(?-u:\b)",
    ),
    (
        "circleci_token",
        &["circle"],
        r#"(?i)circle(?:ci)?[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[a-f0-9]{40})(?-u:\b)"#,
    ),
    (
        "travis_ci_token",
        &["travis"],
        r#"(?i)travis[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9_-]{22})(?:[^A-Za-z0-9_-]|$)"#,
    ),
    (
        "slack_bot_token",
        &["xoxb-"],
        r"(?-u:\b)xoxb-[0-9]{8,14}-[A-Za-z0-9-]{8,200}",
    ),
    (
        "slack_user_token",
        &["xoxp-", "xoxe-"],
        r"(?-u:\b)xox[pe]-[0-9]{10,13}-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9-]{28,100}",
    ),
    (
        "slack_app_token",
        &["xapp-"],
        r"(?i)(?-u:\b)xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+",
    ),
    (
        "slack_legacy_token",
        &["xoxa-", "xoxr-", "xoxo-", "xoxs-"],
        r"(?-u:\b)xox[aors]-[0-9A-Za-z][0-9A-Za-z-]{8,200}",
    ),
    (
        "slack_config_token",
        &["xoxe"],
        r"(?-u:\b)xoxe(?:\.xox[bp])?-[0-9]-[A-Za-z0-9]{140,200}",
    ),
    (
        "slack_webhook_url",
        &["hooks.slack.com"],
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,120}",
    ),
    (
        "discord_bot_token",
        &["."],
        r"(?-u:\b)[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}",
    ),
    (
        "discord_webhook_url",
        &["discord"],
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/(?:v[0-9]+/)?webhooks/[0-9]{17,20}/(?P<secret>[A-Za-z0-9_-]{60,100})",
    ),
    (
        "telegram_bot_token",
        &[":aa"],
        r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}",
    ),
    (
        "stripe_secret_key",
        &["sk_live_", "sk_test_", "sk_prod_"],
        r"(?-u:\b)sk_(?:live|test|prod)_[A-Za-z0-9]{10,247}(?-u:\b)",
    ),
    (
        "stripe_restricted_key",
        &["rk_live_", "rk_test_", "rk_prod_"],
        r"(?-u:\b)rk_(?:live|test|prod)_[A-Za-z0-9]{10,247}(?-u:\b)",
    ),
    (
        "stripe_publishable_live_key",
        &["pk_live_"],
        r"(?-u:\b)pk_live_[A-Za-z0-9]{10,247}(?-u:\b)",
    ),
    (
        "stripe_webhook_secret",
        &["whsec_"],
        r"(?-u:\b)whsec_[A-Za-z0-9+/=]{32,100}",
    ),
    (
        "square_access_token",
        &["sq0atp-", "eaaa"],
        r"(?-u:\b)(?P<secret>sq0atp-[A-Za-z0-9_-]{22,60}|EAAA[A-Za-z0-9_-]{60})(?:[^A-Za-z0-9+/=_-]|$)",
    ),
    (
        "square_oauth_secret",
        &["sq0csp-"],
        r"(?-u:\b)sq0csp-[A-Za-z0-9_-]{43,60}",
    ),
    (
        "braintree_access_token",
        &["access_token$"],
        r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}",
    ),
    (
        "paypal_client_secret",
        &["paypal"],
        r#"(?i)paypal[0-9A-Za-z_.-]{0,25}?secret["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9_-]{32,100})"#,
    ),
    (
        "paypal_access_token",
        &["a21aa"],
        r"(?-u:\b)A21AA[A-Za-z0-9_-]{50,200}",
    ),
    (
        "openai_api_key",
        &["sk-"],
        r"(?-u:\b)sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,300}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}(?-u:\b)|[A-Za-z0-9]{48}(?-u:\b))",
    ),
    (
        "anthropic_api_key",
        &["sk-ant-"],
        r"(?-u:\b)sk-ant-(?:api|admin|oat|ort)[0-9]{2}-[A-Za-z0-9_-]{80,120}",
    ),
    (
        "huggingface_token",
        &["hf_", "api_org_"],
        r"(?-u:\b)(?:hf|api_org)_[A-Za-z]{34}(?-u:\b)",
    ),
    (
        "cohere_api_key",
        &["cohere", "co_api_key"],
        r#"(?i)(?:cohere[0-9A-Za-z_.-]{0,20}?(?:key|token)|(?-u:\b)co_api_key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9]{40})(?-u:\b)"#,
    ),
    (
        "replicate_api_token",
        &["r8_"],
        r"(?-u:\b)r8_[A-Za-z0-9]{37}(?-u:\b)",
    ),
    (
        "groq_api_key",
        &["gsk_"],
        r"(?-u:\b)gsk_[A-Za-z0-9]{52}(?-u:\b)",
    ),
    (
        "perplexity_api_key",
        &["pplx-"],
        r"(?-u:\b)pplx-[A-Za-z0-9]{48}(?-u:\b)",
    ),
    (
        "npm_token",
        &["npm_"],
        r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)",
    ),
    (
        "npm_token",
        &["_authtoken"],
        r#"(?i)_authToken["']?[ \t]*=[ \t]*["']?(?P<secret>[^\s"'$<{*][^\s"']{5,})"#,
    ),
    (
        "pypi_token",
        &["pypi-ag"],
        r"(?-u:\b)pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}",
    ),
    (
        "rubygems_api_key",
        &["rubygems_"],
        r"(?-u:\b)rubygems_[a-f0-9]{48}(?-u:\b)",
    ),
    (
        "nuget_api_key",
        &["oy2"],
        r"(?-u:\b)oy2[a-z0-9]{43}(?-u:\b)",
    ),
    (
        "dockerhub_pat",
        &["dckr_pat_", "dckr_oat_"],
        r"(?-u:\b)dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,64}",
    ),
    (
        "docker_config_auth",
        &["\"auth\"", "\"identitytoken\""],
        r#""(?:auth|identitytoken)"[ \t]*:[ \t]*"(?P<secret>[A-Za-z0-9+/_.-]{6,}={0,2})""#,
    ),
    (
        "sendgrid_api_key",
        &["sg."],
        r"(?-u:\b)SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
    ),
    ("twilio_api_key", &["sk"], r"(?-u:\b)SK[0-9a-f]{32}(?-u:\b)"),
    (
        "twilio_auth_token",
        &["twilio"],
        r#"(?i)twilio[0-9A-Za-z_.-]{0,20}?(?:auth_?token|token|secret)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[a-f0-9]{32})(?-u:\b)"#,
    ),
    (
        "mailgun_api_key",
        &["key-"],
        r"(?-u:\b)key-[0-9a-f]{32}(?-u:\b)",
    ),
    (
        "mailgun_api_key",
        &["mailgun"],
        r#"(?i)mailgun[0-9A-Za-z_.-]{0,20}?(?:key|secret)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[a-f0-9]{32}-[a-f0-9]{8}-[a-f0-9]{8})(?-u:\b)"#,
    ),
    (
        "mailchimp_api_key",
        &["-us"],
        r"(?-u:\b)[0-9a-f]{32}-us[0-9]{1,2}(?-u:\b)",
    ),
    (
        "shopify_access_token",
        &["shpat_", "shpca_", "shppa_"],
        r"(?-u:\b)shp(?:at|ca|pa)_[a-fA-F0-9]{32}(?-u:\b)",
    ),
    (
        "shopify_shared_secret",
        &["shpss_"],
        r"(?-u:\b)shpss_[a-fA-F0-9]{32}(?-u:\b)",
    ),
    (
        "datadog_api_key",
        &["apikey", "api_key", "api-key", "api.key"],
        r#"(?i)(?:(?-u:\b)dd[_.-]|datadog[_.-]?)api[_.-]?key["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[a-f0-9]{32})(?-u:\b)"#,
    ),
    (
        "datadog_app_key",
        &[
            "appkey",
            "app_key",
            "app-key",
            "app.key",
            "applicationkey",
            "application_key",
            "application-key",
            "application.key",
        ],
        r#"(?i)(?:(?-u:\b)dd[_.-]|datadog[_.-]?)app(?:lication)?[_.-]?key["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[a-f0-9]{40})(?-u:\b)"#,
    ),
    (
        "new_relic_user_api_key",
        &["nrak-"],
        r"(?-u:\b)NRAK-[A-Z0-9]{27}(?-u:\b)",
    ),
    (
        "new_relic_insert_key",
        &["nrii-"],
        r"(?-u:\b)NRII-[A-Za-z0-9_-]{32}",
    ),
    (
        "new_relic_license_key",
        &["nral"],
        r"(?-u:\b)[a-f0-9]{36}NRAL(?-u:\b)",
    ),
    (
        "sentry_dsn",
        &["sentry"],
        r"(?i)https?://(?P<secret>[0-9a-f]{32})(?::[0-9a-f]{32})?@[A-Za-z0-9.-]*sentry[A-Za-z0-9.-]*(?::[0-9]+)?/[0-9]+",
    ),
    (
        "sentry_dsn",
        &["sentry"],
        r#"(?i)sentry_dsn["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?https?://(?P<secret>[0-9a-f]{32})"#,
    ),
    (
        "sentry_auth_token",
        &["sntrys_", "sntryu_"],
        r"(?-u:\b)(?:sntrys_eyJ[A-Za-z0-9+/=_]{40,}|sntryu_[a-f0-9]{64}(?-u:\b))",
    ),
    (
        "atlassian_api_token",
        &["atatt3", "atctt3"],
        r"(?-u:\b)AT(?:ATT|CTT)3[A-Za-z0-9_=-]{150,250}",
    ),
    (
        "atlassian_api_token",
        &["jira", "atlassian", "confluence"],
        r#"(?i)(?:jira|atlassian|confluence)[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9]{24})(?-u:\b)"#,
    ),
    (
        "linear_api_key",
        &["lin_api_", "lin_oauth_"],
        r"(?-u:\b)(?:lin_api_[A-Za-z0-9]{40}|lin_oauth_[a-f0-9]{64})(?-u:\b)",
    ),
    (
        "notion_token",
        &["secret_", "ntn_"],
        r"(?-u:\b)(?:secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{35})(?-u:\b)",
    ),
    (
        "postman_api_key",
        &["pmak-"],
        r"(?-u:\b)PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}(?-u:\b)",
    ),
    (
        "doppler_token",
        &[
            "dp.pt.",
            "dp.st.",
            "dp.sa.",
            "dp.ct.",
            "dp.scim.",
            "dp.audit.",
        ],
        r"(?-u:\b)dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9_.-]{40,64}",
    ),
    (
        "vault_service_token",
        &["hvs."],
        r"(?-u:\b)hvs\.[A-Za-z0-9_-]{24,300}",
    ),
    (
        "vault_service_token",
        &["vault_token"],
        r#"(?i)vault_token["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>s\.[A-Za-z0-9]{24})(?-u:\b)"#,
    ),
    (
        "vault_batch_token",
        &["hvb."],
        r"(?-u:\b)hvb\.[A-Za-z0-9_-]{24,400}",
    ),
    (
        "terraform_cloud_token",
        &[".atlasv1."],
        r"(?-u:\b)[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
    ),
    (
        "heroku_api_key",
        &["hrku-"],
        r"(?-u:\b)HRKU-[A-Za-z0-9_-]{36,80}",
    ),
    (
        "heroku_api_key",
        &["heroku"],
        r#"(?i)heroku[0-9A-Za-z_.-]{0,20}?(?:key|token|secret)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?-u:\b)"#,
    ),
    (
        "digitalocean_token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        r"(?-u:\b)do[opr]_v1_[a-f0-9]{64}(?-u:\b)",
    ),
    (
        "netlify_token",
        &["nfp_"],
        r"(?-u:\b)nfp_[A-Za-z0-9]{36}(?-u:\b)",
    ),
    (
        "netlify_token",
        &["netlify"],
        r#"(?i)netlify[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9_-]{40,46})(?:[^A-Za-z0-9_-]|$)"#,
    ),
    (
        "vercel_token",
        &["vercel"],
        r#"(?i)(?:vercel[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?|(?-u:\b)vercel(?-u:\b)[^\n]{0,200}?--token[= ]["']?)(?P<secret>[A-Za-z0-9]{24,64})(?-u:\b)"#,
    ),
    (
        "cloudflare_api_token",
        &["token", "key"],
        r#"(?i)(?:cloudflare|(?-u:\b)cf[_.-])[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9_-]{40})(?:[^A-Za-z0-9_-]|$)"#,
    ),
    (
        "cloudflare_global_api_key",
        &["key"],
        r#"(?i)(?:cloudflare|(?-u:\b)cf[_.-])[0-9A-Za-z_.-]{0,20}?key["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[a-f0-9]{37})(?-u:\b)"#,
    ),
    (
        "cloudflare_origin_ca_key",
        &["v1.0-"],
        r"(?-u:\b)v1\.0-[a-f0-9]{24}-[a-f0-9]{146}(?-u:\b)",
    ),
    (
        "fastly_api_token",
        &["fastly"],
        r#"(?i)fastly[0-9A-Za-z_.-]{0,20}?(?:token|key)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>[A-Za-z0-9_-]{32})(?:[^A-Za-z0-9_-]|$)"#,
    ),
    (
        "okta_api_token",
        &["okta", "ssws"],
        r#"(?i)(?:okta[0-9A-Za-z_.-]{0,20}?(?:token|key|secret)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?|(?-u:\b)ssws[ \t]+)(?P<secret>00[A-Za-z0-9_-]{40})(?:[^A-Za-z0-9_-]|$)"#,
    ),
    (
        "databricks_token",
        &["dapi"],
        r"(?-u:\b)dapi[a-f0-9]{32}(?:-[0-9])?(?-u:\b)",
    ),
    (
        "grafana_token",
        &["glsa_", "glc_"],
        r"(?-u:\b)(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}(?-u:\b)|glc_[A-Za-z0-9+/]{32,400}={0,3})",
    ),
    (
        "pulumi_access_token",
        &["pul-"],
        r"(?-u:\b)pul-[a-f0-9]{40}(?-u:\b)",
    ),
    (
        "supabase_token",
        &["sbp_"],
        r"(?-u:\b)sbp_[a-f0-9]{40}(?-u:\b)",
    ),
    (
        "age_secret_key",
        &["age-secret-key-1"],
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    ),
    (
        "jwt",
        &["eyj"],
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    ),
    (
        // A header only counts with a body after it: a line break (or, in one-line env
        // values, a space) and 16 base64 characters, after any armour headers. The body ends
        // at the END line, at the end of the text (a key cut short), at a quote, or before
        // the first line that cannot be base64 (a prompt, prose with spaces) — so a header
        // named in prose hides nothing, and output after a cut key stays.
        "private_key",
        &["private key"],
        r#"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?P<secret>(?:\\r|\\n|\s)*(?:(?:Proc-Type|DEK-Info|Version|Comment|Hash|Charset)[ \t]*:[^\r\n\\]*(?:\\r|\\n|\s)+)*(?:[A-Za-z0-9+/=]{16}[\s\S]*?|[A-Za-z0-9+/=]{1,15}\z))(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\z|["'\x60]|(?:\r?\n|\\r?\\n)[ \t]*(?:[A-Za-z0-9+/=]*[^A-Za-z0-9+/=\s\\-]|[A-Za-z0-9+/=]+[ \t]+[^\s]))"#,
    ),
    (
        // A Secret's `.dockerconfigjson` / `.dockercfg`: base64 of registry credentials.
        "docker_config_auth",
        &[".dockerconfigjson", ".dockercfg"],
        r#"(?i)\.docker(?:configjson|cfg)["']?[ \t]*:[ \t]*["']?(?P<secret>[A-Za-z0-9+/]{16,}={0,2})"#,
    ),
    (
        // A PuTTY key file: the base64 lines after `Private-Lines: N`.
        "private_key",
        &["private-lines:"],
        r"(?i)Private-Lines:[ \t]*[0-9]+\r?\n(?P<secret>(?:[ \t]*[A-Za-z0-9+/=]{4,}(?:\r?\n|\z))+)",
    ),
    (
        // kubeconfig: the client key, base64 (of a PEM file or of DER) whatever its label.
        "private_key",
        &["client-key-data"],
        r#"(?i)client-key-data["']?[ \t]*:[ \t]*["']?(?P<secret>[A-Za-z0-9+/]{16,}={0,2})"#,
    ),
    (
        // `scheme://user%3Apassword@host`: the separator itself percent-encoded.
        "url_credentials",
        &["%3a"],
        r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]{1,20}://(?:[^\s:@/?#"'<>%]|%[0-9a-f]{2})*?%3a(?P<secret>[^\s:@/?#"'<>$*{][^\s:@/?#"'<>]*)@[a-z0-9._\[\]-]+"#,
    ),
    (
        // A whole URL percent-encoded into another (`next=https%3A%2F%2Fuser%3Apw%40host`).
        "url_credentials",
        &["%3a%2f%2f"],
        r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]{1,20}%3a%2f%2f(?:[^\s:@/?#"'<>%&]|%[0-9a-f]{2})*?(?::|%3a)(?P<secret>(?:[^\s:@/?#"'<>%&$*{]|%[0-9a-f]{2})(?:[^\s:@/?#"'<>%&]|%[0-9a-f]{2})*?)%40[a-z0-9._-]+"#,
    ),
    (
        "url_credentials",
        &["://"],
        // The password runs to the last `@` before the host: one that holds a raw `:` or
        // `@` (`p@ss`) is hidden whole.
        r#"(?-u:\b)[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:@/?#"'<>]*:(?P<secret>[^\s:@/?#"'<>${*][^\s/?#"'<>]*)@[A-Za-z0-9._\[\]-]+"#,
    ),
    (
        "http_authorization_header",
        &["authorization"],
        r#"(?i)(?-u:\b)(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?(?:bearer|basic|token|bot|ssws|apikey|api-key|dsn|negotiate|ntlm)[ \t]+(?P<secret>[^\s"'$<{*,;][^\s"',;]{5,})"#,
    ),
    (
        // A request's `Cookie:` header: everything from the first value on (the pairs after
        // it too); `Set-Cookie` is the next rule's.
        "http_cookie",
        &["cookie"],
        r#"(?im)(?:^|[\s>"'{,;(\[])cookie["']?[ \t]*:[ \t]*["']?[^\s=;"'$<{*\[][^\s=;"']*=(?P<secret>[^\s;"'$<{*\[][^\r\n"']*)"#,
    ),
    (
        // `Set-Cookie: name=VALUE; Path=/; HttpOnly`: only the value; the attributes are
        // not secret and stay.
        "http_cookie",
        &["set-cookie"],
        r#"(?i)set-cookie["']?[ \t]*:[ \t]*["']?[^\s=;"',]+=\\?"?(?P<secret>[^\s;"'$<{*\[\\][^\s;"'\\]*)"#,
    ),
    (
        "netrc_password",
        &["password"],
        r#"(?i)(?-u:\b)machine\s+\S+\s+login\s+\S+(?:\s+account\s+\S+)?\s+password\s+(?P<secret>[^\s$<{*"][^\s]*)"#,
    ),
    (
        "pgpass_password",
        &[":"],
        r"(?m)^[A-Za-z0-9.*_-]+:(?:[0-9]{1,5}|\*):[A-Za-z_*][^:\s]*:[A-Za-z_*][^:\s]*:(?P<secret>(?:[^\s:\\$<{*]|\\.)(?:[^\s:\\]|\\.)*)\r?$",
    ),
    (
        "generic_secret_assignment",
        &["pass", "pwd", "secret", "token", "key", "credential"],
        r#"(?i)(?:(?-u:\b)(?:[A-Za-z0-9]+[_.-])*(?:pass|pwd)|pass(?:word|wd|phrase)|secret|token|api[_.-]?key|apikey|(?:secret|access|private|encryption|signing|master|client|auth|app|license)[_.-]?key|credentials?|secret[_.-]?key[_.-]?base)=["']?(?P<secret>(?-i:[^\s"'(),;\[\]{}<>&`a-z_.$*!][^\s"'(),;\[\]{}<>&`]{5,}|[a-z_.][^\s"'(),;\[\]{}<>&`a-z_.][^\s"'(),;\[\]{}<>&`]{4,}|[a-z_.]{2}[^\s"'(),;\[\]{}<>&`a-z_.][^\s"'(),;\[\]{}<>&`]{3,}|[a-z_.]{3}[^\s"'(),;\[\]{}<>&`a-z_.][^\s"'(),;\[\]{}<>&`]{2,}|[a-z_.]{4}[^\s"'(),;\[\]{}<>&`a-z_.][^\s"'(),;\[\]{}<>&`]+|[a-z_.]{5,}[^\s"'(),;\[\]{}<>&`a-z_.][^\s"'(),;\[\]{}<>&`]*|[a-z]{6,}))(?:[\s"',;)}\]&`]|$)"#,
    ),
    (
        "generic_secret_assignment",
        &["pass", "pwd", "secret", "token", "key", "credential"],
        r#"(?i)(?:(?-u:\b)(?:[A-Za-z0-9]+[_.-])*(?:pass|pwd)|pass(?:word|wd|phrase)|secret|token|api[_.-]?key|apikey|(?:secret|access|private|encryption|signing|master|client|auth|app|license)[_.-]?key|credentials?|secret[_.-]?key[_.-]?base)["']?[ \t]*(?::=|=>|:|=)[ \t]*["']?(?P<secret>(?:[^\s"'(),;\[\]{}<>&`A-Za-z_.:$*!][^\s"'(),;\[\]{}<>&`]{5,}|[A-Za-z_.:][^\s"'(),;\[\]{}<>&`A-Za-z_.:][^\s"'(),;\[\]{}<>&`]{4,}|[A-Za-z_.:]{2}[^\s"'(),;\[\]{}<>&`A-Za-z_.:][^\s"'(),;\[\]{}<>&`]{3,}|[A-Za-z_.:]{3}[^\s"'(),;\[\]{}<>&`A-Za-z_.:][^\s"'(),;\[\]{}<>&`]{2,}|[A-Za-z_.:]{4}[^\s"'(),;\[\]{}<>&`A-Za-z_.:][^\s"'(),;\[\]{}<>&`]+|[A-Za-z_.:]{5,}[^\s"'(),;\[\]{}<>&`A-Za-z_.:][^\s"'(),;\[\]{}<>&`]*))(?:[\s"',;)}\]&`]|$)"#,
    ),
    (
        "generic_secret_assignment",
        &["pass", "pwd"],
        r#"(?i)(?:(?-u:\b)(?:[A-Za-z0-9]+[_.-])*(?:pass|pwd)|pass(?:word|wd|phrase))["']?[ \t]*(?::=|=>|:|=)[ \t]*["'](?P<secret>[^\s"'$<{*][^"'\r\n]{4,}[^\s"'])["']"#,
    ),
    (
        "generic_secret_assignment",
        &["pass", "pwd", "secret", "token", "key", "credential"],
        r#"(?i)(?:(?-u:\b)(?:[A-Za-z0-9]+[_.-])*(?:pass|pwd)|pass(?:word|wd|phrase)|secret|token|api[_.-]?key|apikey|(?:secret|access|private|encryption|signing|master|client|auth|app|license)[_.-]?key|credentials?|secret[_.-]?key[_.-]?base)["']?[ \t]*(?::=|=>|:|=)[ \t]*["'](?P<secret>(?:[^"'\r\nA-Za-z_.: $<{*][^"'\r\n]{5,}|[A-Za-z_.:][^"'\r\nA-Za-z_.: ][^"'\r\n]{4,}|[A-Za-z_.:][A-Za-z_.: ][^"'\r\nA-Za-z_.: ][^"'\r\n]{3,}|[A-Za-z_.:][A-Za-z_.: ]{2}[^"'\r\nA-Za-z_.: ][^"'\r\n]{2,}|[A-Za-z_.:][A-Za-z_.: ]{3}[^"'\r\nA-Za-z_.: ][^"'\r\n]+|[A-Za-z_.:][A-Za-z_.: ]{4,}[^"'\r\nA-Za-z_.: ][^"'\r\n]*))["']"#,
    ),
    (
        "mysql_cli_password",
        &["mysql", "mariadb"],
        r#"(?-u:\b)(?i:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mysqlsh|mariadb|mariadb-dump|mariadb-admin)(?-u:\b)[^\n|;&]*?[ \t]-p["']?(?P<secret>[^\s"'$<{*-][^\s"']*)"#,
    ),
    (
        "cli_password_flag",
        &[
            "password", "passwd", "pass", "token", "secret", "api-key", "apikey",
        ],
        r#"(?i)(?:^|\s)--?(?:[a-z0-9]+-)*(?:password|passwd|pass|token|secret|api-key|apikey)=["']?(?P<secret>[^\s"'$<{*][^\s"']*)"#,
    ),
    (
        "cli_password_flag",
        &["password", "passwd", "pass", "token", "secret", "api-key"],
        r#"(?i)(?:^|\s)--(?:[a-z0-9]+-)*(?:password|passwd|pass|token|secret|api-key)[ \t]+["']?(?P<secret>[^\s"'$<{*/-][^\s"']*?[0-9!@#%^&+=/_.~][^\s"']*)"#,
    ),
    (
        "cli_password_flag",
        &["login"],
        r#"(?-u:\b)(?:docker|podman|buildah|helm|oras|skopeo)(?:[ \t]+registry)?[ \t]+login(?-u:\b)[^\n|;&]*?[ \t](?:-p|--password)[ \t]+["']?(?P<secret>[^\s"'$<{*-][^\s"']*)"#,
    ),
];
