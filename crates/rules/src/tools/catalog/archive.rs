//! Archivers: GNU tar, Info-ZIP zip and GNU cpio.
//!
//! Owns their options that run programs (tar's `-I`, `--to-command`, `--checkpoint-action`,
//! info and volume scripts, remote shells; zip's `-TT`/`--unzip-command`, which hides in any
//! bundle; cpio's `--rsh-command`), the options that place members outside the jail (tar's
//! `-P`, a name rewrite on extraction, cpio's `--absolute-filenames`) or follow symbolic links
//! out of it (tar's `-h`; zip follows them unless told `-y`, which is injected), the options
//! that read the names to archive from a list (`tar -T`, `zip -@`, cpio's copy-out), their
//! options that name files, and remote archives (`-f host:a.tar`, which runs rsh). tar's
//! old-style key bundle (`tar cf a.tar f`) is data on the spec
//! ([`Layout::OldStyleKeys`](super::spec::Layout)), read by the shared parser as GNU tar
//! reads it.
//!
//! A list file's names (`tar -T list`) are not arguments the server sees: the list file is
//! checked as a path, and the names in it are contained by the kernel only (GNU tar is told
//! `--verbatim-files-from`, so a line of the list cannot be an option such as `-C /`).
//!
//! It must never read an old-style bundle differently from GNU tar: each letter that takes a
//! value takes the next word, so `tar cfI a.tar prog` runs `prog` and is refused for `-I`.

use std::path::Path;

use super::spec::{BASE, Layout, Operands, Spec, is_remote};
use crate::tools::inspection::Inspection;
use crate::tools::parse::{Arg, Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["tar"],
        grammar: Grammar {
            // Every GNU tar short option that takes a value. An old-style bundle gives each
            // of them the next word, so one missing here would misalign every later word.
            short_value: "bCfFgHIKLNTVX",
            long: "file= directory= files-from= exclude-from= use-compress-program= to-command= \
                   checkpoint=? checkpoint-action= info-script= new-volume-script= rsh-command= \
                   rmt-command= index-file= listed-incremental= exclude= transform= xform= \
                   blocking-factor= format= force-local extract get create list absolute-names \
                   dereference verbatim-files-from",
            permute: true,
        },
        layout: Layout::OldStyleKeys,
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
            // Without -P, GNU tar strips a leading `/` and refuses members with `..`.
            (
                "-P",
                "`tar -P` (`--absolute-names`) keeps absolute and `..` member names, so extraction writes wherever the archive says, outside the jail included; drop it",
            ),
            (
                "--absolute-names",
                "`tar --absolute-names` keeps absolute and `..` member names, so extraction writes wherever the archive says, outside the jail included; drop it",
            ),
            // The paths a command names are checked through their symlinks; what a link
            // inside a named directory points to is not.
            (
                "-h",
                "`tar -h` (`--dereference`) follows symbolic links: it archives what a link in the jail points to (outside files included) and extracts through links; archive the links themselves (the default)",
            ),
            (
                "--dereference",
                "`tar --dereference` follows symbolic links: it archives what a link in the jail points to (outside files included) and extracts through links; archive the links themselves (the default)",
            ),
        ],
        path_opts: &[
            "-f",
            "--file",
            "-C",
            "--directory",
            "-X",
            "--exclude-from",
            "--index-file",
            "--listed-incremental",
            "-g",
        ],
        name_lists: &["-T", "--files-from"],
        // GNU tar reads TAR_OPTIONS before its command line, old-style bundles included.
        // As root it would otherwise restore owners and modes from the archive: a setuid-root
        // program in the jail. The seccomp filter refuses set-id modes too; this keeps the
        // everyday `tar xf` from failing on them. `--verbatim-files-from` (GNU tar 1.29+)
        // makes every line of a `-T` list a name: otherwise a line `-C /etc` would change
        // directory where no argument check sees it.
        inject_env: &[(
            "TAR_OPTIONS",
            "--no-same-owner --no-same-permissions --verbatim-files-from",
        )],
        custom: Some(tar),
        // `-z`/`-j`/`-J`/`--lzip`/`--lzma`/`--lzop`/`--zstd`/`-Z` and `-a` by suffix run these
        // by name (`-I prog` is an escape).
        starts: &[
            "gzip",
            "bzip2",
            "xz",
            "lzip",
            "lzma",
            "lzop",
            "zstd",
            "compress",
            "uncompress",
        ],
        ..BASE
    },
    Spec {
        names: &["zip"],
        grammar: Grammar {
            short_value: "bnxit",
            long: "unzip-command= temp-path= exclude= include= names-stdin symlinks \
                   recurse-paths test",
            permute: true,
        },
        escapes: &[
            (
                "--unzip-command",
                "`zip --unzip-command` (`-TT`) runs a program of the caller's choosing to test the archive",
            ),
            (
                "-@",
                "`zip -@` reads the names of the files to archive from standard input, which the server cannot check; name the files as arguments",
            ),
            (
                "--names-stdin",
                "`zip --names-stdin` reads the names of the files to archive from standard input, which the server cannot check; name the files as arguments",
            ),
        ],
        path_opts: &["-b", "--temp-path"],
        // zip stores what a symbolic link points to unless told `-y`: `zip -r a.zip dir`
        // would copy the outside file a planted link names into the archive. `-y` is not
        // negatable (`-y-` is an error), so nothing later in the argv undoes it.
        inject_args: &["-y"],
        custom: Some(zip),
        ..BASE
    },
    Spec {
        names: &["cpio"],
        grammar: Grammar {
            short_value: "CDEFHIMOR",
            long: "create extract pass-through list file= pattern-file= directory= rsh-command= \
                   absolute-filenames no-absolute-filenames force-local format= owner= message= \
                   io-size= block-size=",
            permute: true,
        },
        escapes: &[
            (
                "-o",
                "`cpio -o` reads the names of the files to archive from standard input, which the server cannot check; archive with `tar` instead",
            ),
            (
                "--create",
                "`cpio --create` reads the names of the files to archive from standard input, which the server cannot check; archive with `tar` instead",
            ),
            (
                "-p",
                "`cpio -p` reads the names of the files to copy from standard input, which the server cannot check; copy with `cp` instead",
            ),
            (
                "--pass-through",
                "`cpio --pass-through` reads the names of the files to copy from standard input, which the server cannot check; copy with `cp` instead",
            ),
            (
                "--rsh-command",
                "`cpio --rsh-command` runs a remote shell program",
            ),
            (
                "--absolute-filenames",
                "`cpio --absolute-filenames` extracts members wherever their absolute names say, outside the jail included",
            ),
        ],
        path_opts: &[
            "-F",
            "--file",
            "-I",
            "-O",
            "-E",
            "--pattern-file",
            "-D",
            "--directory",
        ],
        // In copy-in mode the operands are patterns of member names.
        operands: Operands::NotPaths,
        // Members land relative to the cwd even when the archive names them absolutely (the
        // only mode left: copy-out and copy-pass are refused above).
        inject_args: &["--no-absolute-filenames"],
        custom: Some(cpio),
        ..BASE
    },
];

/// tar: remote archives, and the options that rewrite member names when extracting.
fn tar(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    remote_archive(p, &["-f", "--file"], "tar", insp);
    let extracting = p.has("-x") || p.has("--extract") || p.has("--get");
    if !extracting {
        return;
    }
    // Listing (`tar t --transform`) and creating are harmless: names change in the output or
    // in the archive only. On extraction they decide where each member is written, which no
    // argument check sees, and GNU tar's own sanitising of the rewritten names is all that
    // would stand behind them (a member renamed into a directory that an earlier member made
    // a symlink, and bsdtar, have no such safeguard).
    for name in ["--transform", "--xform"] {
        if p.has(name) {
            insp.escape(
                name,
                format!(
                    "`tar {name}` rewrites member names on extraction, so members can be written where no checked argument says (through a symlink the archive made, or outside the jail); extract, then rename"
                ),
            );
        }
    }
    if p.has("-s") {
        insp.escape(
            "-s",
            "`tar -s` on extraction is bsdtar's member-name substitution (`-s /old/new/`), which can write members where no checked argument says; GNU tar's `-s` (`--same-order`) is not needed: drop it",
        );
    }
}

/// `-f host:a.tar` (and cpio's `-F`, `-I`, `-O`) opens the archive on another host through
/// rsh, unless `--force-local` says the colon is part of a local name.
fn remote_archive(p: &Parsed, opts: &[&str], tool: &str, insp: &mut Inspection) {
    if p.has("--force-local") {
        return;
    }
    for a in &p.args {
        if let Arg::Opt {
            name,
            value: Some(v),
            ..
        } = a
            && opts.contains(&name.as_str())
            && is_remote(v)
        {
            insp.escape(
                "remote-archive",
                format!("`{tool} {name} {v}` names a remote archive (host:path), which runs rsh"),
            );
        }
    }
}

/// zip's short options are not getopt's: some are two letters (`-TT cmd`), and a bundle may
/// mix them with one-letter flags, so `-qTT cmd` and `-TqTT cmd` both set the unzip command
/// (the review reproduced both). Any single-dash word with `TT` in it is read as that
/// option; that also refuses the odd value spelled with `TT`, which is the safe side.
fn zip(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    for a in args {
        if a.starts_with('-') && !a.starts_with("--") && a.contains("TT") {
            insp.escape(
                "--unzip-command",
                format!(
                    "`zip {a}` holds `-TT`, which runs a program of the caller's choosing to test the archive"
                ),
            );
        }
    }
}

/// cpio: remote archives.
fn cpio(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    remote_archive(p, &["-F", "--file", "-I", "-O"], "cpio", insp);
}

#[cfg(test)]
mod tests {
    use super::super::testing::cmd;

    /// Every case in `cases/archive.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("archive.txt", include_str!("cases/archive.txt"));
    }

    #[test]
    fn old_style_i_is_refused_wherever_it_sits_in_the_bundle() {
        // The bypass the review found: read as `-cfI`, `f` would swallow `I`.
        let insp = cmd("tar cfI a.tar prog x");
        assert!(insp.escapes[0].reason.contains("`tar -I`"));
    }

    #[test]
    fn tar_options_are_hardened() {
        assert_eq!(
            cmd("tar xf a.tar").inject_env,
            [(
                "TAR_OPTIONS".to_owned(),
                "--no-same-owner --no-same-permissions --verbatim-files-from".to_owned()
            )]
        );
    }

    #[test]
    fn zip_unzip_command_hides_in_any_bundle() {
        // The review's cases: zip reads `TT` as one option wherever it sits in a bundle, with
        // its value attached or in the next word.
        for command in [
            "zip -qTT CMD a.zip f",
            "zip -TqTT CMD a.zip f",
            "zip -T -qTTCMD a.zip f",
            "zip -qTTv CMD a.zip f",
            "zip a.zip f -rTT CMD",
        ] {
            let insp = cmd(command);
            assert_eq!(insp.escapes[0].id, "--unzip-command", "{command}");
            assert!(insp.escapes[0].reason.contains("-TT"), "{command}");
        }
        // Two separate `-T` words are two test flags, not the unzip command.
    }

    #[test]
    fn tar_list_files_are_paths_but_never_stdin() {
        let reason = &cmd("tar -cf a.tar -T -").escapes[0].reason;
        assert!(reason.contains("standard input") && reason.contains("cannot check"));
    }
}
