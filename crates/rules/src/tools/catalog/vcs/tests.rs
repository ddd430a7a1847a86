//! Unit tests of git's facts: the global options and subcommands that are escapes, the
//! short spellings that mean one under one subcommand only, the paths, the injected
//! hardening, and the pushes that imply `--force`.
//!
//! Owns nothing but tests; the facts they pin are in the parent module.

use super::super::testing::{cmd, escapes, generic};
use super::*;

/// Every case in `cases/vcs.txt`.
#[test]
fn cases() {
    super::super::testing::check_cases("vcs.txt", include_str!("../cases/vcs.txt"));
}

#[test]
fn subcommand_options_that_run_programs() {
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
    for command in [
        "git help -a",
        "git help --all",
        "git help -g",
        "git help --config",
    ] {
        assert!(escapes(command).is_empty(), "{command}");
    }
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
fn subcommands_that_are_escapes_in_themselves() {
    let insp = cmd("git submodule foreach CMD");
    assert_eq!(
        insp.escapes[0].reason,
        "`git submodule foreach` runs a command of the caller's choosing"
    );
}

#[test]
fn an_unknown_subcommand_is_an_alias_or_a_git_program() {
    let insp = cmd("git frobnicate --now");
    assert!(insp.escapes[0].reason.contains("not a built-in"));
    assert!(insp.escapes[0].reason.contains("git-frobnicate"));
    for sub in ["status", "log", "push", "commit", "worktree", "difftool"] {
        assert!(
            !escapes(&format!("git {sub}")).contains(&"alias".to_owned()),
            "{sub}"
        );
    }
}

#[test]
fn every_word_after_the_subcommand_keeps_the_generic_check() {
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
