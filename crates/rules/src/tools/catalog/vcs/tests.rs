//! Unit tests of git's facts: the global options and subcommands that are escapes, the
//! short spellings that mean one under one subcommand only, the paths, the injected
//! hardening, and the pushes that imply `--force`.
//!
//! Owns nothing but tests; the facts they pin are in the parent module.

use super::super::testing::{cmd, escapes, generic, paths};
use super::*;

#[test]
fn global_options_that_set_configuration_or_programs() {
    assert_eq!(escapes("git -c core.fsmonitor=CMD status"), ["-c"]);
    assert_eq!(escapes("git -ccore.fsmonitor=CMD status"), ["-c"]);
    assert_eq!(
        escapes("git --config-env=core.pager=X log"),
        ["--config-env"]
    );
    assert_eq!(escapes("git --exec-path=/tmp status"), ["--exec-path"]);
    assert_eq!(escapes("git -p log"), ["-p"]);
    assert_eq!(paths("git -C /etc status"), ["/etc"]);
    assert!(escapes("git --no-pager log").is_empty());
}

#[test]
fn subcommand_options_that_run_programs() {
    for (command, id) in [
        ("git ls-remote --upl=CMD .", "--upload-pack"),
        ("git ls-remote --upload-pack CMD .", "--upload-pack"),
        ("git fetch -u CMD origin", "--upload-pack"),
        ("git clone -uCMD repo", "--upload-pack"),
        ("git push --receive-pack=CMD origin", "--receive-pack"),
        ("git rebase -x CMD main", "--exec"),
        ("git rebase --exec=CMD main", "--exec"),
        ("git grep -O CMD pattern", "--open-files-in-pager"),
        (
            "git grep --open-files-in-pager=CMD x",
            "--open-files-in-pager",
        ),
        ("git clone --config core.x=y repo", "--config"),
        ("git archive --remote=x HEAD", "--remote"),
    ] {
        assert_eq!(escapes(command), [id], "{command}");
    }
    let insp = cmd("git fetch -u CMD origin");
    assert_eq!(
        insp.escapes[0].reason,
        "`git fetch --upload-pack` runs a program of the caller's choosing"
    );
}

#[test]
fn difftool_and_mergetool_are_refused_outright() {
    // The review's case: `-t vimdiff` starts an editor that reads a planted rc file. With
    // no option at all, repository config picks the tool (difftool.<tool>.cmd).
    for (command, first) in [
        ("git difftool -t vimdiff", "--extcmd"),
        ("git difftool --tool=vimdiff HEAD", "--extcmd"),
        ("git difftool --too vimdiff", "--extcmd"),
        ("git difftool --extcmd=CMD", "--extcmd"),
        ("git mergetool -x CMD", "--extcmd"),
        ("git mergetool -t meld", "--extcmd"),
        ("git difftool", "difftool"),
        ("git difftool -g HEAD~1", "difftool"),
        ("git -C sub mergetool --no-prompt", "mergetool"),
    ] {
        let found = escapes(command);
        assert_eq!(found.first().map(String::as_str), Some(first), "{command}");
        assert!(
            found.iter().any(|e| e == "difftool" || e == "mergetool"),
            "{command}: {found:?}"
        );
    }
    let insp = cmd("git difftool");
    assert!(
        insp.escapes[0].reason.contains("repository configuration"),
        "{}",
        insp.escapes[0].reason
    );
}

#[test]
fn help_through_a_configured_viewer_is_refused_in_every_spelling() {
    for (command, id) in [
        ("git help status", "help"),
        ("git help -m status", "help"),
        ("git help --web log", "help"),
        ("git help", "help"),
        ("git status --help", "--help"),
        ("git -C sub log --help", "--help"),
        ("git --help log", "--help"),
        ("git -h log", "-h"),
    ] {
        assert_eq!(
            escapes(command).first().map(String::as_str),
            Some(id),
            "{command}"
        );
    }
    assert!(
        cmd("git help status").escapes[0]
            .reason
            .contains("man git-")
    );
    for command in [
        "git help -a",
        "git help --all",
        "git help -g",
        "git help --config",
    ] {
        assert!(escapes(command).is_empty(), "{command}");
    }
    assert!(
        escapes("git log -h").is_empty(),
        "`-h` after a subcommand prints usage"
    );
}

#[test]
fn hash_object_never_reads_names_from_stdin() {
    assert_eq!(escapes("git hash-object --stdin-paths"), ["--stdin-paths"]);
    assert_eq!(escapes("git hash-object -w --stdin-p"), ["--stdin-paths"]);
    assert!(
        cmd("git hash-object --stdin-paths").escapes[0]
            .reason
            .contains("standard input")
    );
    assert!(escapes("git hash-object -w f").is_empty());
    assert_eq!(generic("git hash-object /etc/passwd"), ["/etc/passwd"]);
}

fn implied(command: &str) -> Vec<&'static str> {
    let argv: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    crate::tools::implied_options(&argv)
}

#[test]
fn every_forcing_push_spelling_implies_force() {
    for command in [
        "git push --force-with-lease",
        "git push --force-with-lease=main:abc123 origin main",
        "git push --force-w origin main",
        "git push --force-if-includes --force-with-lease",
        "git push --force-i origin",
        "git push -f origin main",
        "git push -uf origin main",
        "git push -fu origin main",
        "git push origin +main",
        "git push origin +refs/heads/a:refs/heads/b",
        "git -C sub push --forc origin",
        "git push -o ci.skip origin +main",
    ] {
        assert_eq!(implied(command), ["force"], "{command}");
    }
    for command in [
        "git push origin main",
        "git push --follow-tags origin main",
        "git push -u origin main",
        "git log +x",
        "git -C push status",
        "git push --mirror",
        "git push --delete origin x",
        "git push origin :x",
        "ls +x",
    ] {
        assert!(implied(command).is_empty(), "{command}");
    }
}

#[test]
fn short_spellings_mean_an_escape_only_under_their_subcommand() {
    assert!(escapes("git push -u origin main").is_empty());
    assert!(escapes("git log -x").is_empty());
    assert!(escapes("git diff -O order").is_empty());
    assert!(
        escapes("git log --config x").is_empty(),
        "only clone and submodule"
    );
}

#[test]
fn options_hidden_behind_a_misread_value_are_found() {
    assert_eq!(
        escapes("git push -u --receive-pack=CMD . HEAD"),
        ["--receive-pack"]
    );
    assert_eq!(
        escapes("git grep -o --open-files-in-pager=CMD x"),
        ["--open-files-in-pager"]
    );
}

#[test]
fn an_ambiguous_abbreviation_means_every_escape_it_abbreviates() {
    // `--e` abbreviates --exec, --extcmd and --ext-diff.
    assert_eq!(escapes("git log --e=x"), ["--exec", "--extcmd"]);
    assert!(escapes("git log --ext-diff").is_empty());
}

#[test]
fn subcommands_that_are_escapes_in_themselves() {
    assert_eq!(escapes("git config core.fsmonitor CMD"), ["config"]);
    assert!(escapes("git config --get user.name").is_empty());
    assert!(escapes("git config -l").is_empty());
    assert_eq!(escapes("git submodule foreach CMD"), ["submodule foreach"]);
    assert!(escapes("git submodule update --init").is_empty());
    assert_eq!(escapes("git bisect run CMD"), ["bisect run"]);
    assert!(escapes("git bisect good").is_empty());
    assert_eq!(escapes("git filter-branch x"), ["filter-branch"]);
    assert_eq!(escapes("git daemon"), ["daemon"]);
    assert_eq!(escapes("git credential fill"), ["credential"]);
    let insp = cmd("git submodule foreach CMD");
    assert_eq!(
        insp.escapes[0].reason,
        "`git submodule foreach` runs a command of the caller's choosing"
    );
}

#[test]
fn an_unknown_subcommand_is_an_alias_or_a_git_program() {
    assert_eq!(escapes("git x"), ["alias"]);
    let insp = cmd("git frobnicate --now");
    assert!(insp.escapes[0].reason.contains("not a built-in"));
    assert!(insp.escapes[0].reason.contains("git-frobnicate"));
    for sub in ["status", "log", "push", "commit", "worktree", "difftool"] {
        assert!(
            !escapes(&format!("git {sub}")).contains(&"alias".to_owned()),
            "{sub}"
        );
    }
    assert!(escapes("git").is_empty(), "no subcommand");
    assert!(escapes("git --version").is_empty());
}

#[test]
fn files_the_subcommand_writes_are_paths() {
    assert_eq!(paths("git diff --output=/outside"), ["/outside"]);
    assert_eq!(paths("git diff --out=/outside"), ["/outside"]);
    assert_eq!(paths("git format-patch -o ../out HEAD~1"), ["../out"]);
    assert_eq!(paths("git archive -o /x HEAD"), ["/x"]);
    assert!(
        paths("git log -o /x").is_empty(),
        "`-o` names a file only there"
    );
    assert_eq!(paths("git clone --template=/t repo"), ["/t"]);
    assert_eq!(paths("git bundle create ../b HEAD"), ["../b"]);
}

#[test]
fn every_word_after_the_subcommand_keeps_the_generic_check() {
    assert_eq!(generic("git diff HEAD~1 -- ../f"), ["HEAD~1", "--", "../f"]);
    assert!(!generic("git status").contains(&"status".to_owned()));
}

#[test]
fn hardening_turns_off_what_repository_config_could_run() {
    let insp = cmd("git status");
    assert_eq!(insp.inject_args[0], "--no-pager");
    for setting in [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "core.sshCommand=false",
        "safe.bareRepository=explicit",
    ] {
        assert!(insp.inject_args.iter().any(|a| a == setting), "{setting}");
    }
    assert!(
        insp.inject_env
            .contains(&("GIT_CONFIG_GLOBAL".to_owned(), "/dev/null".to_owned()))
    );
}

#[test]
fn the_subcommand_table_lists_each_name_once() {
    let mut seen = std::collections::BTreeSet::new();
    for sub in SUBCOMMANDS.table {
        for name in sub.names {
            assert!(seen.insert(*name), "`{name}` twice");
        }
    }
    assert_eq!(seen.len(), 99);
}

#[test]
fn clone_c_is_config() {
    assert_eq!(
        escapes("git clone -c filter.x.smudge=CMD url"),
        ["--config"]
    );
    assert_eq!(
        escapes("git clone --config=core.fsmonitor=CMD url"),
        ["--config"]
    );
}

#[test]
fn diff_commands_never_use_an_external_diff_or_textconv() {
    let no_ext = vec!["--no-ext-diff".to_owned(), "--no-textconv".to_owned()];
    for (command, at) in [
        ("git diff", 0),
        ("git log -p -3", 0),
        ("git -C sub show HEAD", 2),
        ("git --no-pager -c x=y whatchanged", 3),
        ("git stash show -p", 1),
    ] {
        assert_eq!(
            cmd(command).inject_after,
            vec![(at, no_ext.clone())],
            "{command}"
        );
    }
    assert_eq!(
        cmd("git blame f").inject_after,
        vec![(0, vec!["--no-textconv".to_owned()])]
    );
    // Where the place is not certain, nothing is inserted: diff.external stays empty.
    assert!(cmd("git stash -q show").inject_after.is_empty());
    assert!(cmd("git status").inject_after.is_empty());
}
