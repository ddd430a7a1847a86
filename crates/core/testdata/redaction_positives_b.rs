// Redaction test data, part 2 of the positives (the kinds after part 1).
pub const POSITIVES_B: &[(&str, &str, &str)] = &[
    (
        "huggingface_token",
        "HF_TOKEN=hf_EXAMPLENIWeYvSVZdPDTMrkEiGsizkWNDR",
        "hf_EXAMPLENIWeYvSVZdPDTMrkEiGsizkWNDR",
    ),
    (
        "huggingface_token",
        "> Authorization: Bearer hf_EXAMPLEhgCurtGZihRgIcUqgYlNIOOFZzB",
        "hf_EXAMPLEhgCurtGZihRgIcUqgYlNIOOFZzB",
    ),
    (
        "cohere_api_key",
        "CO_API_KEY=EXAMPLE2CXFMgdlUJ1DFn6IAITZbckTgglg7UoMW",
        "EXAMPLE2CXFMgdlUJ1DFn6IAITZbckTgglg7UoMW",
    ),
    (
        "cohere_api_key",
        "cohere_api_key: \"EXAMPLEF7KUsATzQOLdzzdvJ6yPLeHOP4kOYCkzh\"",
        "EXAMPLEF7KUsATzQOLdzzdvJ6yPLeHOP4kOYCkzh",
    ),
    (
        "replicate_api_token",
        "REPLICATE_API_TOKEN=r8_EXAMPLEpqwyXThkfJ19mNeiNqGNAUZXSdfWVZ",
        "r8_EXAMPLEpqwyXThkfJ19mNeiNqGNAUZXSdfWVZ",
    ),
    (
        "replicate_api_token",
        "> Authorization: Token r8_EXAMPLEdUKXcMTjI9AQ6UbDUZgiLr98C8jx5u",
        "r8_EXAMPLEdUKXcMTjI9AQ6UbDUZgiLr98C8jx5u",
    ),
    (
        "groq_api_key",
        "GROQ_API_KEY=gsk_EXAMPLELREgWc4XMmunsK2nFN6vWSILrQ3KMAdVDaEMZ3LqAizQW",
        "gsk_EXAMPLELREgWc4XMmunsK2nFN6vWSILrQ3KMAdVDaEMZ3LqAizQW",
    ),
    (
        "groq_api_key",
        "{\"groq\": {\"apiKey\": \"gsk_EXAMPLElYmVzwnLlrBkPF1SEZXkCGqnqtXlqFURmSw6YjHrpm54X\"}}",
        "gsk_EXAMPLElYmVzwnLlrBkPF1SEZXkCGqnqtXlqFURmSw6YjHrpm54X",
    ),
    (
        "perplexity_api_key",
        "PERPLEXITY_API_KEY=pplx-EXAMPLEudxSpUOXaOFID82UFC4Tu5GefM6qV0081Qct9VACV",
        "pplx-EXAMPLEudxSpUOXaOFID82UFC4Tu5GefM6qV0081Qct9VACV",
    ),
    (
        "perplexity_api_key",
        "> Authorization: Bearer pplx-EXAMPLENhwXFx9QNUPb08ymHWJKSB3cZHnOqQAAlPCOF11Qm",
        "pplx-EXAMPLENhwXFx9QNUPb08ymHWJKSB3cZHnOqQAAlPCOF11Qm",
    ),
    (
        "npm_token",
        "//registry.npmjs.org/:_authToken=npm_EXAMPLEQNH15kxbUYyINRKkStbcX8YFrcPWk",
        "npm_EXAMPLEQNH15kxbUYyINRKkStbcX8YFrcPWk",
    ),
    (
        "npm_token",
        "NPM_TOKEN=npm_EXAMPLErv5SM0HE6Z8EV1LofbQKDngf0P91W",
        "npm_EXAMPLErv5SM0HE6Z8EV1LofbQKDngf0P91W",
    ),
    (
        "npm_token",
        "//npm.pkg.example.com/:_authToken=85165bb1-5fbf-de90-4293-657927280333",
        "85165bb1-5fbf-de90-4293-657927280333",
    ),
    (
        "pypi_token",
        "[pypi]\n  username = __token__\n  password = pypi-AgEIcHlwaS5vcmcEXAMPLE1j6E_Uy3hV05vcH1kxR798Boj-KOFvdpR8El10XfO9bnbCFsWDJztRfNd8S7YErhFIockiWAdhBjiRMqYIEgRBbO3b3cStOQ5kRB2InkqgAG4h2tBeNyu-eYCyujXHFXUyRTI",
        "pypi-AgEIcHlwaS5vcmcEXAMPLE1j6E_Uy3hV05vcH1kxR798Boj-KOFvdpR8El10XfO9bnbCFsWDJztRfNd8S7YErhFIockiWAdhBjiRMqYIEgRBbO3b3cStOQ5kRB2InkqgAG4h2tBeNyu-eYCyujXHFXUyRTI",
    ),
    (
        "pypi_token",
        "TWINE_PASSWORD=pypi-AgENdGVzdC5weXBpLm9yZwEXAMPLEtdlAAEumPrwN4wafmVVzqazXCDZHpiq2ovwDpdVfLwg702fls0p4OYInKyPe_mGtK2TiXZg7cyx9bgdXqExMxaJN9ZNw742NG-zekA0o7y9OVgbmB",
        "pypi-AgENdGVzdC5weXBpLm9yZwEXAMPLEtdlAAEumPrwN4wafmVVzqazXCDZHpiq2ovwDpdVfLwg702fls0p4OYInKyPe_mGtK2TiXZg7cyx9bgdXqExMxaJN9ZNw742NG-zekA0o7y9OVgbmB",
    ),
    (
        "rubygems_api_key",
        "---\n:rubygems_api_key: rubygems_deadbeef8635db3f8ed651b00cf2d97ec796f92f1c7c0a8e",
        "rubygems_deadbeef8635db3f8ed651b00cf2d97ec796f92f1c7c0a8e",
    ),
    (
        "rubygems_api_key",
        "GEM_HOST_API_KEY=rubygems_deadbeef7848f78fa4d251f9e5ec62c48685d98a01ee25e2",
        "rubygems_deadbeef7848f78fa4d251f9e5ec62c48685d98a01ee25e2",
    ),
    (
        "nuget_api_key",
        "dotnet nuget push pkg.1.0.0.nupkg --api-key oy2exampleep79o3lqejyfvnn7p78h5eubrxd4sewwkqkm --source https://api.nuget.org/v3/index.json",
        "oy2exampleep79o3lqejyfvnn7p78h5eubrxd4sewwkqkm",
    ),
    (
        "nuget_api_key",
        "NUGET_API_KEY=oy2exampleaallmp3ceesmwm6b2qw1q0124r37cy2i35r9",
        "oy2exampleaallmp3ceesmwm6b2qw1q0124r37cy2i35r9",
    ),
    (
        "dockerhub_pat",
        "echo dckr_pat_EXAMPLEJq_Z259j8cuj0K6Es4Lc | docker login -u demo --password-stdin",
        "dckr_pat_EXAMPLEJq_Z259j8cuj0K6Es4Lc",
    ),
    (
        "dockerhub_pat",
        "DOCKERHUB_TOKEN=dckr_pat_EXAMPLE1SQxzJ4bORJlFJn2lQtg",
        "dckr_pat_EXAMPLE1SQxzJ4bORJlFJn2lQtg",
    ),
    (
        "docker_config_auth",
        "{\n  \"auths\": {\n    \"https://index.docker.io/v1/\": {\n      \"auth\": \"ZGVtbzpkY2tyX3BhdF9leGFtcGxlZXhhbXBsZWV4YW1wbGU=\"\n    }\n  }\n}",
        "ZGVtbzpkY2tyX3BhdF9leGFtcGxlZXhhbXBsZWV4YW1wbGU=",
    ),
    (
        "docker_config_auth",
        "{\"auths\":{\"ghcr.io\":{\"auth\":\"Y2ktYm90Omh1bnRlcjItZXhhbXBsZS1wYXNz\"}}}",
        "Y2ktYm90Omh1bnRlcjItZXhhbXBsZS1wYXNz",
    ),
    (
        "sendgrid_api_key",
        "SENDGRID_API_KEY=SG.EXAMPLE-Hpk6G0wq4Z4Qqv.AgSvqt3ydUNu5RBHsk-KkVG3KOS1s1hPiyGiUlVtb-j",
        "SG.EXAMPLE-Hpk6G0wq4Z4Qqv.AgSvqt3ydUNu5RBHsk-KkVG3KOS1s1hPiyGiUlVtb-j",
    ),
    (
        "sendgrid_api_key",
        "> Authorization: Bearer SG.EXAMPLE4R_fnoEBgSOgKtD.8nLu_jRtrwr9D-AoWxBxfBIXCyDzy3_XjsiUTKvaXz5",
        "SG.EXAMPLE4R_fnoEBgSOgKtD.8nLu_jRtrwr9D-AoWxBxfBIXCyDzy3_XjsiUTKvaXz5",
    ),
    (
        "twilio_api_key",
        "TWILIO_API_KEY=SKdeadbeefab4027f2f22d4a2f51b63f5c",
        "SKdeadbeefab4027f2f22d4a2f51b63f5c",
    ),
    (
        "twilio_api_key",
        "{\"sid\": \"SKdeadbeef8a2156c2f2712866b8a2906d\", \"friendly_name\": \"ci\"}",
        "SKdeadbeef8a2156c2f2712866b8a2906d",
    ),
    (
        "twilio_auth_token",
        "TWILIO_AUTH_TOKEN=deadbeef31cd01ae35b4a055ff6d167c",
        "deadbeef31cd01ae35b4a055ff6d167c",
    ),
    (
        "twilio_auth_token",
        "twilio_auth_token: \"deadbeef87d96eb5cb5a3fc0f4d728ed\"",
        "deadbeef87d96eb5cb5a3fc0f4d728ed",
    ),
    (
        "mailgun_api_key",
        "curl -s --user 'api:key-deadbeef97c1a4fd598778e87751490b' https://api.mailgun.net/v3/mg.example.com/messages",
        "key-deadbeef97c1a4fd598778e87751490b",
    ),
    (
        "mailgun_api_key",
        "MAILGUN_API_KEY=key-deadbeefaef3ffd885e7843097f2990d",
        "key-deadbeefaef3ffd885e7843097f2990d",
    ),
    (
        "mailgun_api_key",
        "MAILGUN_SIGNING_KEY=deadbeef8fcfe7cdf33869eca71bc6b3-b0c4be1e-a445e8c8",
        "deadbeef8fcfe7cdf33869eca71bc6b3-b0c4be1e-a445e8c8",
    ),
    (
        "mailchimp_api_key",
        "MAILCHIMP_API_KEY=deadbeefe69b6ad25de9dbec2e447b97-us12",
        "deadbeefe69b6ad25de9dbec2e447b97-us12",
    ),
    (
        "mailchimp_api_key",
        "{\"mailchimp\": {\"apiKey\": \"deadbeef8673f78b489d63eb4b3a58df-us6\", \"server\": \"us6\"}}",
        "deadbeef8673f78b489d63eb4b3a58df-us6",
    ),
    (
        "shopify_access_token",
        "> X-Shopify-Access-Token: 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",
        "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",
    ),
    (
        "shopify_access_token",
        "SHOPIFY_ACCESS_TOKEN=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",
        "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",
    ),
    (
        "shopify_shared_secret",
        "SHOPIFY_API_SECRET=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",
        "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",
    ),
    (
        "shopify_shared_secret",
        "{\"shopify\": {\"sharedSecret\": \"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\"}}",
        "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",
    ),
    (
        "datadog_api_key",
        "DD_API_KEY=deadbeef2955e4b9b2f5a31cc997dc41",
        "deadbeef2955e4b9b2f5a31cc997dc41",
    ),
    (
        "datadog_api_key",
        "> DD-API-KEY: deadbeefeebf33ae1255ffdf0dbaadfd",
        "deadbeefeebf33ae1255ffdf0dbaadfd",
    ),
    (
        "datadog_app_key",
        "DD_APP_KEY=deadbeeff32a5992f9f46df5b2fcdb3b8c48b515",
        "deadbeeff32a5992f9f46df5b2fcdb3b8c48b515",
    ),
    (
        "datadog_app_key",
        "> DD-APPLICATION-KEY: deadbeefda3e7f42e711609ee659a5d9a9e5a0d2",
        "deadbeefda3e7f42e711609ee659a5d9a9e5a0d2",
    ),
    (
        "new_relic_user_api_key",
        "NEW_RELIC_API_KEY=NRAK-EXAMPLE2WQRPF1UINZV2QLLMDW9",
        "NRAK-EXAMPLE2WQRPF1UINZV2QLLMDW9",
    ),
    (
        "new_relic_user_api_key",
        "> API-Key: NRAK-EXAMPLE9QKMD0ZGOC4CGEVRZOIF",
        "NRAK-EXAMPLE9QKMD0ZGOC4CGEVRZOIF",
    ),
    (
        "new_relic_insert_key",
        "NEW_RELIC_INSERT_KEY=NRII-EXAMPLEznjG6nXQ_-Ic4FtmFq41DevLu",
        "NRII-EXAMPLEznjG6nXQ_-Ic4FtmFq41DevLu",
    ),
    (
        "new_relic_insert_key",
        "> X-Insert-Key: NRII-EXAMPLE4GV6G1JV9v_NG-U3dpacHIczN",
        "NRII-EXAMPLE4GV6G1JV9v_NG-U3dpacHIczN",
    ),
    (
        "new_relic_license_key",
        "NEW_RELIC_LICENSE_KEY=deadbeef92511ac36cd04ce599e1c5c1e979NRAL",
        "deadbeef92511ac36cd04ce599e1c5c1e979NRAL",
    ),
    (
        "new_relic_license_key",
        "common: &default_settings\n  license_key: 'deadbeefd04eed7cf40cd67552c8541ad061NRAL'",
        "deadbeefd04eed7cf40cd67552c8541ad061NRAL",
    ),
    (
        "sentry_dsn",
        "SENTRY_DSN=https://deadbeefb6a0d6691e2d0e0b0a5d8796@o450000.ingest.sentry.io/5500000",
        "deadbeefb6a0d6691e2d0e0b0a5d8796",
    ),
    (
        "sentry_dsn",
        "sentry_sdk.init(dsn=\"https://deadbeefd40fe0b3244d907ccb75f2a2@sentry.example.com/3\", traces_sample_rate=1.0)",
        "deadbeefd40fe0b3244d907ccb75f2a2",
    ),
    (
        "sentry_dsn",
        "sentry_dsn: https://deadbeef5c42cb14601ccafe45278097@errors.example.net/12",
        "deadbeef5c42cb14601ccafe45278097",
    ),
    (
        "sentry_auth_token",
        "SENTRY_AUTH_TOKEN=sntrys_eyJpYXQiOjE3MTQ1NjAwMDB9Q8WMWRcwH8X+rG3vCEq5KtKPfGuC4hVKj7Ktt0F3njh2xiEUowwcHZ9PVC39UifLoWH51fyCsyTSi1ZZ_pgz6YDHIkNtpauJU466ce1HM7jcTc5PR0/zED8j3eX+",
        "sntrys_eyJpYXQiOjE3MTQ1NjAwMDB9Q8WMWRcwH8X+rG3vCEq5KtKPfGuC4hVKj7Ktt0F3njh2xiEUowwcHZ9PVC39UifLoWH51fyCsyTSi1ZZ_pgz6YDHIkNtpauJU466ce1HM7jcTc5PR0/zED8j3eX+",
    ),
    (
        "sentry_auth_token",
        "> Authorization: Bearer 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",
        "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",
    ),
    (
        "atlassian_api_token",
        "JIRA_API_TOKEN=ATATT3EXAMPLE8_P-E2KFdLp6zU0L3nJbMWQ9=riQOT4uLIkl0BI0WYTzmDHyjBm9zqua59eJ1GPtGJ8ANY0czn_CZbt2YIWW34iLqir=cohCOGQJrIzUTfqxeK1BZY5woL_J8_dc1q58VOuiudXL8fpBvZFAtOpU6_2d1aZWbKeRmfGPUrIcPwbvNfPCNKE",
        "ATATT3EXAMPLE8_P-E2KFdLp6zU0L3nJbMWQ9=riQOT4uLIkl0BI0WYTzmDHyjBm9zqua59eJ1GPtGJ8ANY0czn_CZbt2YIWW34iLqir=cohCOGQJrIzUTfqxeK1BZY5woL_J8_dc1q58VOuiudXL8fpBvZFAtOpU6_2d1aZWbKeRmfGPUrIcPwbvNfPCNKE",
    ),
    (
        "atlassian_api_token",
        "curl -u me@example.com:ATATT3EXAMPLEHn5ApGQ0QzuoHE2jmQUQu9CbDW-yXobfk-7969xTT645QSTE4hLOGbOeXnsjAocvK70ayNtX-e7GB40dmDtsIWE3FR-TvfmFnM1uyoWhDiasPPpnlFAiy6kTEooMfeNWRYYSoV5kySoKWXcscMbqRl_qMkGQZdDGA82hxkRhUgSdU2vzmD9 https://acme.atlassian.net/rest/api/3/myself",
        "ATATT3EXAMPLEHn5ApGQ0QzuoHE2jmQUQu9CbDW-yXobfk-7969xTT645QSTE4hLOGbOeXnsjAocvK70ayNtX-e7GB40dmDtsIWE3FR-TvfmFnM1uyoWhDiasPPpnlFAiy6kTEooMfeNWRYYSoV5kySoKWXcscMbqRl_qMkGQZdDGA82hxkRhUgSdU2vzmD9",
    ),
    (
        "atlassian_api_token",
        "jira_api_token: \"EXAMPLELOFL4VKaz1DPTOosd\"",
        "EXAMPLELOFL4VKaz1DPTOosd",
    ),
    (
        "linear_api_key",
        "LINEAR_API_KEY=lin_api_EXAMPLEw0vpjnyG84As0cOPJheT37IWB6fhC48uF",
        "lin_api_EXAMPLEw0vpjnyG84As0cOPJheT37IWB6fhC48uF",
    ),
    (
        "linear_api_key",
        "> Authorization: lin_api_EXAMPLECyemorlRu0Iq9jjikv494fyYqyBIlII65",
        "lin_api_EXAMPLECyemorlRu0Iq9jjikv494fyYqyBIlII65",
    ),
    (
        "notion_token",
        "NOTION_TOKEN=secret_EXAMPLEnrpqRMn1hsXbuRVkLoBy36rrqmjoxvNJ1lNX",
        "secret_EXAMPLEnrpqRMn1hsXbuRVkLoBy36rrqmjoxvNJ1lNX",
    ),
    (
        "notion_token",
        "> Authorization: Bearer ntn_27062609431EXAMPLEqDBIIHHqsZ8bC2PrEb0gbUrKTwQY",
        "ntn_27062609431EXAMPLEqDBIIHHqsZ8bC2PrEb0gbUrKTwQY",
    ),
    (
        "postman_api_key",
        "POSTMAN_API_KEY=PMAK-deadbeef611970cfee1b0574-5dfe47ebe6d211f526b3ae2de907bf4c9d",
        "PMAK-deadbeef611970cfee1b0574-5dfe47ebe6d211f526b3ae2de907bf4c9d",
    ),
    (
        "postman_api_key",
        "> X-Api-Key: PMAK-deadbeef658457e8811fd151-e70635ed72f6f77260ef40c3ecbe779a40",
        "PMAK-deadbeef658457e8811fd151-e70635ed72f6f77260ef40c3ecbe779a40",
    ),
    (
        "doppler_token",
        "DOPPLER_TOKEN=dp.pt.EXAMPLE18rgUbMnxd8LHDmNhrdMTL015vqZscljvXhv",
        "dp.pt.EXAMPLE18rgUbMnxd8LHDmNhrdMTL015vqZscljvXhv",
    ),
    (
        "doppler_token",
        "doppler run --token dp.st.prd.EXAMPLEFIjxGhjQMrL2FW3PXwHje3uAnnBlQ6N7S -- ./server",
        "dp.st.prd.EXAMPLEFIjxGhjQMrL2FW3PXwHje3uAnnBlQ6N7S",
    ),
    (
        "vault_service_token",
        "VAULT_TOKEN=hvs.EXAMPLEake4-V52NM8rDyit5S4fSelPUvcj00sE0vwEck0WpoBW2zflt35lhALp2fBcF2QRnCqUd17AnXMgIy8lWGa",
        "hvs.EXAMPLEake4-V52NM8rDyit5S4fSelPUvcj00sE0vwEck0WpoBW2zflt35lhALp2fBcF2QRnCqUd17AnXMgIy8lWGa",
    ),
    (
        "vault_service_token",
        "> X-Vault-Token: hvs.EXAMPLEk9ZPnKcPXEv7gTPZJ",
        "hvs.EXAMPLEk9ZPnKcPXEv7gTPZJ",
    ),
    (
        "vault_service_token",
        "export VAULT_TOKEN=s.EXAMPLERMKDYDehbir1VZ5kN",
        "s.EXAMPLERMKDYDehbir1VZ5kN",
    ),
    (
        "vault_batch_token",
        "VAULT_TOKEN=hvb.EXAMPLEhiDFRTHiARSXgr5Y_DXvxSNlaSRnpqxBjzCld49aa8-Qh9WYD4JmkiqansSesTtIPqAYk6ThPEgMfuUiTRocFlfVVBFrV9oYLQnhvUsjooEMy7Wn-9uWJHJZRBdHcCuIiFD",
        "hvb.EXAMPLEhiDFRTHiARSXgr5Y_DXvxSNlaSRnpqxBjzCld49aa8-Qh9WYD4JmkiqansSesTtIPqAYk6ThPEgMfuUiTRocFlfVVBFrV9oYLQnhvUsjooEMy7Wn-9uWJHJZRBdHcCuIiFD",
    ),
    (
        "vault_batch_token",
        "{\"auth\": {\"client_token\": \"hvb.EXAMPLEsMx31s4tnFOVCzjjLB7e0yUeg6ejlSGSAPwYxZi2QDBmLE_QtaDNOXvpGOway411Axl7M-oIPFL29JJp8cTjFoH79rK2Q4hQ6IVpEn0Fc_nCLYijf_8xCCzAr8G01_u5btqo9br1jjxyKrn\", \"renewable\": false}}",
        "hvb.EXAMPLEsMx31s4tnFOVCzjjLB7e0yUeg6ejlSGSAPwYxZi2QDBmLE_QtaDNOXvpGOway411Axl7M-oIPFL29JJp8cTjFoH79rK2Q4hQ6IVpEn0Fc_nCLYijf_8xCCzAr8G01_u5btqo9br1jjxyKrn",
    ),
    (
        "terraform_cloud_token",
        "{\"credentials\": {\"app.terraform.io\": {\"token\": \"EXAMPLETpOPJB3.atlasv1.kftXj4eIQjxMqfawTCqroImreQsQ3d-oj1Gtfu0XL-EAJWMO2AJXQr3I6JEZnhEC1t8\"}}}",
        "EXAMPLETpOPJB3.atlasv1.kftXj4eIQjxMqfawTCqroImreQsQ3d-oj1Gtfu0XL-EAJWMO2AJXQr3I6JEZnhEC1t8",
    ),
    (
        "terraform_cloud_token",
        "TF_TOKEN_app_terraform_io=EXAMPLE5INo2W5.atlasv1.u9Mum8Kl9_yz3cPjTRb9zTeGbW3xOTtj1F02YqrrhquTlkwLZ6pUXDhJrG9ljg6997u",
        "EXAMPLE5INo2W5.atlasv1.u9Mum8Kl9_yz3cPjTRb9zTeGbW3xOTtj1F02YqrrhquTlkwLZ6pUXDhJrG9ljg6997u",
    ),
    (
        "heroku_api_key",
        "HEROKU_API_KEY=HRKU-AAEXAMPLEuiud1DT1weeMZ0idwGbjMdyLOepJ2aEkUM0dEpjCr24qHny17B8",
        "HRKU-AAEXAMPLEuiud1DT1weeMZ0idwGbjMdyLOepJ2aEkUM0dEpjCr24qHny17B8",
    ),
    (
        "heroku_api_key",
        "heroku_api_key: \"76c84298-9d62-190e-0e99-3abffaee65f9\"",
        "76c84298-9d62-190e-0e99-3abffaee65f9",
    ),
    (
        "digitalocean_token",
        "DIGITALOCEAN_ACCESS_TOKEN=dop_v1_deadbeef0f38bbff9e21606dff4943a0abd2e4453fd5407437b697619e26e233",
        "dop_v1_deadbeef0f38bbff9e21606dff4943a0abd2e4453fd5407437b697619e26e233",
    ),
    (
        "digitalocean_token",
        "> Authorization: Bearer doo_v1_deadbeef64b90034005d483ca767d872b0877fe2b04a1c160273b5a5a406ac6a",
        "doo_v1_deadbeef64b90034005d483ca767d872b0877fe2b04a1c160273b5a5a406ac6a",
    ),
    (
        "netlify_token",
        "NETLIFY_AUTH_TOKEN=nfp_EXAMPLEDcQwe08M1W5Cqfay7yrOWEQHLD5Vu",
        "nfp_EXAMPLEDcQwe08M1W5Cqfay7yrOWEQHLD5Vu",
    ),
    (
        "netlify_token",
        "netlify_token: \"EXAMPLEVS2OltK85SyQ7qVsgyRUfjb5ZjKCVjol8vEC\"",
        "EXAMPLEVS2OltK85SyQ7qVsgyRUfjb5ZjKCVjol8vEC",
    ),
    (
        "vercel_token",
        "VERCEL_TOKEN=EXAMPLEDRv4wJ4Rwi27So0pe",
        "EXAMPLEDRv4wJ4Rwi27So0pe",
    ),
    (
        "vercel_token",
        "npx vercel deploy --prod --token EXAMPLEMLwgXX6nm90weTMx3",
        "EXAMPLEMLwgXX6nm90weTMx3",
    ),
    (
        "cloudflare_api_token",
        "CLOUDFLARE_API_TOKEN=EXAMPLEA44l_bvD0jm0o0rNXnDQWN4o_KvHACBQl",
        "EXAMPLEA44l_bvD0jm0o0rNXnDQWN4o_KvHACBQl",
    ),
    (
        "cloudflare_api_token",
        "cf_api_token = \"EXAMPLEv_nqsGtukeNjOtqDyKNf-aEObVUEJyHxY\"",
        "EXAMPLEv_nqsGtukeNjOtqDyKNf-aEObVUEJyHxY",
    ),
    (
        "cloudflare_global_api_key",
        "CLOUDFLARE_API_KEY=deadbeef486a31ac1af2f5b61583ddb01ea29",
        "deadbeef486a31ac1af2f5b61583ddb01ea29",
    ),
    (
        "cloudflare_global_api_key",
        "{\"cloudflare_api_key\": \"deadbeef187ac01e6f0b1cd621d8e67bcafcb\", \"email\": \"ops@example.com\"}",
        "deadbeef187ac01e6f0b1cd621d8e67bcafcb",
    ),
    (
        "cloudflare_origin_ca_key",
        "CF_ORIGIN_CA_KEY=v1.0-deadbeef70da3bac9ff735c2-02ae04794f40d36e3b69a4eaf33f63352fa7804f721e7687ca3121b4ce1801a4b27c0a4a8adb560ed7e9e0998490641f58821609d069b77b17eaac23ffcdb2acabe07397d0bf576e21",
        "v1.0-deadbeef70da3bac9ff735c2-02ae04794f40d36e3b69a4eaf33f63352fa7804f721e7687ca3121b4ce1801a4b27c0a4a8adb560ed7e9e0998490641f58821609d069b77b17eaac23ffcdb2acabe07397d0bf576e21",
    ),
    (
        "cloudflare_origin_ca_key",
        "> X-Auth-User-Service-Key: v1.0-deadbeef58a76af9f53f0c85-e81d7ce7ff5fddcf2719269e4796660b3f29f965ef8f1ef349d23aa184a2e22b0b365735391b518d436950979944f3ca2021fbc94d3122978d1ed66531a278b57e49464a6dc54c56e0",
        "v1.0-deadbeef58a76af9f53f0c85-e81d7ce7ff5fddcf2719269e4796660b3f29f965ef8f1ef349d23aa184a2e22b0b365735391b518d436950979944f3ca2021fbc94d3122978d1ed66531a278b57e49464a6dc54c56e0",
    ),
    (
        "fastly_api_token",
        "FASTLY_API_TOKEN=EXAMPLEiaf8_EXZOTC8UmCVCgF0blXtt",
        "EXAMPLEiaf8_EXZOTC8UmCVCgF0blXtt",
    ),
    (
        "fastly_api_token",
        "fastly_api_key = \"EXAMPLEArJSzofRbUqWvrMooGL1zGjD0\"",
        "EXAMPLEArJSzofRbUqWvrMooGL1zGjD0",
    ),
    (
        "okta_api_token",
        "OKTA_API_TOKEN=00EXAMPLEKRoQg7Vi8jeGhSEBcrZ_YtnMxrgI5Ulfj",
        "00EXAMPLEKRoQg7Vi8jeGhSEBcrZ_YtnMxrgI5Ulfj",
    ),
    (
        "okta_api_token",
        "> Authorization: SSWS 00EXAMPLExuPkJuDglqqbstUsXUkHEzKJYvaq2oZfg",
        "00EXAMPLExuPkJuDglqqbstUsXUkHEzKJYvaq2oZfg",
    ),
    (
        "databricks_token",
        "DATABRICKS_TOKEN=dapideadbeef3db3a87f0572ff565e367a43",
        "dapideadbeef3db3a87f0572ff565e367a43",
    ),
    (
        "databricks_token",
        "[DEFAULT]\nhost  = https://adb-123.azuredatabricks.net\ntoken = dapideadbeef57313ac90043c1a579ffa8e8-2",
        "dapideadbeef57313ac90043c1a579ffa8e8-2",
    ),
    (
        "grafana_token",
        "GRAFANA_SERVICE_ACCOUNT_TOKEN=glsa_EXAMPLEUwAYQtnzHZb6eLHiz7vYBHai7_a7ac8ae1",
        "glsa_EXAMPLEUwAYQtnzHZb6eLHiz7vYBHai7_a7ac8ae1",
    ),
    (
        "grafana_token",
        "> Authorization: Bearer glc_EXAMPLEmLTb5vgFbiDuO8GWK1dP1qi1AauAWccIUVPN9V96mZFCKdpRjW8iVgzmeYTPmf29g9xVjpb4c==",
        "glc_EXAMPLEmLTb5vgFbiDuO8GWK1dP1qi1AauAWccIUVPN9V96mZFCKdpRjW8iVgzmeYTPmf29g9xVjpb4c==",
    ),
    (
        "pulumi_access_token",
        "PULUMI_ACCESS_TOKEN=pul-deadbeef53e88ab20e30670f225b2f324d54e3fd",
        "pul-deadbeef53e88ab20e30670f225b2f324d54e3fd",
    ),
    (
        "pulumi_access_token",
        "{\"accessToken\": \"pul-deadbeefa718db9e87a5348c42646f6886e7131f\"}",
        "pul-deadbeefa718db9e87a5348c42646f6886e7131f",
    ),
    (
        "supabase_token",
        "SUPABASE_ACCESS_TOKEN=sbp_deadbeef50a1d8894abf3d78dba05f731ffb6c30",
        "sbp_deadbeef50a1d8894abf3d78dba05f731ffb6c30",
    ),
    (
        "supabase_token",
        "supabase login --token sbp_deadbeef209f346a17f5c178cc67cb4c0e3a5f9b",
        "sbp_deadbeef209f346a17f5c178cc67cb4c0e3a5f9b",
    ),
    (
        "age_secret_key",
        "# created: 2024-05-01T10:00:00Z\n# public key: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\nAGE-SECRET-KEY-1HC799TQT0MT4CLQGYQPURWGYNLH642K6MCE5X8Q88HYK7F63KKUDG59Y0F",
        "AGE-SECRET-KEY-1HC799TQT0MT4CLQGYQPURWGYNLH642K6MCE5X8Q88HYK7F63KKUDG59Y0F",
    ),
    (
        "age_secret_key",
        "SOPS_AGE_KEY=AGE-SECRET-KEY-1DJMQK5N976GX3YA8JLYLF09ATPA4HJATA5FYCT3P4H6253HR7JPKMEMYN3",
        "AGE-SECRET-KEY-1DJMQK5N976GX3YA8JLYLF09ATPA4HJATA5FYCT3P4H6253HR7JPKMEMYN3",
    ),
    (
        "jwt",
        "2024-05-01T10:00:00Z DEBUG auth: id_token=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c user=42",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    (
        "jwt",
        "{\"access_token\": \"eyJhbGciOiJSUzI1NiIsImtpZCI6ImV4YW1wbGUifQ.eyJpc3MiOiJodHRwczovL2V4YW1wbGUuY29tIiwiZXhwIjoxNzE0NTYwMDAwfQ.5qqel8kz5xqyVjQyCE0YBf-NteQ1JEYnosRGOTgEKVT5pzYWs3Dz4tS12885o-tZbCkwmZy2GEu4PB-uzepLTw\", \"expires_in\": 3600}",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6ImV4YW1wbGUifQ.eyJpc3MiOiJodHRwczovL2V4YW1wbGUuY29tIiwiZXhwIjoxNzE0NTYwMDAwfQ.5qqel8kz5xqyVjQyCE0YBf-NteQ1JEYnosRGOTgEKVT5pzYWs3Dz4tS12885o-tZbCkwmZy2GEu4PB-uzepLTw",
    ),
    (
        "private_key",
        "$ cat ~/.ssh/id_key\n-----BEGIN RSA PRIVATE KEY-----\nyn0y5XjhBZRs6cpM+Ck5/mITP9m7BMGBLPwDMA+nMAD6Vf9BKIsemvbdg8w0Cpbz\nM/GWAQQMZC/Zy106OuuuxP4lmyJbq1PI61HZTuR3fRzC0+nHzfeJq3cb1bm9xV3M\n97ZtvrsVR0/1cujzxYcnIM6/duCV+OWL7JwJO0pm4VxBQoPaJQveE9Hh53j2vTZF\nKB+Ca/vInMR912hiR/GG7vIJF9TuPVM7HfMWUz/TugITUg8atXTUaIwmyA7jDyLU\nyywyzl9G+N023Z+RWHrdInQ8ZiLzirGEzS8Wef7TSBS/wWK0O7qLJpb32AYBabFI\nWm9PrGrueHre241OVsD4uDG4gRpG0gKO4W33SmO2PGGR1eMgwhtfOvAoOCi4rb5q\nmreZVZm95Z/Gyuzi/YKL==\n-----END RSA PRIVATE KEY-----\n$ ",
        "\nyn0y5XjhBZRs6cpM+Ck5/mITP9m7BMGBLPwDMA+nMAD6Vf9BKIsemvbdg8w0Cpbz\nM/GWAQQMZC/Zy106OuuuxP4lmyJbq1PI61HZTuR3fRzC0+nHzfeJq3cb1bm9xV3M\n97ZtvrsVR0/1cujzxYcnIM6/duCV+OWL7JwJO0pm4VxBQoPaJQveE9Hh53j2vTZF\nKB+Ca/vInMR912hiR/GG7vIJF9TuPVM7HfMWUz/TugITUg8atXTUaIwmyA7jDyLU\nyywyzl9G+N023Z+RWHrdInQ8ZiLzirGEzS8Wef7TSBS/wWK0O7qLJpb32AYBabFI\nWm9PrGrueHre241OVsD4uDG4gRpG0gKO4W33SmO2PGGR1eMgwhtfOvAoOCi4rb5q\nmreZVZm95Z/Gyuzi/YKL==\n",
    ),
    (
        "private_key",
        "$ cat ~/.ssh/id_key\n-----BEGIN OPENSSH PRIVATE KEY-----\nLNyDL260r0yO1q4PkTdsyqzDxC9vEfplug+HVRrmhbZbf6A6ZqYNvWrMBXavXVDr\neuiR+bUXzzyC+PMR0cU2m8Wcn8hWlqrDZeeJhYXXJkQWOcexr7YzvJzuWOfdfprs\n0/2aknSlQA2nt8i34FyLA40OF/HbjiCn14A5G5aqipcLIcKGxPkNQpGcchPIF6US\nvmY/rYoT7A4MjLQhULrSUm3VNrgppw5S0ANgyYyV5Xz84zg+fLT0boSPerH4pRqK\n7fuiKK9GGmJZh3FLvYv/dz7gH1qjz5CI0vVSGoDDiAwtkJEsiFhDccfKe5FF5Zht\nqpqYWtnJBxSmT7CsayEV/kwFp6uyCHseyLqI+/iqUHsj/TuL43bb0lgUP7blM2cB\nJ8Y7kCA+1s6ya0SwS6gY==\n-----END OPENSSH PRIVATE KEY-----\n$ ",
        "\nLNyDL260r0yO1q4PkTdsyqzDxC9vEfplug+HVRrmhbZbf6A6ZqYNvWrMBXavXVDr\neuiR+bUXzzyC+PMR0cU2m8Wcn8hWlqrDZeeJhYXXJkQWOcexr7YzvJzuWOfdfprs\n0/2aknSlQA2nt8i34FyLA40OF/HbjiCn14A5G5aqipcLIcKGxPkNQpGcchPIF6US\nvmY/rYoT7A4MjLQhULrSUm3VNrgppw5S0ANgyYyV5Xz84zg+fLT0boSPerH4pRqK\n7fuiKK9GGmJZh3FLvYv/dz7gH1qjz5CI0vVSGoDDiAwtkJEsiFhDccfKe5FF5Zht\nqpqYWtnJBxSmT7CsayEV/kwFp6uyCHseyLqI+/iqUHsj/TuL43bb0lgUP7blM2cB\nJ8Y7kCA+1s6ya0SwS6gY==\n",
    ),
    (
        "private_key",
        "$ cat ~/.ssh/id_key\n-----BEGIN EC PRIVATE KEY-----\nZkRU8vgYMvzkZPyhvRZRo+oPLbep5Crq9qJxQ9091D3Jl7M3/BdJ3LxLWzvUQQG2\n7MZOVwE30EqbDK6OWVjGo7VTUdIeA8DFmv7vpoajctYMagD1hA+IIvKUB2CWTwoO\nPPHTnguqA43pPIRFLM+8LfwVEG8VDcI4hOlrAKlJZeAShc5D6FlCF1VIoePaGVCn\nQ54EFLKVVlKpScePK1LwCijWPj/TYIXKk6B6P0f04jpX+4yhe9DyHtiMqtd4+W30\nqB9ppkqcDOutO1/Drs6gsAN8b7IFqEsF75Emlh02UvAZKR2SBmqTPjgLaLIGdkpv\nP6OMf7+Xmo2fn1iFVOn3QDutuGOKOIP7vvL5TIrgBk2IETXU7/7KsUPyatRx88Hq\nalkPYF3N0lt2q70qRn7H==\n-----END EC PRIVATE KEY-----\n$ ",
        "\nZkRU8vgYMvzkZPyhvRZRo+oPLbep5Crq9qJxQ9091D3Jl7M3/BdJ3LxLWzvUQQG2\n7MZOVwE30EqbDK6OWVjGo7VTUdIeA8DFmv7vpoajctYMagD1hA+IIvKUB2CWTwoO\nPPHTnguqA43pPIRFLM+8LfwVEG8VDcI4hOlrAKlJZeAShc5D6FlCF1VIoePaGVCn\nQ54EFLKVVlKpScePK1LwCijWPj/TYIXKk6B6P0f04jpX+4yhe9DyHtiMqtd4+W30\nqB9ppkqcDOutO1/Drs6gsAN8b7IFqEsF75Emlh02UvAZKR2SBmqTPjgLaLIGdkpv\nP6OMf7+Xmo2fn1iFVOn3QDutuGOKOIP7vvL5TIrgBk2IETXU7/7KsUPyatRx88Hq\nalkPYF3N0lt2q70qRn7H==\n",
    ),
    (
        "private_key",
        "$ cat ~/.ssh/id_key\n-----BEGIN DSA PRIVATE KEY-----\n8X6f+FOEXTiiaubvOnqkOjP2jpkL9rEDLSaFen8GRmNlQ8iOLqJzkJw0DBAKDBTs\ncuwb0HAqkPuMMMtdVpiFqQmSIyV4R6+ZiYGjf4PYO6ncn80IsCp1jTAWlgb+HU2q\nrlyJkOzYGqvBrkUdoIwgkYpqFw/VWKUiU/RIqrHnWdSOKa9KIUdhTAY6UzH01MnP\nipMcsgQUEwkmCix7Eali2e0IsSMFbFSgbaaZfbtpBry9+GhCAmmqGR9vYocUM8b+\numD0c9wQkqUbpn0myXnOuoIZucfjEiauQ0ngRYhp6HYKf44aXV/UpuakxjteRmE/\nJ31JTFWU+GEFNDoN9rzFpfcsD9XyMxNSBG5JW2VaZUN4SdMFb3sS2bleG5vXK2kC\nWXaZpUxBOY3IVmZKwSQJ==\n-----END DSA PRIVATE KEY-----\n$ ",
        "\n8X6f+FOEXTiiaubvOnqkOjP2jpkL9rEDLSaFen8GRmNlQ8iOLqJzkJw0DBAKDBTs\ncuwb0HAqkPuMMMtdVpiFqQmSIyV4R6+ZiYGjf4PYO6ncn80IsCp1jTAWlgb+HU2q\nrlyJkOzYGqvBrkUdoIwgkYpqFw/VWKUiU/RIqrHnWdSOKa9KIUdhTAY6UzH01MnP\nipMcsgQUEwkmCix7Eali2e0IsSMFbFSgbaaZfbtpBry9+GhCAmmqGR9vYocUM8b+\numD0c9wQkqUbpn0myXnOuoIZucfjEiauQ0ngRYhp6HYKf44aXV/UpuakxjteRmE/\nJ31JTFWU+GEFNDoN9rzFpfcsD9XyMxNSBG5JW2VaZUN4SdMFb3sS2bleG5vXK2kC\nWXaZpUxBOY3IVmZKwSQJ==\n",
    ),
    (
        "private_key",
        "$ cat ~/.ssh/id_key\n-----BEGIN ENCRYPTED PRIVATE KEY-----\nRYCkO3gBpxGuG+rk6PUV3CYKteaXMMxI1jJjW1qUfOU0sUIJ9DrkLcUMriJE1YGm\ne6LZwR7eW0/oPe/2ufLfIgLNB718s76cz10NnSkfkO2rPd9o8msy6r1ScGclgI5k\nqpYIJ5O76DUMhjLMk6rRGaSC3hTHmUaaprV6Ao4xhd+gZbN6f4bk6NBJued4f32I\nG0mHJGohAsymGw7qX094y5ksV2V83Af6ROh/NTukw1NYl/d8abgMrA60GgUcL1lW\nff9Omu3WAv6kArWisOjPKI2sBxggcF/0yqWh0SqGw+N5QODmqnhmt0eTn/AlcC/z\nYs/YaesNr9riXx6eTM3o36oln0Xarztu3DeLYZmccMGUKamLjrTr/8/7eH42anec\nqeX4jXgObVDviS4NkuZ8==\n-----END ENCRYPTED PRIVATE KEY-----\n$ ",
        "\nRYCkO3gBpxGuG+rk6PUV3CYKteaXMMxI1jJjW1qUfOU0sUIJ9DrkLcUMriJE1YGm\ne6LZwR7eW0/oPe/2ufLfIgLNB718s76cz10NnSkfkO2rPd9o8msy6r1ScGclgI5k\nqpYIJ5O76DUMhjLMk6rRGaSC3hTHmUaaprV6Ao4xhd+gZbN6f4bk6NBJued4f32I\nG0mHJGohAsymGw7qX094y5ksV2V83Af6ROh/NTukw1NYl/d8abgMrA60GgUcL1lW\nff9Omu3WAv6kArWisOjPKI2sBxggcF/0yqWh0SqGw+N5QODmqnhmt0eTn/AlcC/z\nYs/YaesNr9riXx6eTM3o36oln0Xarztu3DeLYZmccMGUKamLjrTr/8/7eH42anec\nqeX4jXgObVDviS4NkuZ8==\n",
    ),
    (
        "private_key",
        "$ cat ~/.ssh/id_key\n-----BEGIN PRIVATE KEY-----\ntv93h/jBjPGB1wTmtUcdyqBvvFM6FiYkHJ1q2pd4xRJ4E7hy29rqN66G801aCxaZ\nq96kUL6TiU3VIDHMTdtPuqwN2ZM9Dgo+nHzUfqnRy16d6pgviDn62FiKQZ6jnzpg\nfnDhYcMvbVpN2fUiQXynWd5layO4nMmz5dFKIfUm/+n3zAvXo5dZMYh6HlgBgubH\nkgj3yhWsUOT68TmWtMYDiN/0Oq6AMbO0Y+cct9A9znbJICXi/8yDX2zGpFW8s/NU\nX/EQnF1Kkc6Ld4Wfm1QH1G4UHWdt4kQ3JZfzeRINh3NW/v3Dcii+h5Sb3udl38ox\nF8qIaVpLyKLmJxFBRdAJQFKVsLehiU+AqzzBHhmQlwgJJO+XT0VWkwdyXVwxCuEE\nLkWy4qafdw8WxDCk4uIS==\n-----END PRIVATE KEY-----\n$ ",
        "\ntv93h/jBjPGB1wTmtUcdyqBvvFM6FiYkHJ1q2pd4xRJ4E7hy29rqN66G801aCxaZ\nq96kUL6TiU3VIDHMTdtPuqwN2ZM9Dgo+nHzUfqnRy16d6pgviDn62FiKQZ6jnzpg\nfnDhYcMvbVpN2fUiQXynWd5layO4nMmz5dFKIfUm/+n3zAvXo5dZMYh6HlgBgubH\nkgj3yhWsUOT68TmWtMYDiN/0Oq6AMbO0Y+cct9A9znbJICXi/8yDX2zGpFW8s/NU\nX/EQnF1Kkc6Ld4Wfm1QH1G4UHWdt4kQ3JZfzeRINh3NW/v3Dcii+h5Sb3udl38ox\nF8qIaVpLyKLmJxFBRdAJQFKVsLehiU+AqzzBHhmQlwgJJO+XT0VWkwdyXVwxCuEE\nLkWy4qafdw8WxDCk4uIS==\n",
    ),
    (
        "private_key",
        "key.pem:\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\nr39aEmo/X91FS4BdyE0xqbpAgSLWxFILFawQOek36m7MgJomxLJpwSMNhj29lggv\nle0j0kOMbcU8C0EnvIpwHSVOepV0FXtnkes3EdlmpSh9Ngxe6KLexcvyCQijsBE5\n9nbM9kBoa8BGD6kD2jKtq6YVeYwwcnzu6le5wyBd5uNSknSo6Fh4lY3K4CgQC5gd\nAsvAtW2UqD7y19TkonnHgtOnddMbRRZBVOi54BSV3JrcAWsG02kudZ3y3784Miue\ncPPPT2LqPIv7g3vFSKvwtNP0z9KkYSpxV+LG4vw4IwBTqYAhP/WekSBy13m/YlDO\nmWFhEZohKOlcCrI/s8nNZsfs/7wmdwq5m3gh5j1x+XHBnhuekYqugDF4ZDFDO1xz\nuRw9iLY4Ky5p6KIaH8Du==\n-----END RSA PRIVATE KEY-----\n",
        "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\nr39aEmo/X91FS4BdyE0xqbpAgSLWxFILFawQOek36m7MgJomxLJpwSMNhj29lggv\nle0j0kOMbcU8C0EnvIpwHSVOepV0FXtnkes3EdlmpSh9Ngxe6KLexcvyCQijsBE5\n9nbM9kBoa8BGD6kD2jKtq6YVeYwwcnzu6le5wyBd5uNSknSo6Fh4lY3K4CgQC5gd\nAsvAtW2UqD7y19TkonnHgtOnddMbRRZBVOi54BSV3JrcAWsG02kudZ3y3784Miue\ncPPPT2LqPIv7g3vFSKvwtNP0z9KkYSpxV+LG4vw4IwBTqYAhP/WekSBy13m/YlDO\nmWFhEZohKOlcCrI/s8nNZsfs/7wmdwq5m3gh5j1x+XHBnhuekYqugDF4ZDFDO1xz\nuRw9iLY4Ky5p6KIaH8Du==\n",
    ),
    (
        "private_key",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGYxAAABCACXgfgUCXIaxxipluIzA0yklcfQ3O38C4RXficatkuFA61pt4+p\nDvH5HPhaNqchad+KmFEjul7KZku3mLogtrTz2d994Xm+mCaMfF3GAFwAb9z9VhOy\n0Io+I/tG1v2j5ikAjG6bmVXeuI4ovF287hoXLhc07wFYrE2P8QtbJlaIaPsf2nYz\nMmGUegLRRvdNnqDpDpa+pAJVaN/Oz6cA2s0NSB9KNGVXLIJzj218H7pnR0zpP2is\nXCS+/QNlFilfcv1U4XWq5Wh/neddGhm+PcgThR+e6fG2g/NvdzVkIiG7328KHvnK\nY8Crqk2aoLaGd6AtuZFuTS+EJI2yo/E2I0E8mTMPCfM90JPpgf6LTZuCrA7dEiHl\nja8wEtuQpMXDGIbn5czoILUJkswjZOG1gN1V7GaYSmzyGFG1UGiUfd701fljkmC5\njzEb+/hNC26Cz6KUbRKL==\n-----END PGP PRIVATE KEY BLOCK-----",
        "\n\nlQOYBGYxAAABCACXgfgUCXIaxxipluIzA0yklcfQ3O38C4RXficatkuFA61pt4+p\nDvH5HPhaNqchad+KmFEjul7KZku3mLogtrTz2d994Xm+mCaMfF3GAFwAb9z9VhOy\n0Io+I/tG1v2j5ikAjG6bmVXeuI4ovF287hoXLhc07wFYrE2P8QtbJlaIaPsf2nYz\nMmGUegLRRvdNnqDpDpa+pAJVaN/Oz6cA2s0NSB9KNGVXLIJzj218H7pnR0zpP2is\nXCS+/QNlFilfcv1U4XWq5Wh/neddGhm+PcgThR+e6fG2g/NvdzVkIiG7328KHvnK\nY8Crqk2aoLaGd6AtuZFuTS+EJI2yo/E2I0E8mTMPCfM90JPpgf6LTZuCrA7dEiHl\nja8wEtuQpMXDGIbn5czoILUJkswjZOG1gN1V7GaYSmzyGFG1UGiUfd701fljkmC5\njzEb+/hNC26Cz6KUbRKL==\n",
    ),
    (
        "private_key",
        "2024-05-01 ERROR failed to parse key: -----BEGIN OPENSSH PRIVATE KEY-----\njNuqUBNqKZ3At5dlb6R02fB5lu4jkEs/o/pI1f48TUeczGj2X1E7ZW6b9OjjhDFb\nX0BrM1amCDTb5iGneeMNBTjlWJXo4YAXlkjs0FSs2fsmGnmPFC1G51St/XdEt+xG\nwNr9tpR+xFYxeI6wRud6Ifhn5Rq7zhlzBMCtRd1uERqBWex3i82GomcrFjmUlTuA\nEeaC4vTaOqEB6dClbuPq3uAOvhdU3p3XfQR7yIk/RgU8RihyBISVL7P7SoYw0ViH\nsJX2ogUx+y6WiXHomF7c2JJLWv7F6ur6SNuTdjswVgoupXA4tr/tKWnqrqd9Bvkj\n8/GChGlQtNIqRbm3ZEy6ZyvjW34mqjcXhAJUwLhupxwixdM96QqvSZYlCDcCtglP\n+5551Brk5TfvaxctgJn6==\n",
        "\njNuqUBNqKZ3At5dlb6R02fB5lu4jkEs/o/pI1f48TUeczGj2X1E7ZW6b9OjjhDFb\nX0BrM1amCDTb5iGneeMNBTjlWJXo4YAXlkjs0FSs2fsmGnmPFC1G51St/XdEt+xG\nwNr9tpR+xFYxeI6wRud6Ifhn5Rq7zhlzBMCtRd1uERqBWex3i82GomcrFjmUlTuA\nEeaC4vTaOqEB6dClbuPq3uAOvhdU3p3XfQR7yIk/RgU8RihyBISVL7P7SoYw0ViH\nsJX2ogUx+y6WiXHomF7c2JJLWv7F6ur6SNuTdjswVgoupXA4tr/tKWnqrqd9Bvkj\n8/GChGlQtNIqRbm3ZEy6ZyvjW34mqjcXhAJUwLhupxwixdM96QqvSZYlCDcCtglP\n+5551Brk5TfvaxctgJn6==\n",
    ),
    (
        "url_credentials",
        "DATABASE_URL=postgres://app:S3cr3tP4ss@db.internal:5432/app?sslmode=require",
        "S3cr3tP4ss",
    ),
    (
        "url_credentials",
        "origin\thttps://alice:Wh4tEver-2024@git.example.com/team/repo.git (fetch)",
        "Wh4tEver-2024",
    ),
    (
        "url_credentials",
        "redis.url: redis://:r3disPassw0rd@cache.internal:6379/0",
        "r3disPassw0rd",
    ),
    (
        "url_credentials",
        "INFO connecting to amqp://guest:rabbitPw9%21@mq.internal:5672/vhost",
        "rabbitPw9%21",
    ),
    (
        "http_authorization_header",
        "> GET /api/v1/me HTTP/1.1\n> Host: api.example.com\n> Authorization: Bearer EXAMPLEhjDaVjPOE.B-906_yEtalN-0vdoWfep60\n> Accept: */*",
        "EXAMPLEhjDaVjPOE.B-906_yEtalN-0vdoWfep60",
    ),
    (
        "http_authorization_header",
        "Authorization: Basic YWRtaW46aHVudGVyMi1leGFtcGxl",
        "YWRtaW46aHVudGVyMi1leGFtcGxl",
    ),
    (
        "http_authorization_header",
        "{\"headers\": {\"Authorization\": \"Token EXAMPLELSn9MGDVPdRUmMg6Y8g6t8zMA\", \"Accept\": \"application/json\"}}",
        "EXAMPLELSn9MGDVPdRUmMg6Y8g6t8zMA",
    ),
    (
        "http_cookie",
        "> GET /admin/ HTTP/1.1\n> Host: app.example.com\n> Cookie: sessionid=EXAMPLETB04UYWizbsQ4R9uCm3LWszKa; csrftoken=losvskKgVLEI69cS3qbFwS0edvgezJ8Z\n> User-Agent: curl/8.5.0",
        "sessionid=EXAMPLETB04UYWizbsQ4R9uCm3LWszKa; csrftoken=losvskKgVLEI69cS3qbFwS0edvgezJ8Z",
    ),
    (
        "http_cookie",
        "< HTTP/2 302\n< set-cookie: _session_id=deadbeefd9dca621784fd08f21e2ef75; path=/; secure; HttpOnly; SameSite=Lax\n< location: /dashboard",
        // Only the value is secret: the cookie's attributes stay readable.
        "deadbeefd9dca621784fd08f21e2ef75",
    ),
    (
        "netrc_password",
        "machine ftp.example.com login alice password Pa55w0rd!x",
        "Pa55w0rd!x",
    ),
    (
        "netrc_password",
        "machine api.heroku.com\n  login me@example.com\n  password 4f9c2d71-EXAMPLE-token\n",
        "4f9c2d71-EXAMPLE-token",
    ),
    (
        "pgpass_password",
        "db.example.com:5432:appdb:appuser:S3cretPgPass",
        "S3cretPgPass",
    ),
    (
        "pgpass_password",
        "# ~/.pgpass\nlocalhost:*:*:postgres:pg\\:pass99\n*:5432:reporting:reader:R3ad0nly!",
        "pg\\:pass99",
    ),
    (
        "pgpass_password",
        "localhost:*:*:postgres:pg\\:pass99\n*:5432:reporting:reader:R3ad0nly!",
        "R3ad0nly!",
    ),
    (
        "generic_secret_assignment",
        "DB_PASSWORD=hunter2-EXAMPLE",
        "hunter2-EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "database:\n  host: db\n  password: s3cr3t!Pw\n",
        "s3cr3t!Pw",
    ),
    (
        "generic_secret_assignment",
        "{\"username\": \"svc\", \"password\": \"Tr0ub4dor&3\", \"port\": 5432}",
        "Tr0ub4dor&3",
    ),
    (
        "generic_secret_assignment",
        "[server]\nsecret_key = \"9f8e7d6c5b4a-EXAMPLE\"\n",
        "9f8e7d6c5b4a-EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "export API_TOKEN='tok_EXAMPLE_1234567890'",
        "tok_EXAMPLE_1234567890",
    ),
    (
        "generic_secret_assignment",
        "> X-Api-Key: ak_live_EXAMPLE0123456789",
        "ak_live_EXAMPLE0123456789",
    ),
    (
        "generic_secret_assignment",
        "GET /callback?code=abc&access_token=at_EXAMPLE987654321&state=xyz",
        "at_EXAMPLE987654321",
    ),
    (
        "generic_secret_assignment",
        "  clientSecret: 'cs-EXAMPLE-5f4dcc3b5aa7'",
        "cs-EXAMPLE-5f4dcc3b5aa7",
    ),
    (
        "generic_secret_assignment",
        "passphrase = \"correct horse battery staple\"",
        "correct horse battery staple",
    ),
    (
        "generic_secret_assignment",
        "SECRET_KEY_BASE=deadbeef5ec4e547cf5b5436fae18b2f5657835000b09eca0f7ef4f208477033",
        "deadbeef5ec4e547cf5b5436fae18b2f5657835000b09eca0f7ef4f208477033",
    ),
    (
        "generic_secret_assignment",
        "2024-05-01 12:00:00 DEBUG config loaded: db_pass=Pg-EXAMPLE-77 host=db",
        "Pg-EXAMPLE-77",
    ),
    (
        "generic_secret_assignment",
        "PASSWORD=correcthorsebattery",
        "correcthorsebattery",
    ),
    (
        "generic_secret_assignment",
        "db.password: 9xYz!pq-EXAMPLE",
        "9xYz!pq-EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "  api_key: Ab1cdefgh_EXAMPLE",
        "Ab1cdefgh_EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "auth_token: examplecred:9f8e7d",
        "examplecred:9f8e7d",
    ),
    (
        "generic_secret_assignment",
        "db_password = \"plain words pass phrase\"",
        "plain words pass phrase",
    ),
    (
        "generic_secret_assignment",
        "$mysql_password = 'Sh0rtPw!EXAMPLE';",
        "Sh0rtPw!EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "Password := \"g0-Secret-77\"",
        "g0-Secret-77",
    ),
    (
        "generic_secret_assignment",
        "config.api_key => \"rubyPw123EXAMPLE\"",
        "rubyPw123EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "let password = \"hunter2-EXAMPLE\";",
        "hunter2-EXAMPLE",
    ),
    (
        "generic_secret_assignment",
        "{\"user\": \"bob\", \"password\": \"sunshine\"}",
        "sunshine",
    ),
    (
        "generic_secret_assignment",
        "{\"client_secret\": \"a1b2c3d4e5f6EXAMPLE\"}",
        "a1b2c3d4e5f6EXAMPLE",
    ),
    (
        "mysql_cli_password",
        "mysql -uroot -pS3cretRoot! -h 127.0.0.1 appdb",
        "S3cretRoot!",
    ),
    (
        "mysql_cli_password",
        "mysqldump -u backup -p'Bkp#2024pw' --single-transaction --all-databases > all.sql",
        "Bkp#2024pw",
    ),
    (
        "mysql_cli_password",
        "docker exec -it db mariadb -uroot -pMariaPw123 -e 'show databases'",
        "MariaPw123",
    ),
    (
        "mysql_cli_password",
        "+ mysqladmin -h db -P 3306 -u root -pAdm1nPass ping",
        "Adm1nPass",
    ),
    (
        "cli_password_flag",
        "pg_restore --dbname=app --password=Sup3rSecret! dump.pgdata",
        "Sup3rSecret!",
    ),
    (
        "cli_password_flag",
        "redis-cli -h cache --pass 'Red1sPass!' ping",
        "Red1sPass!",
    ),
    (
        "cli_password_flag",
        "docker login -u ci-bot -p Dock3rPw! registry.example.com",
        "Dock3rPw!",
    ),
    (
        "cli_password_flag",
        "+ helm registry login ghcr.io --username bot --password ghcrPw_2024",
        "ghcrPw_2024",
    ),
];
