//! Tools turned into a shell or led outside the jail (the round-2 rule holes), end to end,
//! one test per class: each spelling the review
//! reproduced is refused over a real MCP session (POLICY_DENIED or PATH_ESCAPE), its marker
//! file never appears and the outside secret never shows in the output; the everyday form
//! beside it still runs; and where the payload is cheap to run, an opted-in control shows
//! that it really works.
//!
//! A tool missing on this machine (or on the server's PATH) skips its test with a reason.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::support::{Sandbox, Session, reason_of};

/// Every tool these tests name, beside the default allowlist.
const EXTRA_ALLOW: &[&str] = &[
    "zip", "unzip", "ssh", "scp", "sftp", "man", "tar", "sort", "find", "rg", "cp", "awk", "mawk",
    "gawk", "printf",
];

/// Text that lives outside the jail; no output may ever contain it.
const SECRET: &str = "TOPSECRET-round2";

fn sandbox(rules: &str) -> Sandbox {
    Sandbox::builder()
        .allow_more(EXTRA_ALLOW)
        .roomy(10)
        .extra(rules)
        .build()
}

/// Whether `tool` is on the server's default PATH, where the server would find it.
fn have(tool: &str) -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|dir| Path::new(dir).join(tool).is_file())
}

/// Skips the calling test (returns false) when a tool it needs is missing.
fn tools_present(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        super::support::skip(format!(
            "skipping {test}: {} not installed",
            missing.join(", ")
        ));
        return false;
    }
    true
}

/// The default [`sandbox`] for the calling test, which needs `tools`; `None` (the test
/// skipped, saying why) when one is missing.
fn sandbox_if(tools: &[&str]) -> Option<Sandbox> {
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    let test = test.rsplit("::").next().unwrap_or_default().to_owned();
    tools_present(&test, tools).then(|| sandbox(""))
}

/// Writes the secret beside the jail (in the sandbox's base directory), returns its path.
fn plant_secret(sb: &Sandbox) -> std::path::PathBuf {
    let secret = sb.base().join("secret.txt");
    std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
    secret
}

/// Asserts that `command` is refused with `code` and leaves none of `markers` in the jail
/// or beside it, nor the secret in its output.
async fn assert_refused(s: &Session, sb: &Sandbox, command: &str, code: &str, markers: &[&str]) {
    let r = s.run_expecting(command, code).await;
    assert_no_secret(&r, command);
    for marker in markers {
        assert!(!sb.jail.join(marker).exists(), "{command} created {marker}");
        assert!(
            !sb.base().join(marker).exists(),
            "{command} created ../{marker}"
        );
    }
}

fn assert_no_secret(r: &Value, command: &str) {
    assert!(
        !r.to_string().contains(SECRET),
        "{command} showed the outside secret: {r}"
    );
}

/// Asserts that the policy let `command` run (whatever its exit code).
async fn assert_runs(s: &Session, command: &str) -> Value {
    let r = s.run(command).await;
    assert_eq!(r["code"], "OK", "{command} must stay allowed: {r}");
    r
}

use super::support::host_git as git;

/// What `git` prints in `dir` (the test's own view, outside the server).
fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Class 1: zip reads `TT` as one option wherever it sits in a bundle.
#[tokio::test(flavor = "multi_thread")]
async fn zip_unzip_command_hidden_in_a_bundle_never_runs() {
    let Some(sb) = sandbox_if(&["zip"]) else {
        return;
    };
    let s = sb.session().await;
    for (command, marker) in [
        ("zip -T -qTT 'touch m-zip1' a.zip notes.txt", "m-zip1"),
        ("zip -TqTT 'touch m-zip2' b.zip notes.txt", "m-zip2"),
        ("zip -T -qTT'touch m-zip3' c.zip notes.txt", "m-zip3"),
        (
            "zip -T --unzip-command='touch m-zip4' d.zip notes.txt",
            "m-zip4",
        ),
    ] {
        assert_refused(&s, &sb, command, "POLICY_DENIED", &[marker]).await;
    }
    // The everyday form runs, with `-y` injected: a link is stored as a link, never as the
    // outside file it points to.
    plant_secret(&sb);
    std::os::unix::fs::symlink("../../secret.txt", sb.jail.join("sub/link")).unwrap();
    let e = s.explain("zip -r out.zip sub").await;
    let run = e["detail"]["stages"][0]["run_argv"].as_array().unwrap();
    assert_eq!(run[1], "-y", "{e}");
    let r = assert_runs(&s, "zip -qr out.zip sub").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    let archive = std::fs::read(sb.jail.join("out.zip")).unwrap();
    assert!(
        !String::from_utf8_lossy(&archive).contains(SECRET),
        "the archive holds the outside file"
    );
}

/// Class 1, control: the same payload runs when the operator opts that escape in.
#[tokio::test(flavor = "multi_thread")]
async fn zip_unzip_command_runs_when_opted_in() {
    if !tools_present("zip_unzip_command_runs_when_opted_in", &["zip"]) {
        return;
    }
    let sb =
        sandbox("[[terminal.rules]]\ncommand = \"zip\"\nallow_escapes = [\"--unzip-command\"]\n");
    let s = sb.session().await;
    let r = s.run("zip -T -qTT 'touch m-zip-ctl' a.zip notes.txt").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(
        sb.jail.join("m-zip-ctl").exists(),
        "the control shows the payload works when allowed: {r}"
    );
}

/// Class 2: ssh's `-o` keywords are case-insensitive, may be quoted, may follow blanks or
/// `=`, and options after the destination count too; scp and sftp pass them to ssh.
#[tokio::test(flavor = "multi_thread")]
async fn ssh_option_keywords_in_every_spelling_never_run() {
    let Some(sb) = sandbox_if(&["ssh"]) else {
        return;
    };
    let s = sb.session().await;
    let mut cases = vec![
        ("ssh -o '\"ProxyCommand\"=touch m-ssh1' h", "m-ssh1"),
        ("ssh -o 'ProxyCommand touch m-ssh2' h", "m-ssh2"),
        ("ssh -oProxyCommand='touch m-ssh3' h", "m-ssh3"),
        ("ssh -o 'proxycommand=touch m-ssh4' h", "m-ssh4"),
        ("ssh -o '  ProxyCommand=touch m-ssh5' h", "m-ssh5"),
        ("ssh -o 'Proxy\"Command\"=touch m-ssh6' h", "m-ssh6"),
        ("ssh -o '=ProxyCommand=touch m-ssh7' h", "m-ssh7"),
        ("ssh h -o 'ProxyCommand=touch m-ssh8'", "m-ssh8"),
        (
            "ssh -o 'LocalCommand=touch m-ssh9' -o 'PermitLocalCommand yes' h",
            "m-ssh9",
        ),
        ("ssh -o 'KnownHostsCommand=touch m-ssh10' h", "m-ssh10"),
    ];
    if have("scp") {
        cases.push((
            "scp -o '\"ProxyCommand\"=touch m-scp1' notes.txt h:",
            "m-scp1",
        ));
        cases.push(("scp -D /usr/bin/touch notes.txt h:m-scp2", "m-scp2"));
    }
    if have("sftp") {
        cases.push(("sftp -o 'proxycommand touch m-sftp1' h", "m-sftp1"));
        cases.push(("sftp -D 'touch m-sftp2' h", "m-sftp2"));
    }
    for (command, marker) in cases {
        assert_refused(&s, &sb, command, "POLICY_DENIED", &[marker]).await;
    }
    let r = s.run("ssh -o 'ProxyCommand touch m' h").await;
    assert!(
        reason_of(&r).contains("proxycommand"),
        "the reason names the keyword: {r}"
    );
}

/// Class 3: difftool and mergetool run the tool that options or the repository's own config
/// choose; `git help` runs the man viewer that config names.
#[tokio::test(flavor = "multi_thread")]
async fn git_tools_chosen_by_repository_config_never_run() {
    let Some(sb) = sandbox_if(&["git"]) else {
        return;
    };
    repo_with_planted_tools(&sb);
    let s = sb.session().await;
    for (command, marker) in [
        ("git difftool -y", "m-difftool"),
        ("git difftool -y -t evil", "m-difftool"),
        ("git difftool -y --tool=vimdiff", "m-difftool"),
        ("git difftool -y -x 'touch m-extcmd'", "m-extcmd"),
        ("git mergetool -y", "m-mergetool"),
        ("git help status", "m-help"),
        ("git status --help", "m-help"),
        ("git --help log", "m-help"),
    ] {
        assert_refused(&s, &sb, command, "POLICY_DENIED", &[marker]).await;
    }
    let r = assert_runs(&s, "git diff --stat").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert_runs(&s, "git help -a").await;
}

/// A repository in the jail whose config (writable by the model) names a difftool, a
/// mergetool and a man viewer that touch markers, with an uncommitted change.
fn repo_with_planted_tools(sb: &Sandbox) {
    git(&sb.jail, &["init", "-q"]);
    git(&sb.jail, &["add", "notes.txt"]);
    git(&sb.jail, &["commit", "-qm", "first"]);
    let config = sb.jail.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "[diff]\n\ttool = evil\n[difftool \"evil\"]\n\tcmd = touch m-difftool\n\
         [merge]\n\ttool = evil\n[mergetool \"evil\"]\n\tcmd = touch m-mergetool\n\
         [man]\n\tviewer = evil\n[man \"evil\"]\n\tcmd = touch m-help\n",
    );
    std::fs::write(&config, text).unwrap();
    sb.write_in_jail("notes.txt", "alpha\nbeta\ngamma\ndelta\n");
}

/// Class 4: a manual page given as a file is a path, and man never reads a user config.
#[tokio::test(flavor = "multi_thread")]
async fn man_pages_outside_the_jail_and_user_configs_are_refused() {
    let Some(sb) = sandbox_if(&["man"]) else {
        return;
    };
    let page = ".TH X 1\n.SH NAME\nx \\- a page\n";
    std::fs::write(sb.base().join("outside.1"), format!("{page}{SECRET}\n")).unwrap();
    sb.write_in_jail("inside.1", page);
    // A planted user config whose DEFINE names the formatter.
    sb.write_in_jail(
        ".manpath",
        "DEFINE nroff touch m-man\nDEFINE tbl touch m-man\n",
    );
    let s = sb.session().await;
    let outside = sb.base().join("outside.1");
    let outside = outside.to_str().unwrap();
    for (command, code) in [
        ("man ../outside.1".to_owned(), "PATH_ESCAPE"),
        (format!("man -l {outside}"), "PATH_ESCAPE"),
        ("man --local-file ../outside.1".to_owned(), "PATH_ESCAPE"),
        ("man -M .. x".to_owned(), "PATH_ESCAPE"),
        ("man -C .manpath -l inside.1".to_owned(), "POLICY_DENIED"),
    ] {
        assert_refused(&s, &sb, &command, code, &["m-man"]).await;
    }
    // The everyday forms run (their output depends on man-db inside the sandbox), and every
    // one of them gets `-C /dev/null`.
    // man starts its formatters (the exec allowlist's known helpers for man).
    let r = assert_runs(&s, "man -l inside.1").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(r["detail"].get("not_executable").is_none(), "{r}");
    assert!(!sb.jail.join("m-man").exists());
    let e = s.explain("man ls").await;
    let run = e["detail"]["stages"][0]["run_argv"].as_array().unwrap();
    assert_eq!(run[1..3], [json!("-C"), json!("/dev/null")], "{e}");
}

/// Class 5: every forcing spelling of `git push` meets the operator's `push --force` rule
/// (the sandbox's policy denies `push --force` and `push -f`), and the remote is unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn every_forcing_push_is_denied_by_the_force_rule() {
    let Some(sb) = sandbox_if(&["git"]) else {
        return;
    };
    git(&sb.jail, &["init", "-q", "--bare", "remote.git"]);
    let work = sb.jail.join("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("f"), "one\n").unwrap();
    git(&work, &["add", "f"]);
    git(&work, &["commit", "-qm", "one"]);
    git(&work, &["remote", "add", "origin", "../remote.git"]);
    git(&work, &["push", "-q", "origin", "main"]);
    let remote_main = || git_out(&sb.jail, &["--git-dir=remote.git", "rev-parse", "main"]);
    let before = remote_main();
    assert_eq!(before.len(), 40, "the remote has main: {before:?}");
    // Rewrite the local history, so that only a forced push could land it.
    std::fs::write(work.join("f"), "rewritten\n").unwrap();
    git(&work, &["commit", "-q", "--amend", "-am", "rewritten"]);
    let s = sb.session().await;
    for command in [
        "git -C work push --force-with-lease origin main",
        "git -C work push --force-with-lease=main:HEAD~0 origin main",
        "git -C work push --force-w origin main",
        "git -C work push --force-if-includes --force-with-lease origin main",
        "git -C work push origin +main",
        "git -C work push --force origin main",
    ] {
        let r = s.run_expecting(command, "POLICY_DENIED").await;
        assert_eq!(r["detail"]["rule"], "rules[0]", "{command}: {r}");
        assert_eq!(remote_main(), before, "{command} landed");
    }
    // A plain push is allowed (the remote refuses the non-fast-forward on its own).
    assert_runs(&s, "git -C work push origin main").await;
    assert_eq!(remote_main(), before);
}

/// Class 6: tar members never land outside the jail and links are never followed.
#[tokio::test(flavor = "multi_thread")]
async fn tar_never_writes_outside_or_follows_links() {
    let Some(sb) = sandbox_if(&["tar"]) else {
        return;
    };
    // An archive whose member has an absolute name beside the jail, made outside the server.
    let target = sb.base().join("m-tar-abs");
    std::fs::write(&target, "x\n").unwrap();
    let st = Command::new("tar")
        .arg("-cPf")
        .arg(sb.jail.join("abs.tar"))
        .arg(&target)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::remove_file(&target).unwrap();
    let st = Command::new("tar")
        .arg("-cf")
        .arg(sb.jail.join("plain.tar"))
        .arg("notes.txt")
        .current_dir(&sb.jail)
        .status()
        .unwrap();
    assert!(st.success());
    plant_secret(&sb);
    std::os::unix::fs::symlink("../../secret.txt", sb.jail.join("sub/link")).unwrap();
    let s = sb.session().await;
    for command in [
        "tar -xPf abs.tar",
        "tar xPf abs.tar",
        "tar -xf abs.tar --absolute-names",
        "tar -xf plain.tar --transform 's,^,../m-tar-,'",
        "tar -xf plain.tar --xform=s,^,../m-tar-,",
        "tar -chf m-tar-deref.tar sub",
        "tar chf m-tar-deref.tar sub",
    ] {
        assert_refused(
            &s,
            &sb,
            command,
            "POLICY_DENIED",
            &["m-tar-abs", "m-tar-notes.txt", "m-tar-deref.tar"],
        )
        .await;
    }
    assert!(
        !target.exists(),
        "an absolute member landed outside the jail"
    );
    // The everyday forms run: create, list (a rename in a listing is harmless), extract.
    let r = assert_runs(&s, "tar cf out.tar sub").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(
        !String::from_utf8_lossy(&std::fs::read(sb.jail.join("out.tar")).unwrap()).contains(SECRET),
        "the link was archived as a link"
    );
    assert_runs(&s, "tar -tf plain.tar --transform s,notes,n,").await;
    std::fs::create_dir(sb.jail.join("x")).unwrap();
    let r = assert_runs(&s, "tar xf plain.tar -C x").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(sb.jail.join("x/notes.txt").exists());
}

/// Class 7: a list of names read from stdin is refused; a list file is a path, and the
/// names inside it are contained by the kernel.
#[tokio::test(flavor = "multi_thread")]
async fn lists_of_names_from_stdin_are_refused() {
    let Some(sb) = sandbox_if(&["sort", "tar", "printf"]) else {
        return;
    };
    let secret = plant_secret(&sb);
    let secret = secret.to_str().unwrap();
    let s = sb.session().await;
    let mut cases = vec![
        (
            format!("printf '{secret}\\0' | sort --files0-from=-"),
            "POLICY_DENIED",
        ),
        (
            format!("printf '{secret}\\0' | sort --files0-from -"),
            "POLICY_DENIED",
        ),
        (
            format!("printf '{secret}\\0' | wc --files0-from=-"),
            "POLICY_DENIED",
        ),
        (
            format!("printf '{secret}\\n' | tar -cf m-list.tar -T -"),
            "POLICY_DENIED",
        ),
        (
            format!("printf '{secret}\\n' | tar -c --files-from=- -f m-list.tar"),
            "POLICY_DENIED",
        ),
        ("sort --files0-from=../secret.txt".to_owned(), "PATH_ESCAPE"),
        (
            "tar -cf m-list.tar -T ../secret.txt".to_owned(),
            "PATH_ESCAPE",
        ),
    ];
    if have("zip") {
        cases.push((
            format!("printf '{secret}\\n' | zip -@ m-list.zip"),
            "POLICY_DENIED",
        ));
    }
    if have("git") {
        git(&sb.jail, &["init", "-q"]);
        cases.push((
            format!("printf '{secret}\\n' | git hash-object --stdin-paths"),
            "POLICY_DENIED",
        ));
    }
    for (command, code) in &cases {
        assert_refused(&s, &sb, command, code, &["m-list.tar", "m-list.zip"]).await;
    }
    // A list file in the jail is allowed; the outside name in it is the kernel's to refuse.
    sb.write_in_jail("names0", format!("notes.txt\0{secret}\0"));
    let r = assert_runs(&s, "sort --files0-from=names0").await;
    assert_no_secret(&r, "sort --files0-from=names0");
    // sort reads every input before it prints: the outside name (absent in the private
    // view, refused by Landlock in the host view) fails the whole call.
    assert_ne!(r["detail"]["exit_code"], 0, "{r}");
    assert_runs(&s, "sort notes.txt").await;
}

/// Class 8: walks that follow symbolic links out of the jail are refused with the form that
/// does not follow them, which stays allowed.
#[tokio::test(flavor = "multi_thread")]
async fn tree_walks_never_follow_links_out_of_the_jail() {
    let Some(sb) = sandbox_if(&["grep", "find", "cp"]) else {
        return;
    };
    let outside = sb.base().join("outside-dir");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::os::unix::fs::symlink("../../outside-dir", sb.jail.join("sub/out")).unwrap();
    let s = sb.session().await;
    let mut cases = vec![
        "grep -R TOPSECRET sub",
        "grep -rnR TOPSECRET sub",
        "grep --dereference-recursive TOPSECRET sub",
        "find -L sub -name secret.txt",
        "find sub -follow -name secret.txt",
        "cp -rL sub m-copy",
        "cp -r -H sub m-copy",
        "cp -a --dereference sub m-copy",
    ];
    if have("rg") {
        cases.extend(["rg -L TOPSECRET sub", "rg --follow TOPSECRET sub"]);
    }
    for command in cases {
        let r = s.run_expecting(command, "POLICY_DENIED").await;
        assert_no_secret(&r, command);
        assert!(!sb.jail.join("m-copy").exists(), "{command} copied");
    }
    let r = s.run("grep -R TOPSECRET sub").await;
    assert!(reason_of(&r).contains("grep -r"), "{r}");
    // The non-following forms run and do not reach outside.
    let r = assert_runs(&s, "grep -r TOPSECRET sub").await;
    assert_no_secret(&r, "grep -r");
    let r = assert_runs(&s, "find sub -name secret.txt").await;
    let found = r["detail"]["stdout"].as_str().unwrap_or("");
    assert!(!found.contains("secret.txt"), "find followed the link: {r}");
    let r = assert_runs(&s, "cp -r sub copy").await;
    assert_eq!(r["detail"]["exit_code"], 0, "{r}");
    assert!(
        std::fs::symlink_metadata(sb.jail.join("copy/out"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "cp -r copies the link as a link"
    );
}

/// Class 9: awk reads no file the policy did not check: an operand with `=` is a file unless
/// a variable name precedes the `=`; `@include`, `@load`, ARGV and `-W exec` are refused.
#[tokio::test(flavor = "multi_thread")]
async fn awk_reads_no_unchecked_file() {
    let Some(sb) = sandbox_if(&["awk"]) else {
        return;
    };
    plant_secret(&sb);
    std::fs::create_dir(sb.jail.join("a=b")).unwrap();
    sb.write_in_jail("p.awk", "BEGIN { system(\"touch m-awk-exec\") }\n");
    let s = sb.session().await;
    let mut cases = vec![
        ("awk '{print}' ./a=b/../../secret.txt", "PATH_ESCAPE"),
        ("awk '{print}' x=1 ./a=b/../../secret.txt", "PATH_ESCAPE"),
        ("awk '@include \"../secret.txt\"'", "POLICY_DENIED"),
        ("awk '@include \"p.awk\"'", "POLICY_DENIED"),
        ("awk '@load \"filefuncs\"' notes.txt", "POLICY_DENIED"),
        ("awk -W exec p.awk", "POLICY_DENIED"),
        ("awk -We p.awk", "POLICY_DENIED"),
        ("awk -f p.awk", "POLICY_DENIED"),
    ];
    if have("mawk") {
        cases.push((
            "mawk 'BEGIN{ARGV[1]=\"../secret.txt\"; ARGC=2}{print}'",
            "POLICY_DENIED",
        ));
        cases.push(("mawk -W exec p.awk", "POLICY_DENIED"));
    }
    for (command, code) in cases {
        assert_refused(&s, &sb, command, code, &["m-awk-exec"]).await;
    }
    // gawk refuses a new ARGV file itself (its sandbox is injected); either way no secret.
    let r = s
        .run("awk 'BEGIN{ARGV[1]=\"../secret.txt\"; ARGC=2}{print}'")
        .await;
    assert_no_secret(&r, "awk ARGV");
    // Assignments and files inside the jail stay allowed.
    let r = assert_runs(&s, "awk '{print n $1}' n=x notes.txt").await;
    assert_eq!(r["detail"]["stdout"], "xalpha\nxbeta\nxgamma\n", "{r}");
}
