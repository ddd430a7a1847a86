//! Network clients: rsync, OpenSSH's ssh, scp and sftp, curl, wget.
//!
//! Owns the options that run programs (remote shells, `ProxyCommand` and friends in any
//! spelling of `-o`, askpass helpers), that load config which can set them (`-F`, `-K`,
//! `--config`, `-e` wgetrc commands), or that reach local daemons (`--unix-socket`); which
//! operands are local files and which name a remote host; and the hardening that keeps the
//! jail's own config files (~/.ssh/config, ~/.curlrc, ~/.wgetrc) from being read.
//!
//! It must never let a URL or operand read local files by another name: `file:`, `scp:` and
//! `sftp:` URLs are refused, and `@file` uploads are paths like any other.

use std::path::Path;

use super::spec::{BASE, Operands, Spec, is_remote};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Arg, Grammar, Parsed, Val};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["rsync"],
        grammar: Grammar {
            short_value: "eBT",
            long: &[
                ("rsh", Val::Required),
                ("rsync-path", Val::Required),
                ("temp-dir", Val::Required),
                ("files-from", Val::Required),
                ("exclude-from", Val::Required),
                ("include-from", Val::Required),
                ("log-file", Val::Required),
                ("password-file", Val::Required),
                ("write-batch", Val::Required),
                ("only-write-batch", Val::Required),
                ("read-batch", Val::Required),
                ("backup-dir", Val::Required),
                ("partial-dir", Val::Required),
                ("compare-dest", Val::Required),
                ("copy-dest", Val::Required),
                ("link-dest", Val::Required),
                ("exclude", Val::Required),
                ("include", Val::Required),
                ("filter", Val::Required),
                ("daemon", Val::No),
                ("config", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            (
                "-e",
                "`rsync -e` runs a remote shell program of the caller's choosing",
            ),
            (
                "--rsh",
                "`rsync --rsh` runs a remote shell program of the caller's choosing",
            ),
            (
                "--rsync-path",
                "`rsync --rsync-path` runs a program of the caller's choosing",
            ),
            (
                "--daemon",
                "`rsync --daemon` starts a server and reads its own config",
            ),
            ("--config", "`rsync --config` loads a daemon config"),
        ],
        path_opts: &[
            "-T",
            "--temp-dir",
            "--files-from",
            "--exclude-from",
            "--include-from",
            "--log-file",
            "--password-file",
            "--write-batch",
            "--only-write-batch",
            "--read-batch",
            "--backup-dir",
            "--partial-dir",
            "--compare-dest",
            "--copy-dest",
            "--link-dest",
        ],
        custom: Some(remote_operands),
        ..BASE
    },
    Spec {
        names: &["ssh"],
        grammar: Grammar {
            short_value: "bcDEeFIiJLlmOoPpQRSWw",
            long: &[],
            permute: false,
        },
        escapes: &[
            (
                "-F",
                "`ssh -F` loads a config file, which can set ProxyCommand",
            ),
            (
                "-S",
                "`scp -S` / `ssh -S` names a program or control socket of the caller's choosing",
            ),
            (
                "-J",
                "`ssh -J` jumps through hosts with their own configuration",
            ),
        ],
        path_opts: &["-i", "-E"],
        operands: Operands::NotPaths,
        // ~/.ssh/config lives in the jail (HOME), where the model can write it.
        inject_args: &["-F", "/dev/null"],
        custom: Some(ssh),
        ..BASE
    },
    Spec {
        names: &["scp", "sftp"],
        grammar: Grammar {
            short_value: "cDFiJloPSX",
            long: &[],
            permute: true,
        },
        escapes: &[
            (
                "-F",
                "`scp -F` loads a config file, which can set ProxyCommand",
            ),
            (
                "-S",
                "`scp -S` runs a program of the caller's choosing instead of ssh",
            ),
            (
                "-J",
                "`scp -J` jumps through hosts with their own configuration",
            ),
        ],
        path_opts: &["-i"],
        operands: Operands::NotPaths,
        inject_args: &["-F", "/dev/null"],
        custom: Some(scp),
        ..BASE
    },
    Spec {
        names: &["curl"],
        grammar: Grammar {
            short_value: "oKTdFHuUxAeEbcDrwXYyzCmQtP",
            long: &[
                ("output", Val::Required),
                ("config", Val::Required),
                ("upload-file", Val::Required),
                ("data", Val::Required),
                ("data-binary", Val::Required),
                ("data-raw", Val::No),
                ("data-urlencode", Val::Required),
                ("form", Val::Required),
                ("cookie-jar", Val::Required),
                ("cookie", Val::Required),
                ("dump-header", Val::Required),
                ("trace", Val::Required),
                ("trace-ascii", Val::Required),
                ("libcurl", Val::Required),
                ("netrc-file", Val::Required),
                ("cacert", Val::Required),
                ("cert", Val::Required),
                ("key", Val::Required),
                ("output-dir", Val::Required),
                ("stderr", Val::Required),
                ("header", Val::Required),
                ("user", Val::Required),
                ("request", Val::Required),
                ("url", Val::Required),
                ("write-out", Val::Required),
                ("unix-socket", Val::Required),
                ("abstract-unix-socket", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            ("-K", "`curl -K` loads a config file of options"),
            ("--config", "`curl --config` loads a config file of options"),
            (
                "--unix-socket",
                "`curl --unix-socket` talks to a local daemon (the Docker socket is root-equivalent)",
            ),
            (
                "--abstract-unix-socket",
                "`curl --abstract-unix-socket` talks to a local daemon",
            ),
        ],
        path_opts: &[
            "-o",
            "--output",
            "-T",
            "--upload-file",
            "-c",
            "--cookie-jar",
            "-D",
            "--dump-header",
            "--trace",
            "--trace-ascii",
            "--libcurl",
            "--netrc-file",
            "--cacert",
            "--cert",
            "--key",
            "--output-dir",
            "--stderr",
        ],
        operands: Operands::NotPaths,
        // `-q` must come first: it stops curl reading ~/.curlrc, which is in the jail (HOME).
        inject_args: &["-q"],
        custom: Some(curl),
        ..BASE
    },
    Spec {
        names: &["wget"],
        grammar: Grammar {
            short_value: "OoaPiBeUtTwQ",
            long: &[
                ("output-document", Val::Required),
                ("output-file", Val::Required),
                ("append-output", Val::Required),
                ("directory-prefix", Val::Required),
                ("input-file", Val::Required),
                ("execute", Val::Required),
                ("config", Val::Required),
                ("post-file", Val::Required),
                ("body-file", Val::Required),
                ("use-askpass", Val::Required),
                ("load-cookies", Val::Required),
                ("save-cookies", Val::Required),
                ("ca-certificate", Val::Required),
                ("certificate", Val::Required),
                ("private-key", Val::Required),
            ],
            permute: true,
        },
        escapes: &[
            ("-e", "`wget -e` runs wgetrc commands"),
            ("--execute", "`wget --execute` runs wgetrc commands"),
            ("--config", "`wget --config` loads a wgetrc"),
            (
                "--use-askpass",
                "`wget --use-askpass` runs a program of the caller's choosing",
            ),
        ],
        path_opts: &[
            "-O",
            "--output-document",
            "-o",
            "--output-file",
            "-a",
            "--append-output",
            "-P",
            "--directory-prefix",
            "-i",
            "--input-file",
            "--post-file",
            "--body-file",
            "--load-cookies",
            "--save-cookies",
            "--ca-certificate",
            "--certificate",
            "--private-key",
        ],
        operands: Operands::NotPaths,
        // ~/.wgetrc is in the jail (HOME), where the model can write it.
        inject_args: &["--no-config"],
        custom: Some(curl),
        ..BASE
    },
];

/// rsync: a `host:path` operand is reached through a remote shell program.
fn remote_operands(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for o in p.operands() {
        if is_remote(o) {
            insp.escape(
                "remote",
                format!("`{o}` names a remote host, reached through a remote shell program"),
            );
        }
    }
}

/// ssh/scp: `-o` options that run programs, in any spelling (`-oProxyCommand=x`,
/// `-o 'proxycommand x'`).
fn ssh(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const RUNS: &[&str] = &[
        "proxycommand",
        "localcommand",
        "permitlocalcommand",
        "knownhostscommand",
        "remotecommand",
        "include",
        "pkcs11provider",
        "securitykeyprovider",
        "sshaskpass",
    ];
    for value in p.opts("-o").flatten() {
        let key: String = value
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '=')
            .collect::<String>()
            .to_ascii_lowercase();
        if RUNS.contains(&key.as_str()) {
            insp.escape(
                &format!("-o {key}"),
                format!("`ssh -o {key}` runs a program or loads code of the caller's choosing"),
            );
        }
    }
}

/// scp/sftp: ssh's `-o` checks, and the local operands as paths.
fn scp(p: &Parsed, args: &[String], program: Option<&Path>, insp: &mut Inspection) {
    ssh(p, args, program, insp);
    // Local operands (no `host:` prefix) are files scp reads or writes.
    for o in p.operands() {
        if !is_remote(o) {
            insp.paths.push(PathCheck::Path(o.to_owned()));
        }
    }
}

/// curl and wget: `@file` uploads are paths, and URLs that read local files are refused.
fn curl(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in &p.args {
        let (opt, value) = match a {
            Arg::Opt {
                name,
                value: Some(v),
                ..
            } => (name.as_str(), v.as_str()),
            Arg::Operand(o) => ("", o.as_str()),
            _ => continue,
        };
        // `-d @file`, `-F name=@file`, `--data-binary @file` read local files.
        let at = match opt {
            "-d" | "--data" | "--data-binary" | "--data-urlencode" | "--json" => {
                value.strip_prefix('@')
            }
            "-F" | "--form" => value
                .split_once("=@")
                .map(|(_, f)| f)
                .or_else(|| value.split_once("=<").map(|(_, f)| f)),
            _ => None,
        };
        if let Some(file) = at.filter(|f| !f.is_empty() && *f != "-") {
            let file = file.split(';').next().unwrap_or(file);
            insp.paths.push(PathCheck::Path(file.to_owned()));
        }
        let lower = value.to_ascii_lowercase();
        if (opt.is_empty() || opt == "--url")
            && (lower.starts_with("file:")
                || lower.starts_with("scp:")
                || lower.starts_with("sftp:"))
        {
            insp.escape(
                "file-url",
                format!("`{value}` reads local files or runs ssh; only network URLs are allowed"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{cmd, escapes, paths, run};

    #[test]
    fn rsync_remote_shells_and_daemon_mode() {
        assert_eq!(escapes("rsync -e CMD f h:/x"), ["-e", "remote"]);
        assert_eq!(escapes("rsync --rsync-path=CMD f g"), ["--rsync-path"]);
        assert_eq!(escapes("rsync --daemon"), ["--daemon"]);
        assert_eq!(escapes("rsync -a f host:/x"), ["remote"]);
        assert!(escapes("rsync -a f g").is_empty());
        assert_eq!(
            paths("rsync -a --log-file=/tmp/l f g"),
            ["/tmp/l", "f", "g"]
        );
    }

    #[test]
    fn ssh_options_that_run_programs_in_any_spelling() {
        for argv in [
            &["ssh", "-o", "proxycommand CMD", "h"][..],
            &["ssh", "-oProxyCommand=CMD", "h"],
            &["ssh", "-o", "PROXYCOMMAND=CMD", "h"],
            &["ssh", "-o", " ProxyCommand CMD", "h"],
        ] {
            let insp = run(argv);
            assert_eq!(insp.escapes[0].id, "-o proxycommand", "{argv:?}");
        }
        assert_eq!(
            escapes("ssh -o LocalCommand=CMD -o PermitLocalCommand=yes h"),
            ["-o localcommand", "-o permitlocalcommand"]
        );
        assert_eq!(escapes("ssh -F cfg h"), ["-F"]);
        assert_eq!(escapes("ssh -J jump h"), ["-J"]);
        assert!(escapes("ssh -p 2222 -o ConnectTimeout=5 host").is_empty());
        assert_eq!(cmd("ssh h").inject_args, ["-F", "/dev/null"]);
        assert_eq!(paths("ssh -i ../key h ls /etc"), ["../key"]);
    }

    #[test]
    fn scp_local_operands_are_paths() {
        assert_eq!(escapes("scp -S CMD f h:"), ["-S"]);
        assert_eq!(paths("scp /etc/passwd h:"), ["/etc/passwd"]);
        assert_eq!(paths("scp h:/etc/passwd ."), ["."]);
        assert_eq!(escapes("scp -o ProxyCommand=x f h:"), ["-o proxycommand"]);
        assert_eq!(cmd("sftp h").inject_args, ["-F", "/dev/null"]);
    }

    #[test]
    fn curl_config_sockets_and_local_urls() {
        assert_eq!(escapes("curl -K cfg http://x"), ["-K"]);
        assert_eq!(escapes("curl --config=cfg http://x"), ["--config"]);
        assert_eq!(
            escapes("curl --unix-socket /var/run/docker.sock http://x/"),
            ["--unix-socket"]
        );
        assert_eq!(escapes("curl file:///etc/passwd"), ["file-url"]);
        assert_eq!(escapes("curl --url FILE:///etc/passwd"), ["file-url"]);
        assert_eq!(escapes("curl sftp://h/x"), ["file-url"]);
        assert!(escapes("curl -s http://example.invalid/").is_empty());
        assert_eq!(cmd("curl http://x").inject_args, ["-q"]);
    }

    #[test]
    fn curl_uploads_and_outputs_are_paths() {
        assert_eq!(paths("curl -d @/etc/passwd http://x"), ["/etc/passwd"]);
        assert_eq!(paths("curl -F a=@../f;type=text/plain http://x"), ["../f"]);
        assert_eq!(paths("curl -F a=<f2 http://x"), ["f2"]);
        assert_eq!(paths("curl -d @- http://x"), Vec::<String>::new());
        assert_eq!(paths("curl -o /tmp/x http://x"), ["/tmp/x"]);
        assert_eq!(paths("curl -c jar -D hdr http://x"), ["jar", "hdr"]);
    }

    #[test]
    fn wget_commands_config_and_files() {
        assert_eq!(escapes("wget -e use_proxy=on http://x"), ["-e"]);
        assert_eq!(
            escapes("wget --use-askpass=CMD http://x"),
            ["--use-askpass"]
        );
        assert_eq!(escapes("wget file:///etc/passwd"), ["file-url"]);
        assert_eq!(paths("wget -O /tmp/x http://x"), ["/tmp/x"]);
        assert_eq!(paths("wget --post-file=../f http://x"), ["../f"]);
        assert_eq!(cmd("wget -q http://x").inject_args, ["--no-config"]);
    }
}
