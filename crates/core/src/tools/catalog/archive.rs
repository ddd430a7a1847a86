//! Archivers: GNU tar and Info-ZIP zip.
//!
//! Owns their options that run programs (tar's `-I`, `--to-command`, `--checkpoint-action`,
//! info and volume scripts, remote shells; zip's `-TT`/`--unzip-command`), their options that
//! name files, and tar's remote archives (`-f host:a.tar`, which runs rsh). tar's old-style
//! key bundle (`tar cf a.tar f`) is data on the spec ([`Spec::old_style_keys`]), read by the
//! shared parser as GNU tar reads it.
//!
//! It must never read an old-style bundle differently from GNU tar: each letter that takes a
//! value takes the next word, so `tar cfI a.tar prog` runs `prog` and is refused for `-I`.

use std::path::Path;

use super::spec::{BASE, Spec, is_remote};
use crate::tools::inspection::Inspection;
use crate::tools::parse::{Arg, Grammar, Parsed, Val};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["tar"],
        grammar: Grammar {
            // Every GNU tar short option that takes a value. An old-style bundle gives each
            // of them the next word, so one missing here would misalign every later word.
            short_value: "bCfFgHIKLNTVX",
            long: &[
                ("file", Val::Required),
                ("directory", Val::Required),
                ("files-from", Val::Required),
                ("exclude-from", Val::Required),
                ("use-compress-program", Val::Required),
                ("to-command", Val::Required),
                ("checkpoint", Val::Optional),
                ("checkpoint-action", Val::Required),
                ("info-script", Val::Required),
                ("new-volume-script", Val::Required),
                ("rsh-command", Val::Required),
                ("rmt-command", Val::Required),
                ("index-file", Val::Required),
                ("listed-incremental", Val::Required),
                ("exclude", Val::Required),
                ("transform", Val::Required),
                ("xform", Val::Required),
                ("blocking-factor", Val::Required),
                ("format", Val::Required),
                ("force-local", Val::No),
                ("extract", Val::No),
                ("create", Val::No),
                ("list", Val::No),
            ],
            permute: true,
        },
        old_style_keys: true,
        escapes: &[
            (
                "--checkpoint-action",
                "`tar --checkpoint-action=exec=` runs a command at each checkpoint",
            ),
            (
                "--to-command",
                "`tar --to-command` pipes each member into a command",
            ),
            (
                "--use-compress-program",
                "`tar --use-compress-program` (`-I`) runs a program of the caller's choosing",
            ),
            (
                "-I",
                "`tar -I` runs a compression program of the caller's choosing",
            ),
            (
                "--info-script",
                "`tar --info-script` (`-F`) runs a script at each volume",
            ),
            ("-F", "`tar -F` runs a script at each volume"),
            (
                "--new-volume-script",
                "`tar --new-volume-script` runs a script at each volume",
            ),
            (
                "--rsh-command",
                "`tar --rsh-command` runs a remote shell program",
            ),
            (
                "--rmt-command",
                "`tar --rmt-command` runs a program of the caller's choosing",
            ),
        ],
        path_opts: &[
            "-f",
            "--file",
            "-C",
            "--directory",
            "-T",
            "--files-from",
            "-X",
            "--exclude-from",
            "--index-file",
            "--listed-incremental",
            "-g",
        ],
        // GNU tar reads TAR_OPTIONS before its command line, old-style bundles included.
        // As root it would otherwise restore owners and modes from the archive: a setuid-root
        // program in the jail. The seccomp filter refuses set-id modes too; this keeps the
        // everyday `tar xf` from failing on them.
        inject_env: &[("TAR_OPTIONS", "--no-same-owner --no-same-permissions")],
        custom: Some(remote_archive),
        ..BASE
    },
    Spec {
        names: &["zip"],
        grammar: Grammar {
            short_value: "bnxit",
            long: &[
                ("unzip-command", Val::Required),
                ("temp-path", Val::Required),
                ("exclude", Val::Required),
                ("include", Val::Required),
            ],
            permute: true,
        },
        escapes: &[(
            "--unzip-command",
            "`zip --unzip-command` (`-TT`) runs a program of the caller's choosing to test the archive",
        )],
        path_opts: &["-b", "--temp-path"],
        custom: Some(zip),
        ..BASE
    },
];

/// `tar -f host:a.tar` opens the archive on another host through rsh, unless
/// `--force-local` says the colon is part of a local name.
fn remote_archive(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    if p.has("--force-local") {
        return;
    }
    for a in &p.args {
        if let Arg::Opt {
            name,
            value: Some(v),
            ..
        } = a
            && (name == "-f" || name == "--file")
            && is_remote(v)
        {
            insp.escape(
                "remote-archive",
                format!("`tar -f {v}` names a remote archive (host:path), which runs rsh"),
            );
        }
    }
}

/// zip's `-TT cmd` is a two-letter option, which getopt's reading splits into `-T -T`.
fn zip(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in args {
        if a.starts_with("-TT") {
            insp.escape(
                "--unzip-command",
                "`zip -TT` runs a program of the caller's choosing to test the archive",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{cmd, escapes, paths};

    #[test]
    fn old_style_bundles_give_each_value_letter_the_next_word() {
        // `tar cfb a.tar 20 f` is `-c -f a.tar -b 20 f`: the archive and the member are
        // paths, the blocking factor is not.
        assert_eq!(paths("tar cfb a.tar 20 f"), ["a.tar", "f"]);
        assert_eq!(paths("tar xzf a.tgz -C ."), ["a.tgz", "."]);
        assert_eq!(paths("tar cf a.tar f"), ["a.tar", "f"]);
        assert_eq!(paths("tar tvf ../a.tar"), ["../a.tar"]);
        assert!(escapes("tar cf a.tar f").is_empty());
        assert!(escapes("tar xzf a.tgz").is_empty());
    }

    #[test]
    fn old_style_i_is_refused_wherever_it_sits_in_the_bundle() {
        // The bypass the review found: read as `-cfI`, `f` would swallow `I`.
        assert_eq!(escapes("tar cfI a.tar prog x"), ["-I"]);
        let insp = cmd("tar cfI a.tar prog x");
        assert!(insp.escapes[0].reason.contains("`tar -I`"));
        assert_eq!(paths("tar cfI a.tar prog x"), ["a.tar", "x"]);
        assert_eq!(escapes("tar cIf prog a.tar x"), ["-I"]);
        assert_eq!(escapes("tar Icf prog a.tar x"), ["-I"]);
        assert_eq!(escapes("tar cfF a.tar script x"), ["-F"]);
    }

    #[test]
    fn old_style_remote_archives_are_refused() {
        assert_eq!(escapes("tar cf host:a.tar f"), ["remote-archive"]);
        assert_eq!(escapes("tar cbf 20 host:a.tar f"), ["remote-archive"]);
        assert!(escapes("tar cf host:a.tar --force-local f").is_empty());
    }

    #[test]
    fn a_dash_in_an_old_style_bundle_ends_options_as_in_gnu_tar() {
        // `tar c-b /etc/shadow` is `tar -c -- -b /etc/shadow`: `/etc/shadow` is a member to
        // read, so it must be checked, not taken as the blocking factor.
        assert_eq!(paths("tar c-b /etc/shadow"), ["-b", "/etc/shadow"]);
        // Before the dash, `b` still takes its word: `tar cb- 20 f` is `-c -b 20 -- f`.
        assert_eq!(paths("tar cb- 20 f"), ["f"]);
        assert!(
            escapes("tar c-I prog").is_empty(),
            "`-I` after `--` is a file name"
        );
        assert_eq!(escapes("tar cI- prog"), ["-I"]);
    }

    #[test]
    fn dash_led_options_as_before() {
        assert_eq!(escapes("tar -cvIcmd -f a.tar f"), ["-I"]);
        assert_eq!(
            escapes("tar --checkpoint=1 --checkpoint-act=exec=CMD -cf a.tar f"),
            ["--checkpoint-action"]
        );
        assert_eq!(escapes("tar cf a.tar --to-command=CMD f"), ["--to-command"]);
        assert_eq!(escapes("tar -cf host:a.tar f"), ["remote-archive"]);
        assert_eq!(escapes("tar --file=host:a.tar -c f"), ["remote-archive"]);
        assert_eq!(paths("tar -xf a.tar -C /etc"), ["a.tar", "/etc"]);
        assert_eq!(
            paths("tar -cf a.tar -g snap -T list"),
            ["a.tar", "snap", "list"]
        );
        // `-c` first: an old-style bundle only when the first word has no dash.
        assert_eq!(paths("tar -c cfI x"), ["cfI", "x"]);
    }

    #[test]
    fn tar_options_are_hardened() {
        assert_eq!(
            cmd("tar xf a.tar").inject_env,
            [(
                "TAR_OPTIONS".to_owned(),
                "--no-same-owner --no-same-permissions".to_owned()
            )]
        );
    }

    #[test]
    fn zip_test_commands_are_escapes() {
        assert_eq!(escapes("zip z f -T -TT CMD"), ["--unzip-command"]);
        assert_eq!(escapes("zip z f --unzip-command=CMD"), ["--unzip-command"]);
        assert_eq!(paths("zip -b /tmp z f"), ["/tmp", "z", "f"]);
        assert!(escapes("zip z f").is_empty());
    }
}
