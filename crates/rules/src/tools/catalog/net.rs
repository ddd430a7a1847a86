//! Network clients: rsync, OpenSSH's ssh, scp and sftp, curl, wget.
//!
//! Owns the options that run programs (remote shells, `ProxyCommand` and friends in any
//! spelling of `-o`, a local sftp server, askpass helpers), that load config which can set
//! them (`-F`, `-K`, `--config`, `-e` wgetrc commands), or that reach local daemons
//! (`--unix-socket`); rsync's options that follow symbolic links out of the tree and its
//! list of names from stdin; which operands are local files and which name a remote host;
//! and the hardening that keeps the jail's own config files (~/.ssh/config, ~/.curlrc,
//! ~/.wgetrc) from being read.
//!
//! ssh reads a `-o` value as one line of its config file: the keyword is case-insensitive,
//! may be quoted (`"ProxyCommand"=x`, `Proxy"Command"`), and may be led by blanks or `=`;
//! [`ssh_keyword`] reads it as OpenSSH's `strdelim` does, and a looser reading stands behind
//! it. ssh also takes options after the destination (`ssh host -o X`), which its spec's
//! layout says.
//!
//! It must never let a URL or operand read local files by another name: `file:`, `scp:` and
//! `sftp:` URLs are refused, and `@file` uploads are paths like any other.

use std::path::Path;

use super::spec::{BASE, Layout, Operands, Spec, is_remote};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Arg, Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["rsync"],
        grammar: Grammar {
            short_value: "eBT",
            long: "rsh= rsync-path= temp-dir= files-from= exclude-from= include-from= log-file= \
                   password-file= write-batch= only-write-batch= read-batch= backup-dir= \
                   partial-dir= compare-dest= copy-dest= link-dest= exclude= include= filter= \
                   daemon config= copy-links copy-unsafe-links safe-links copy-dirlinks \
                   keep-dirlinks",
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
            // The operands are checked through their symlinks; the links inside a copied
            // tree are not, so they must stay links.
            ("-L", RSYNC_LINKS),
            ("--copy-links", RSYNC_LINKS),
            ("--copy-unsafe-links", RSYNC_LINKS),
            ("-k", RSYNC_LINKS),
            ("--copy-dirlinks", RSYNC_LINKS),
            (
                "-K",
                "`rsync -K` (`--keep-dirlinks`) writes through symbolic links to directories in the destination, which can point outside the jail",
            ),
            (
                "--keep-dirlinks",
                "`rsync --keep-dirlinks` writes through symbolic links to directories in the destination, which can point outside the jail",
            ),
        ],
        path_opts: &[
            "-T",
            "--temp-dir",
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
        name_lists: &["--files-from"],
        custom: Some(remote_operands),
        ..BASE
    },
    Spec {
        names: &["ssh"],
        grammar: Grammar {
            short_value: "bcDEeFIiJLlmOoPpQRSWw",
            long: "",
            permute: false,
        },
        // ssh.c restarts getopt after the destination: `ssh host -o ProxyCommand=x` sets it
        // (reproduced), so the options there are read too.
        layout: Layout::OptionsAroundFirstOperand,
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
    // scp's getopt stops at the first operand (OpenSSH's own getopt, which does not permute):
    // `scp f h: -o X` copies files named `-o` and `X`, so they are local operands, not options.
    Spec {
        names: &["scp"],
        grammar: Grammar {
            short_value: "cDFiJlMoPSX",
            long: "",
            permute: false,
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
            (
                "-D",
                "`scp -D` runs a local program of the caller's choosing as the sftp server",
            ),
        ],
        path_opts: &["-i"],
        operands: Operands::NotPaths,
        inject_args: &["-F", "/dev/null"],
        custom: Some(scp),
        ..BASE
    },
    Spec {
        names: &["sftp"],
        grammar: Grammar {
            short_value: "bBcDFiJloPRsSX",
            long: "",
            permute: false,
        },
        escapes: &[
            (
                "-F",
                "`sftp -F` loads a config file, which can set ProxyCommand",
            ),
            (
                "-S",
                "`sftp -S` runs a program of the caller's choosing instead of ssh",
            ),
            (
                "-J",
                "`sftp -J` jumps through hosts with their own configuration",
            ),
            (
                "-D",
                "`sftp -D` runs a local program of the caller's choosing as the sftp server",
            ),
            (
                "-b",
                "`sftp -b` runs a batch file, whose `!command` lines run local shell commands",
            ),
        ],
        path_opts: &["-i"],
        // The destination (`[user@]host[:path]`): local files are named by sftp's commands.
        operands: Operands::NotPaths,
        inject_args: &["-F", "/dev/null"],
        custom: Some(ssh),
        ..BASE
    },
    Spec {
        names: &["curl"],
        grammar: Grammar {
            short_value: "oKTdFHuUxAeEbcDrwXYyzCmQtP",
            long: "output= config= upload-file= data= data-binary= data-raw data-urlencode= \
                   form= cookie-jar= cookie= dump-header= trace= trace-ascii= libcurl= \
                   netrc-file= cacert= cert= key= output-dir= stderr= header= user= request= \
                   url= write-out= unix-socket= abstract-unix-socket=",
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
            long: "output-document= output-file= append-output= directory-prefix= input-file= \
                   execute= config= post-file= body-file= use-askpass= load-cookies= \
                   save-cookies= ca-certificate= certificate= private-key=",
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

/// ssh's `-o` keywords that run a program, load code or configuration (which can set the
/// others), or reach a local socket of the caller's choosing, lowercased.
const RUNS: &[&str] = &[
    "proxycommand",
    "proxyusefdpass",
    "proxyjump",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "remotecommand",
    "include",
    "match",
    "pkcs11provider",
    "securitykeyprovider",
    "sshaskpass",
    "xauthlocation",
    "controlpath",
    "identityagent",
];

/// Why the rsync options that copy what links point to are refused.
const RSYNC_LINKS: &str = "copies what symbolic links point to instead of the links, which can be outside the jail; keep links as links (the default, or `--safe-links`)";

/// ssh, scp, sftp: `-o` options that run programs, in any spelling (`-oProxyCommand=x`,
/// `-o 'proxycommand x'`, `-o '"ProxyCommand"=x'`, `-o '=ProxyCommand x'`).
fn ssh(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for value in p.opts("-o").flatten() {
        let exact = ssh_keyword(value);
        // The looser reading: every quote dropped, any blank or `=` before the keyword, and a
        // dangerous keyword at the start is enough. It can only refuse more than ssh's own.
        let loose: String = value
            .chars()
            .filter(|c| *c != '"')
            .collect::<String>()
            .trim_start_matches(|c: char| c.is_whitespace() || c == '=')
            .to_ascii_lowercase();
        let found = RUNS
            .iter()
            .find(|k| exact.as_deref() == Some(**k))
            .or_else(|| RUNS.iter().find(|k| loose.starts_with(**k)));
        if let Some(key) = found {
            insp.escape(
                &format!("-o {key}"),
                format!(
                    "`ssh -o {key}` runs a program, loads code or configuration, or reaches a local socket of the caller's choosing (ssh reads `-o` keywords in any case, quoted or not)"
                ),
            );
        }
    }
}

/// The keyword ssh reads from one `-o` value, lowercased, as OpenSSH's readconf.c does: the
/// first word split by `strdelim` (blanks, one `=`, and a quoted stretch whose quotes are
/// dropped: `Proxy"Command"` is `ProxyCommand`), or the second when the first is empty (a
/// value led by blanks or `=`). `None` when ssh would ignore the line (an unmatched quote).
fn ssh_keyword(value: &str) -> Option<String> {
    let (first, rest) = strdelim(value)?;
    let keyword = if first.is_empty() {
        strdelim(rest)?.0
    } else {
        first
    };
    Some(keyword.to_ascii_lowercase())
}

/// One word of an ssh config line, and the rest: misc.c `strdelim_internal` with
/// `split_equals`.
fn strdelim(s: &str) -> Option<(String, &str)> {
    const BLANK: &[char] = &[' ', '\t', '\r', '\n'];
    let Some(at) = s.find(|c: char| BLANK.contains(&c) || c == '"' || c == '=') else {
        return Some((s.to_owned(), ""));
    };
    let (word, after) = s.split_at(at);
    if let Some(quoted) = after.strip_prefix('"') {
        // The quote is dropped and the word runs to the next quote.
        let close = quoted.find('"')?;
        let token = format!("{word}{}", &quoted[..close]);
        let rest = &quoted[close + 1..];
        return Some((token, rest.trim_start_matches(BLANK)));
    }
    let equals = after.starts_with('=');
    let mut rest = after[1..].trim_start_matches(BLANK);
    if !equals && let Some(r) = rest.strip_prefix('=') {
        rest = r.trim_start_matches(BLANK);
    }
    Some((word.to_owned(), rest))
}

/// scp: ssh's `-o` checks, and the local operands as paths.
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
    use super::super::testing::{paths, run};
    use super::ssh_keyword;

    /// Every case in `cases/net.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("net.txt", include_str!("cases/net.txt"));
    }

    #[test]
    fn ssh_options_that_run_programs_in_any_spelling() {
        for argv in [
            &["ssh", "-o", "proxycommand CMD", "h"][..],
            &["ssh", "-oProxyCommand=CMD", "h"],
            &["ssh", "-o", "PROXYCOMMAND=CMD", "h"],
            &["ssh", "-o", " ProxyCommand CMD", "h"],
            // The review's spellings, each reproduced against OpenSSH 9.2.
            &["ssh", "-o", "\"ProxyCommand\"=CMD", "h"],
            &["ssh", "-o", "ProxyCommand CMD", "h"],
            &["ssh", "-o", "proxycommand=CMD", "h"],
            &["ssh", "-o", "  ProxyCommand=CMD", "h"],
            &["ssh", "-o", "\tProxyCommand=CMD", "h"],
            &["ssh", "-o", "\"ProxyCommand\"CMD", "h"],
            &["ssh", "-o", "Proxy\"Command\"=CMD", "h"],
            &["ssh", "-o", "=ProxyCommand=CMD", "h"],
            &["ssh", "-o", "\"\"ProxyCommand=CMD", "h"],
            &["ssh", "-vo", "ProxyCommand=CMD", "h"],
            // Options after the destination are options too.
            &["ssh", "h", "-o", "ProxyCommand=CMD"],
            &["ssh", "h", "-oProxyCommand=CMD", "ls"],
        ] {
            let insp = run(argv);
            assert_eq!(
                insp.escapes.first().map(|e| e.id.as_str()),
                Some("-o proxycommand"),
                "{argv:?}"
            );
        }
        for (value, key) in [
            ("KnownHostsCommand=CMD", "-o knownhostscommand"),
            ("ProxyUseFdpass=yes", "-o proxyusefdpass"),
            ("ProxyJump=j", "-o proxyjump"),
            ("Include=cfg", "-o include"),
            ("Match=exec CMD", "-o match"),
            ("match exec CMD", "-o match"),
            ("XAuthLocation=CMD", "-o xauthlocation"),
            ("ControlPath=/run/s", "-o controlpath"),
            ("PKCS11Provider=lib.so", "-o pkcs11provider"),
        ] {
            assert_eq!(
                run(&["ssh", "-o", value, "h"]).escapes[0].id,
                key,
                "{value}"
            );
            assert_eq!(run(&["scp", "-o", value, "f", "h:"]).escapes[0].id, key);
            assert_eq!(run(&["sftp", "-o", value, "h"]).escapes[0].id, key);
        }
        // After the remote command starts, `-o` is the command's.
    }

    #[test]
    fn ssh_keywords_are_read_as_openssh_reads_them() {
        for (value, keyword) in [
            ("ProxyCommand=x", Some("proxycommand")),
            ("ProxyCommand x", Some("proxycommand")),
            ("ProxyCommand = x", Some("proxycommand")),
            ("\"ProxyCommand\"=x", Some("proxycommand")),
            ("Proxy\"Command\" x", Some("proxycommand")),
            ("  =ProxyCommand x", Some("proxycommand")),
            ("\"Proxy\"Command=x", Some("proxy")),
            ("\"ProxyCommand=x", None),
            ("Port=22", Some("port")),
        ] {
            assert_eq!(ssh_keyword(value).as_deref(), keyword, "{value}");
        }
    }

    #[test]
    fn curl_uploads_and_outputs_are_paths() {
        assert_eq!(paths("curl -d @- http://x"), Vec::<String>::new());
    }
}
