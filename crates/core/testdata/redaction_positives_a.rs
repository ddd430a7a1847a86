// Redaction test data, part 1 of the positives.
/// (kind, realistic text containing a secret, the exact secret substring that must vanish)
/// All values are fake (random or marked EXAMPLE/FAKE) but have the real shape.
pub const POSITIVES_A: &[(&str, &str, &str)] = &[
    (
        "aws_access_key_id",
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPLE",
    ),
    (
        "aws_access_key_id",
        "{\"Credentials\": {\"AccessKeyId\": \"ASIAEXAMPLEYTZW7H07N\", \"Expiration\": \"2024-05-01T12:00:00Z\"}}",
        "ASIAEXAMPLEYTZW7H07N",
    ),
    (
        "aws_access_key_id",
        "2024-05-01T10:00:00Z WARN botocore.credentials found credentials in env: AKIAEXAMPLEU9O4OXQBF",
        "AKIAEXAMPLEU9O4OXQBF",
    ),
    (
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "aws_secret_access_key",
        "    \"SecretAccessKey\": \"EXAMPLE9HfBwohrHaZyHOdW7YIIFf/dSbz64tuZV\",",
        "EXAMPLE9HfBwohrHaZyHOdW7YIIFf/dSbz64tuZV",
    ),
    (
        "aws_secret_access_key",
        "export AWS_SECRET_ACCESS_KEY='EXAMPLEpzWyUsiE2mheqDPOHOC3xdK6A79uee81P'",
        "EXAMPLEpzWyUsiE2mheqDPOHOC3xdK6A79uee81P",
    ),
    (
        "aws_secret_access_key",
        "$ aws configure set aws_secret_access_key EXAMPLEX8sfwLp1VKhcKcouY10spRLk5yRoQgqP7 --profile ci",
        "EXAMPLEX8sfwLp1VKhcKcouY10spRLk5yRoQgqP7",
    ),
    (
        "aws_session_token",
        "AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEXAMPLElXGxxnYT7XurCDHVrjw7KqJu/nD+Dox4d1zjZA/2KYLI53lT6VV8m0fkm9zb3S7ylBDAyWvSZlY8ApSUOwhrsAiWs5RSNmHRGQEpyPrpq9RW0Ses2rbC9JPKvtLQv5OPmgTkFMHrhUWBOKzxPeduSqNouQ03N04t4JyNwkWDPcttyvaanh/qN7RM8CdO6+fQKwHa54d/5pnh4PFeqFl9i8DCqjf8==",
        "IQoJb3JpZ2luX2VjEXAMPLElXGxxnYT7XurCDHVrjw7KqJu/nD+Dox4d1zjZA/2KYLI53lT6VV8m0fkm9zb3S7ylBDAyWvSZlY8ApSUOwhrsAiWs5RSNmHRGQEpyPrpq9RW0Ses2rbC9JPKvtLQv5OPmgTkFMHrhUWBOKzxPeduSqNouQ03N04t4JyNwkWDPcttyvaanh/qN7RM8CdO6+fQKwHa54d/5pnh4PFeqFl9i8DCqjf8==",
    ),
    (
        "aws_session_token",
        "        \"SessionToken\": \"FwoGZXIvYXdzEXAMPLEmJWaqWPLBI/eV3jF2KzWH4uFklqzDiTnBdFbsT3lr9zfBL0c866LVcghIZZ5v2bM+dZXcrHNCsBlVIowgbXfgRNYZdER/BzXmH5/s8D9MNXBYC6ughFP/Ta7texmkfh6Pae+KrTECMH545CP+qO5OUZiAUJGtPk+duF4KD2C9yviPJAgmx4m\",",
        "FwoGZXIvYXdzEXAMPLEmJWaqWPLBI/eV3jF2KzWH4uFklqzDiTnBdFbsT3lr9zfBL0c866LVcghIZZ5v2bM+dZXcrHNCsBlVIowgbXfgRNYZdER/BzXmH5/s8D9MNXBYC6ughFP/Ta7texmkfh6Pae+KrTECMH545CP+qO5OUZiAUJGtPk+duF4KD2C9yviPJAgmx4m",
    ),
    (
        "gcp_service_account_private_key",
        "{\n  \"type\": \"service_account\",\n  \"project_id\": \"demo-project-123\",\n  \"private_key_id\": \"db669f78f571d164ba77947d69ba24e7e036606c\",\n  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC0eKFbszkYfqfP75PLCojQ7y29pXXVJAZ\\nYhokjebd/QmiEVFTAhkDuusMayhF35wGI8rlLwkNTju+CocsO9tdEm9B93Xbin478BVK4HgCVhI/i97Z5/VhJW7N\\n-----END PRIVATE KEY-----\\n\",\n  \"client_email\": \"ci@demo-project-123.iam.gserviceaccount.com\"\n}",
        "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC0eKFbszkYfqfP75PLCojQ7y29pXXVJAZ\\nYhokjebd/QmiEVFTAhkDuusMayhF35wGI8rlLwkNTju+CocsO9tdEm9B93Xbin478BVK4HgCVhI/i97Z5/VhJW7N\\n-----END PRIVATE KEY-----\\n",
    ),
    (
        "gcp_service_account_private_key",
        "DEBUG loaded credentials {\"type\":\"service_account\",\"private_key\":\"-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASCB6Nx3pz8xgQSg/vaf4vX49CgvrtG1oN/0du0BlltlsMbqlij/NNtyecPXFhjY0H16RXaHLa5Kq9Qo3b7h5lEMn/4xg4/5+erPJs5\\n-----END PRIVATE KEY-----\\n\",\"client_id\":\"1234567890\"}",
        "-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASCB6Nx3pz8xgQSg/vaf4vX49CgvrtG1oN/0du0BlltlsMbqlij/NNtyecPXFhjY0H16RXaHLa5Kq9Qo3b7h5lEMn/4xg4/5+erPJs5\\n-----END PRIVATE KEY-----\\n",
    ),
    (
        "gcp_api_key",
        "GOOGLE_API_KEY=AIzaEXAMPLEoBAt-_dpZEOz46ctKUBSkvjiCHoP",
        "AIzaEXAMPLEoBAt-_dpZEOz46ctKUBSkvjiCHoP",
    ),
    (
        "gcp_api_key",
        "> GET /maps/api/geocode/json?address=Berlin&key=AIzaEXAMPLEf1y0cXyh805LH0A5S3nbVhDJ5gaP HTTP/1.1",
        "AIzaEXAMPLEf1y0cXyh805LH0A5S3nbVhDJ5gaP",
    ),
    (
        "azure_storage_account_key",
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=demostore;AccountKey=EXAMPLEzNOH+/y46hfLHFU9Q+PfR/QTl//rMXFVj5Cx4t3eGfo0xbr8F1MLisvuRtrmDawFrHnbYu2xPkQ6v3H==;EndpointSuffix=core.windows.net",
        "EXAMPLEzNOH+/y46hfLHFU9Q+PfR/QTl//rMXFVj5Cx4t3eGfo0xbr8F1MLisvuRtrmDawFrHnbYu2xPkQ6v3H==",
    ),
    (
        "azure_storage_account_key",
        "AZURE_STORAGE_KEY=\"EXAMPLEG49yUYpSHuJ1cj0VUnHmDNW5GaiHHMANXrJIJxcfz4U3LFVFeWl2O7ZD+Khwxuz+xYrjKs3dK88XjS2==\"",
        "EXAMPLEG49yUYpSHuJ1cj0VUnHmDNW5GaiHHMANXrJIJxcfz4U3LFVFeWl2O7ZD+Khwxuz+xYrjKs3dK88XjS2==",
    ),
    (
        "azure_sas_token",
        "curl -v 'https://demostore.blob.core.windows.net/backups/db.tar.gz?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-12-31T23:59:59Z&spr=https&sig=EXAMPLE6FrDFRkX5AQsGozD2XSY2GSOQWDjdSsV9%2BgXn%3D'",
        "EXAMPLE6FrDFRkX5AQsGozD2XSY2GSOQWDjdSsV9%2BgXn%3D",
    ),
    (
        "azure_sas_token",
        "BlobEndpoint=https://demostore.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=bfqt&srt=sco&sp=rwdlacup&se=2025-01-01T00:00:00Z&sig=EXAMPLEbFpkGeUQhB9nHW5SJnDAaL9X0W6KEGuPL1HX%3D",
        "EXAMPLEbFpkGeUQhB9nHW5SJnDAaL9X0W6KEGuPL1HX%3D",
    ),
    (
        "azure_shared_access_key",
        "Endpoint=sb://demo-bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=EXAMPLER20Il6EIifIuWXps+XISv5jTXboheF1jSaqV=",
        "EXAMPLER20Il6EIifIuWXps+XISv5jTXboheF1jSaqV=",
    ),
    (
        "azure_shared_access_key",
        "  \"EventHubConnection\": \"Endpoint=sb://demo-hub.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=EXAMPLE+fxXOygIReiN+a1rLg87TKHD/su03vHaPyNP=;EntityPath=events\"",
        "EXAMPLE+fxXOygIReiN+a1rLg87TKHD/su03vHaPyNP=",
    ),
    (
        "azure_ad_client_secret",
        "AZURE_CLIENT_SECRET=Xk98Q~EXAMPLEL5naSQzUSUlH6g-VRS5xlAiMpV1",
        "Xk98Q~EXAMPLEL5naSQzUSUlH6g-VRS5xlAiMpV1",
    ),
    (
        "azure_ad_client_secret",
        "  \"clientSecret\": \"aB37Q~EXAMPLEhyAFtGDViVzZwRrzHUVaJ1csvrV\",",
        "aB37Q~EXAMPLEhyAFtGDViVzZwRrzHUVaJ1csvrV",
    ),
    (
        "github_pat",
        "origin\thttps://x-access-token:ghp_EXAMPLEAJ8vIM3BM9gAjtVsOikXh0eSHadz8@github.com/acme/app.git (fetch)",
        "ghp_EXAMPLEAJ8vIM3BM9gAjtVsOikXh0eSHadz8",
    ),
    (
        "github_pat",
        "> Authorization: token ghp_EXAMPLEYI2DtDPgyeLywQDQz5gIMOtzNdy2X",
        "ghp_EXAMPLEYI2DtDPgyeLywQDQz5gIMOtzNdy2X",
    ),
    (
        "github_pat",
        "GH_TOKEN=ghp_EXAMPLEBTq1qct0xEpfIggTn5mYQUe4KtCqL",
        "ghp_EXAMPLEBTq1qct0xEpfIggTn5mYQUe4KtCqL",
    ),
    (
        "github_fine_grained_pat",
        "GITHUB_TOKEN=github_pat_EXAMPLEpFyMcjaTNlfeNGQ_Ie7aBdwRjLueNhtKnwp0PTfZCekd36BQ37Iyhx279YoAv43bFtYnVQIx2EV",
        "github_pat_EXAMPLEpFyMcjaTNlfeNGQ_Ie7aBdwRjLueNhtKnwp0PTfZCekd36BQ37Iyhx279YoAv43bFtYnVQIx2EV",
    ),
    (
        "github_fine_grained_pat",
        "origin  https://oauth2:github_pat_EXAMPLEGvqq3WuoU5h0hqC_FTiAnTYGYCVOn7DQqAiNZ4YPjPhbSBe2pYxy2viMSG2RIMd3jGANOOrWQ0L@github.com/acme/infra.git (push)",
        "github_pat_EXAMPLEGvqq3WuoU5h0hqC_FTiAnTYGYCVOn7DQqAiNZ4YPjPhbSBe2pYxy2viMSG2RIMd3jGANOOrWQ0L",
    ),
    (
        "github_oauth_token",
        "github.com:\n    user: octocat\n    oauth_token: gho_EXAMPLEmOJXcztrrBWaAd5rpCRbgHhofbrUi\n    git_protocol: https",
        "gho_EXAMPLEmOJXcztrrBWaAd5rpCRbgHhofbrUi",
    ),
    (
        "github_oauth_token",
        "{\"access_token\":\"gho_EXAMPLEgjkQAWPcc0pNjZrvYOJp7svzNs2Zw\",\"token_type\":\"bearer\",\"scope\":\"repo\"}",
        "gho_EXAMPLEgjkQAWPcc0pNjZrvYOJp7svzNs2Zw",
    ),
    (
        "github_user_to_server_token",
        "{\"access_token\": \"ghu_EXAMPLE066fFmFjCNQZctnj7kmq7vdRxcXAU\", \"expires_in\": 28800}",
        "ghu_EXAMPLE066fFmFjCNQZctnj7kmq7vdRxcXAU",
    ),
    (
        "github_user_to_server_token",
        "INFO app: exchanged code for user token ghu_EXAMPLEdAh5ffq8j61DH8ycSDBEZvk5RntKA",
        "ghu_EXAMPLEdAh5ffq8j61DH8ycSDBEZvk5RntKA",
    ),
    (
        "github_server_to_server_token",
        "origin\thttps://x-access-token:ghs_EXAMPLEfBKIT3ftVemOxEv966OUFa4UnGfyS@github.com/acme/app.git (fetch)",
        "ghs_EXAMPLEfBKIT3ftVemOxEv966OUFa4UnGfyS",
    ),
    (
        "github_server_to_server_token",
        "{\"token\": \"ghs_EXAMPLEAwlz8a9kLV38FoWHT2V4xV3ftlFcQ\", \"expires_at\": \"2024-05-01T13:00:00Z\"}",
        "ghs_EXAMPLEAwlz8a9kLV38FoWHT2V4xV3ftlFcQ",
    ),
    (
        "github_refresh_token",
        "{\"refresh_token\": \"ghr_EXAMPLE5uhjdtMjhuxuFLzCzMfTj59mkoMwL\", \"refresh_token_expires_in\": 15811200}",
        "ghr_EXAMPLE5uhjdtMjhuxuFLzCzMfTj59mkoMwL",
    ),
    (
        "github_refresh_token",
        "GITHUB_REFRESH_TOKEN=ghr_EXAMPLEnkH9PFEqQw84f1JxFqCByNMGkBRUE",
        "ghr_EXAMPLEnkH9PFEqQw84f1JxFqCByNMGkBRUE",
    ),
    (
        "gitlab_pat",
        "origin  https://oauth2:glpat-EXAMPLEgtuc2eLv5dVSZ@gitlab.com/group/project.git (fetch)",
        "glpat-EXAMPLEgtuc2eLv5dVSZ",
    ),
    (
        "gitlab_pat",
        "> PRIVATE-TOKEN: glpat-EXAMPLEfCYcyu5izWMLf",
        "glpat-EXAMPLEfCYcyu5izWMLf",
    ),
    (
        "gitlab_pat",
        "GITLAB_TOKEN=glpat-EXAMPLEzJndNZgSEFE-dZcSx-e0Cy-mn3iRl.vfonmvhvy",
        "glpat-EXAMPLEzJndNZgSEFE-dZcSx-e0Cy-mn3iRl.vfonmvhvy",
    ),
    (
        "gitlab_runner_token",
        "[[runners]]\n  name = \"docker-runner\"\n  url = \"https://gitlab.com\"\n  token = \"glrt-EXAMPLE_PKuUdbgMI48v\"",
        "glrt-EXAMPLE_PKuUdbgMI48v",
    ),
    (
        "gitlab_runner_token",
        "gitlab-runner register --non-interactive --url https://gitlab.com/ --registration-token \"GR1348941EXAMPLEkVQH6o0fftzR1\" --executor docker",
        "GR1348941EXAMPLEkVQH6o0fftzR1",
    ),
    (
        "gitlab_runner_token",
        "RUNNER_TOKEN=glrt-t1_EXAMPLEfo_uLE4F_UaAxfbe2LpA.mmx3e98zq",
        "glrt-t1_EXAMPLEfo_uLE4F_UaAxfbe2LpA.mmx3e98zq",
    ),
    (
        "gitlab_deploy_token",
        "docker login -u gitlab+deploy-token-42 registry.gitlab.com --password-stdin <<< gldt-EXAMPLEvoXZcRaAxPtB0",
        "gldt-EXAMPLEvoXZcRaAxPtB0",
    ),
    (
        "gitlab_deploy_token",
        "CI_DEPLOY_PASSWORD=gldt-EXAMPLEjTztG7B78Luzd",
        "gldt-EXAMPLEjTztG7B78Luzd",
    ),
    (
        "gitlab_ci_build_token",
        "CI_JOB_TOKEN=glcbt-64_EXAMPLEIi07BCIWd_iWc",
        "glcbt-64_EXAMPLEIi07BCIWd_iWc",
    ),
    (
        "gitlab_ci_build_token",
        "origin  https://gitlab-ci-token:glcbt-1a2_EXAMPLEAz4u9-xuePe5G@gitlab.example.com/grp/app.git (fetch)",
        "glcbt-1a2_EXAMPLEAz4u9-xuePe5G",
    ),
    (
        "gitlab_pipeline_trigger_token",
        "curl -X POST --fail -F token=glptt-deadbeefced0514a2d02cc7599a2a9302f8edf54 -F ref=main https://gitlab.example.com/api/v4/projects/7/trigger/pipeline",
        "glptt-deadbeefced0514a2d02cc7599a2a9302f8edf54",
    ),
    (
        "gitlab_pipeline_trigger_token",
        "TRIGGER_TOKEN=glptt-deadbeef5707d9877d856ea17ab6986296cb457b",
        "glptt-deadbeef5707d9877d856ea17ab6986296cb457b",
    ),
    (
        "gitlab_other_token",
        "https://gitlab.example.com/dashboard/issues.atom?feed_token=glft-EXAMPLExXdlMAP72rKzl",
        "glft-EXAMPLExXdlMAP72rKzl",
    ),
    (
        "gitlab_other_token",
        "GITLAB_OAUTH_SECRET=gloas-EXAMPLEVmk2bHhLatRY3QeXfk9bi0xGJjZLs2Rh-mEt47n-E1uVnw2XSBWDNkTBG",
        "gloas-EXAMPLEVmk2bHhLatRY3QeXfk9bi0xGJjZLs2Rh-mEt47n-E1uVnw2XSBWDNkTBG",
    ),
    (
        "bitbucket_app_password",
        "origin\thttps://jdoe:ATBBEXAMPLE1Q7BI3CGJXEceN49Ng3hxkEwh@bitbucket.org/team/repo.git (fetch)",
        "ATBBEXAMPLE1Q7BI3CGJXEceN49Ng3hxkEwh",
    ),
    (
        "bitbucket_app_password",
        "BITBUCKET_APP_PASSWORD=ATBBEXAMPLEbcFv7TsXy8gK3NdjDFqctXDmv",
        "ATBBEXAMPLEbcFv7TsXy8gK3NdjDFqctXDmv",
    ),
    (
        "circleci_token",
        "> Circle-Token: CCIPAT_EXAMPLEcHoetJdJYDyp4uC_008822d29e7cb93641b7cf832a46b45c3d3a74b4",
        "CCIPAT_EXAMPLEcHoetJdJYDyp4uC_008822d29e7cb93641b7cf832a46b45c3d3a74b4",
    ),
    (
        "circleci_token",
        "CIRCLE_TOKEN=deadbeeffdc3ae89398ff99fa26e5f61819d7eab",
        "deadbeeffdc3ae89398ff99fa26e5f61819d7eab",
    ),
    (
        "circleci_token",
        "circleci_api_token: \"deadbeef6efcecfb6d1327d3913a280e1b8e0fd9\"",
        "deadbeef6efcecfb6d1327d3913a280e1b8e0fd9",
    ),
    (
        "travis_ci_token",
        "TRAVIS_API_TOKEN=EXAMPLEDm3Op90Y61s3txC",
        "EXAMPLEDm3Op90Y61s3txC",
    ),
    (
        "travis_ci_token",
        "travis_token: \"EXAMPLECpBlJINDhcdcfnm\"",
        "EXAMPLECpBlJINDhcdcfnm",
    ),
    (
        "slack_bot_token",
        "SLACK_BOT_TOKEN=xoxb-19097439322-1759627905159-EXAMPLE2AgA4ZswagPPh1S1R",
        "xoxb-19097439322-1759627905159-EXAMPLE2AgA4ZswagPPh1S1R",
    ),
    (
        "slack_bot_token",
        "> Authorization: Bearer xoxb-401699657953-5705114836094-EXAMPLExhBiqbdVDxmE8QxOt",
        "xoxb-401699657953-5705114836094-EXAMPLExhBiqbdVDxmE8QxOt",
    ),
    (
        "slack_user_token",
        "slack:\n  user_token: \"xoxp-11370870402-377563206027-5560553557607-deadbeef1b73c45c4d4ec7249b69e9c2\"",
        "xoxp-11370870402-377563206027-5560553557607-deadbeef1b73c45c4d4ec7249b69e9c2",
    ),
    (
        "slack_user_token",
        "2024-05-01 12:00:01 INFO slack.client using token xoxp-0272552155-54705503751-1819507490433-deadbeef5e4f9e7737332ecd524ac9f4",
        "xoxp-0272552155-54705503751-1819507490433-deadbeef5e4f9e7737332ecd524ac9f4",
    ),
    (
        "slack_app_token",
        "SLACK_APP_TOKEN=xapp-1-ALFUG0ONWS2-0156357146982-deadbeef84f7be9f0fb5a591edff035444876ea36f349990ffe3e09b902e82a0",
        "xapp-1-ALFUG0ONWS2-0156357146982-deadbeef84f7be9f0fb5a591edff035444876ea36f349990ffe3e09b902e82a0",
    ),
    (
        "slack_app_token",
        "{\"app_token\": \"xapp-1-AERFDZ3UCTL-5286571769716-deadbeef328393c96d20684ae6ef1cd01bb6fadf02f28c07efafdb233356131b\"}",
        "xapp-1-AERFDZ3UCTL-5286571769716-deadbeef328393c96d20684ae6ef1cd01bb6fadf02f28c07efafdb233356131b",
    ),
    (
        "slack_legacy_token",
        "SLACK_LEGACY_TOKEN=xoxa-2-487388816545-EXAMPLE8fdrNNOMO90DhHtkNkmlbbi1U",
        "xoxa-2-487388816545-EXAMPLE8fdrNNOMO90DhHtkNkmlbbi1U",
    ),
    (
        "slack_legacy_token",
        "curl -s 'https://slack.com/api/auth.test?token=xoxs-5110942311-045836585967-739193382313-deadbeefbf20ff56cfadaf92501aa22d006b1a02da343844d64055aaf102d1f8'",
        "xoxs-5110942311-045836585967-739193382313-deadbeefbf20ff56cfadaf92501aa22d006b1a02da343844d64055aaf102d1f8",
    ),
    (
        "slack_config_token",
        "SLACK_CONFIG_TOKEN=xoxe.xoxp-1-EXAMPLE4foDMaXIIPFQrMuTv5ty0TmWaVEYHBOK9ojG60OSYq1HWocnPqum6uu5rxpBkmNRtbzCdEDbbGevPoPwD2VbLpKmcPJrkpshKCmBJ9ddOtC0mzwsYaD3PcZ0JeLkGlFp28rM2KF3MTu0R5SdH39vtKS4odIfdys",
        "xoxe.xoxp-1-EXAMPLE4foDMaXIIPFQrMuTv5ty0TmWaVEYHBOK9ojG60OSYq1HWocnPqum6uu5rxpBkmNRtbzCdEDbbGevPoPwD2VbLpKmcPJrkpshKCmBJ9ddOtC0mzwsYaD3PcZ0JeLkGlFp28rM2KF3MTu0R5SdH39vtKS4odIfdys",
    ),
    (
        "slack_config_token",
        "{\"ok\": true, \"refresh_token\": \"xoxe-1-EXAMPLEQbUUgVEBjKLu1ldw4zZ75av6RksyMep6atJ1l8E4FaGC6NDMYPO8DAwDCeeWa1fM4qFbh6sXx97kVqdLzA0PIQvudJZ5xAalmXI2psAwlNZE9joAEfpxLhLoyIAsYF9VjAEv2yzj2AP\"}",
        "xoxe-1-EXAMPLEQbUUgVEBjKLu1ldw4zZ75av6RksyMep6atJ1l8E4FaGC6NDMYPO8DAwDCeeWa1fM4qFbh6sXx97kVqdLzA0PIQvudJZ5xAalmXI2psAwlNZE9joAEfpxLhLoyIAsYF9VjAEv2yzj2AP",
    ),
    (
        "slack_webhook_url",
        "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T0EXAMPLE/B0EXAMPLE/EXAMPLEO6y60GME3Y7jXF9zB",
        "https://hooks.slack.com/services/T0EXAMPLE/B0EXAMPLE/EXAMPLEO6y60GME3Y7jXF9zB",
    ),
    (
        "slack_webhook_url",
        "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deploy ok\"}' https://hooks.slack.com/services/T0FAKE123/B0FAKE456/EXAMPLEQmcBZwmG0Z0MQ2Drq",
        "https://hooks.slack.com/services/T0FAKE123/B0FAKE456/EXAMPLEQmcBZwmG0Z0MQ2Drq",
    ),
    (
        "discord_bot_token",
        "DISCORD_BOT_TOKEN=MEXAMPLEHKKerr2D3zwnDiNL.VlVTjn.xN1Jqb4xAw0P3WqgCbe4zhldwbq",
        "MEXAMPLEHKKerr2D3zwnDiNL.VlVTjn.xN1Jqb4xAw0P3WqgCbe4zhldwbq",
    ),
    (
        "discord_bot_token",
        "bot.run(\"NEXAMPLEVXOoXKVIL6yiC5QEtL.IiiBNG.ZvjyxcfQGgTQtRw3OY0qsgdfdAtNhLsNbsBb4u\")",
        "NEXAMPLEVXOoXKVIL6yiC5QEtL.IiiBNG.ZvjyxcfQGgTQtRw3OY0qsgdfdAtNhLsNbsBb4u",
    ),
    (
        "discord_webhook_url",
        "DISCORD_WEBHOOK=https://discord.com/api/webhooks/123456789012345678/EXAMPLEJ4qqsJNiULTAPqM2-_yxxwh4qyfHQZiRPCghbDQYS2cDI1TDECxlfjnzWiNws",
        "EXAMPLEJ4qqsJNiULTAPqM2-_yxxwh4qyfHQZiRPCghbDQYS2cDI1TDECxlfjnzWiNws",
    ),
    (
        "discord_webhook_url",
        "POST https://discordapp.com/api/webhooks/987654321098765432/EXAMPLEbWp4nMp3QlrT5Y7uTazSgGwcaYgOw3EoumPO_SCnrrJQDWwsDD2W9rnOeGxBr -> 204",
        "EXAMPLEbWp4nMp3QlrT5Y7uTazSgGwcaYgOw3EoumPO_SCnrrJQDWwsDD2W9rnOeGxBr",
    ),
    (
        "telegram_bot_token",
        "TELEGRAM_BOT_TOKEN=123456789:AAEXAMPLE8P8eALwEQR4m3tYMnyqZDAm51J",
        "123456789:AAEXAMPLE8P8eALwEQR4m3tYMnyqZDAm51J",
    ),
    (
        "telegram_bot_token",
        "curl -s https://api.telegram.org/bot5987654321:AAEXAMPLEySey8DCeRQMJLR2H5bcetZejag/getMe",
        "5987654321:AAEXAMPLEySey8DCeRQMJLR2H5bcetZejag",
    ),
    (
        "stripe_secret_key",
        "STRIPE_SECRET_KEY=sk_live_EXAMPLEI4r329EJcGte2Vm3j",
        "sk_live_EXAMPLEI4r329EJcGte2Vm3j",
    ),
    (
        "stripe_secret_key",
        "curl https://api.stripe.com/v1/charges -u sk_test_EXAMPLEKTo0HvrgbiVLv2stfwAjNdaenhzLyENqsLzaKPdfexFoA0UY0cMHu8DcNQ53PJtAgCiizYhxvnUHEXQdzKCgYOQinlyK:",
        "sk_test_EXAMPLEKTo0HvrgbiVLv2stfwAjNdaenhzLyENqsLzaKPdfexFoA0UY0cMHu8DcNQ53PJtAgCiizYhxvnUHEXQdzKCgYOQinlyK",
    ),
    (
        "stripe_restricted_key",
        "stripe:\n  restricted_key: \"rk_live_EXAMPLEzofcfNaiUh09WpfVI\"",
        "rk_live_EXAMPLEzofcfNaiUh09WpfVI",
    ),
    (
        "stripe_restricted_key",
        "> Authorization: Bearer rk_test_EXAMPLEdHaFh6E6yVIysM4fYSrR8WJHaKubNYCoqWTTkN3OBMx1Gugmm6HHTvkbGRyjKVHB8u0TkbbOSuHUr0ak2TuUTHVZyuji",
        "rk_test_EXAMPLEdHaFh6E6yVIysM4fYSrR8WJHaKubNYCoqWTTkN3OBMx1Gugmm6HHTvkbGRyjKVHB8u0TkbbOSuHUr0ak2TuUTHVZyuji",
    ),
    (
        "stripe_publishable_live_key",
        "NEXT_PUBLIC_STRIPE_KEY=pk_live_EXAMPLEVAhsL1tDqQmNOsOQq",
        "pk_live_EXAMPLEVAhsL1tDqQmNOsOQq",
    ),
    (
        "stripe_publishable_live_key",
        "{\"publishableKey\": \"pk_live_EXAMPLEUVpLYS4ZKdkm478ILVQ5jIwgr8HsILBesV1f9UZnll645a8kQK1PpUqzSUb74GehFeDKKPZ9C8f5uojPxxzxAJtNQUTW\"}",
        "pk_live_EXAMPLEUVpLYS4ZKdkm478ILVQ5jIwgr8HsILBesV1f9UZnll645a8kQK1PpUqzSUb74GehFeDKKPZ9C8f5uojPxxzxAJtNQUTW",
    ),
    (
        "stripe_webhook_secret",
        "STRIPE_WEBHOOK_SECRET=whsec_EXAMPLEhKAWGLBC8ce9YZRLUVLbqrT74",
        "whsec_EXAMPLEhKAWGLBC8ce9YZRLUVLbqrT74",
    ),
    (
        "stripe_webhook_secret",
        "Ready! Your webhook signing secret is whsec_EXAMPLE8FwJBfiEcP0J8NTBqEy8yynXf (^C to quit)",
        "whsec_EXAMPLE8FwJBfiEcP0J8NTBqEy8yynXf",
    ),
    (
        "square_access_token",
        "SQUARE_ACCESS_TOKEN=sq0atp-EXAMPLE43jpS2zXKDTkrIN",
        "sq0atp-EXAMPLE43jpS2zXKDTkrIN",
    ),
    (
        "square_access_token",
        "> Authorization: Bearer EAAAEXAMPLEU-CU8sD4nRx0jd-aAK-Jlqk26FYgFYXCm7D_BjWEmNPuqYNQUUQH7",
        "EAAAEXAMPLEU-CU8sD4nRx0jd-aAK-Jlqk26FYgFYXCm7D_BjWEmNPuqYNQUUQH7",
    ),
    (
        "square_oauth_secret",
        "SQUARE_APPLICATION_SECRET=sq0csp-EXAMPLE8ha2NO_wPOGMFMIdQPjwoHkma1jA-WnLfpFZ",
        "sq0csp-EXAMPLE8ha2NO_wPOGMFMIdQPjwoHkma1jA-WnLfpFZ",
    ),
    (
        "square_oauth_secret",
        "{\"client_secret\": \"sq0csp-EXAMPLE5Yq3PIyMr6IDB8nPIW-KAxboRZV20S7SC-sm\"}",
        "sq0csp-EXAMPLE5Yq3PIyMr6IDB8nPIW-KAxboRZV20S7SC-sm",
    ),
    (
        "braintree_access_token",
        "BRAINTREE_ACCESS_TOKEN=access_token$production$examplehof8vj4uu$a2b72d8e61d13ce3a62969a88ad345b4",
        "access_token$production$examplehof8vj4uu$a2b72d8e61d13ce3a62969a88ad345b4",
    ),
    (
        "braintree_access_token",
        "gateway = braintree.BraintreeGateway(access_token=\"access_token$sandbox$example5g6fs22ks$0f0e5dfe3462801ef3d52a06dc2cc9da\")",
        "access_token$sandbox$example5g6fs22ks$0f0e5dfe3462801ef3d52a06dc2cc9da",
    ),
    (
        "paypal_client_secret",
        "PAYPAL_CLIENT_SECRET=EEXAMPLEla3yD8L9xUOA2od-Tcw7gCp6z6Yv5Ybp32OUOBhGFdAPTMvJYsaHiXpgS5bBaBfQSNey2PX2",
        "EEXAMPLEla3yD8L9xUOA2od-Tcw7gCp6z6Yv5Ybp32OUOBhGFdAPTMvJYsaHiXpgS5bBaBfQSNey2PX2",
    ),
    (
        "paypal_client_secret",
        "paypal_secret: \"EEXAMPLEax1gouNxfb0t67lG8OzacrlSN5crOYe7Jm-yRZI2hIlVBYrWHL1hsGfEiIEiNtLIf9kIRYUG\"",
        "EEXAMPLEax1gouNxfb0t67lG8OzacrlSN5crOYe7Jm-yRZI2hIlVBYrWHL1hsGfEiIEiNtLIf9kIRYUG",
    ),
    (
        "paypal_access_token",
        "> Authorization: Bearer A21AAEXAMPLEgxRE1Yvn0gjt0M_lGo5sPRMQ_crjuX6MlCJ_lRY2kEsUEjEM4J3EvDQH-JhzYE8q_Kocj_U9f3Cfl4y7Aq5st",
        "A21AAEXAMPLEgxRE1Yvn0gjt0M_lGo5sPRMQ_crjuX6MlCJ_lRY2kEsUEjEM4J3EvDQH-JhzYE8q_Kocj_U9f3Cfl4y7Aq5st",
    ),
    (
        "paypal_access_token",
        "{\"scope\":\"https://uri.paypal.com/services/invoicing\",\"access_token\":\"A21AAEXAMPLEhRqW34rQRE-Cva5z3TsYasM4_cUL0eaxrpRzuGmDxNW8nufl2fKUUhupOy1UbrKYfjEW766e07Df5ZrZl9oy1\",\"token_type\":\"Bearer\"}",
        "A21AAEXAMPLEhRqW34rQRE-Cva5z3TsYasM4_cUL0eaxrpRzuGmDxNW8nufl2fKUUhupOy1UbrKYfjEW766e07Df5ZrZl9oy1",
    ),
    (
        "openai_api_key",
        "OPENAI_API_KEY=sk-proj-EXAMPLEYivlNMGPGzCzzaIoSsqKuI3TB9GrrDCgjW52VEOZe6ZJu9GllCpoP9JKFciFk0Hqd7hT3BlbkFJ7Mal_WoTsR7gJxHIfmvLXbkwhibNbEXV8gMXoYn3UPR8XYU7W5jknhmKvfAuNq5hMaI85G-eRv",
        "sk-proj-EXAMPLEYivlNMGPGzCzzaIoSsqKuI3TB9GrrDCgjW52VEOZe6ZJu9GllCpoP9JKFciFk0Hqd7hT3BlbkFJ7Mal_WoTsR7gJxHIfmvLXbkwhibNbEXV8gMXoYn3UPR8XYU7W5jknhmKvfAuNq5hMaI85G-eRv",
    ),
    (
        "openai_api_key",
        "> Authorization: Bearer sk-EXAMPLEDBl70umFcQfveT3BlbkFJYfAaizVDnu9Z23InrqSH",
        "sk-EXAMPLEDBl70umFcQfveT3BlbkFJYfAaizVDnu9Z23InrqSH",
    ),
    (
        "openai_api_key",
        "openai.api_key = 'sk-EXAMPLECZr4VgCCgSZ6QxNWQfmpLpmsclY5tNFlUtSaTVQUD'",
        "sk-EXAMPLECZr4VgCCgSZ6QxNWQfmpLpmsclY5tNFlUtSaTVQUD",
    ),
    (
        "anthropic_api_key",
        "ANTHROPIC_API_KEY=sk-ant-api03-EXAMPLE3WFKnHu8fvBajy6vYtB88l6vJm5NAF7mHHFsX538DJXvxTH9Gbg-KJ0hqqq14W9JDZLTLPzSvcru3N1xcQwcepAA",
        "sk-ant-api03-EXAMPLE3WFKnHu8fvBajy6vYtB88l6vJm5NAF7mHHFsX538DJXvxTH9Gbg-KJ0hqqq14W9JDZLTLPzSvcru3N1xcQwcepAA",
    ),
    (
        "anthropic_api_key",
        "> x-api-key: sk-ant-api03-EXAMPLE3B6Bima3UlXtfoVUjp2d-RTnjKoJXRUsCfNthTQd8qHzD28p49bKp0LrGXsZmvW2JmrG6TBbQHBDrWwYyXiYFDAA",
        "sk-ant-api03-EXAMPLE3B6Bima3UlXtfoVUjp2d-RTnjKoJXRUsCfNthTQd8qHzD28p49bKp0LrGXsZmvW2JmrG6TBbQHBDrWwYyXiYFDAA",
    ),
];
