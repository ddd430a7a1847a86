//! Scopes judged with plain values: what a shape covers, what it never takes, and a
//! preview that says exactly that.
use super::*;

fn git() -> PathBuf {
    PathBuf::from("/usr/bin/git")
}

fn argv(words: &str) -> Vec<String> {
    words.split(' ').map(str::to_owned).collect()
}

fn covers(shape: &Shape, words: &str, cwd: &str) -> bool {
    let stages = [(git(), argv(words))];
    shape.covers(&Call::Command {
        tool: "run_command",
        stages: &stages,
        cwd: Path::new(cwd),
    })
}

fn push_shape(free: &[usize]) -> Shape {
    let stages = [(git(), argv("git push origin main"))];
    let call = Call::Command {
        tool: "run_command",
        stages: &stages,
        cwd: Path::new("/j/proj"),
    };
    Shape::of(&call, free).unwrap()
}

#[test]
fn an_exact_shape_covers_the_same_command_beneath_its_cwd_only() {
    let s = push_shape(&[]);
    assert!(covers(&s, "git push origin main", "/j/proj"));
    assert!(covers(&s, "git push origin main", "/j/proj/sub"));
    for (words, cwd) in [
        ("git push origin feature", "/j/proj"),
        ("git push origin main --force", "/j/proj"),
        ("git push upstream main", "/j/proj"),
        ("git push origin main", "/j"),
        ("git push origin main", "/j/projx"),
    ] {
        assert!(!covers(&s, words, cwd), "{words} in {cwd}");
    }
    // Another program of the same name, another tool, two stages: never.
    let other = [(PathBuf::from("/tmp/git"), argv("git push origin main"))];
    let cwd = Path::new("/j/proj");
    assert!(!s.covers(&Call::Command {
        tool: "run_command",
        stages: &other,
        cwd
    }));
    let same = [(git(), argv("git push origin main"))];
    assert!(!s.covers(&Call::Command {
        tool: "start_process",
        stages: &same,
        cwd
    }));
    let two = [same[0].clone(), same[0].clone()];
    assert!(!s.covers(&Call::Command {
        tool: "run_command",
        stages: &two,
        cwd
    }));
}

#[test]
fn a_free_place_takes_plain_names_only() {
    let s = push_shape(&[3]);
    for name in ["feature", "feature/x-1.2", "release_2"] {
        assert!(
            covers(&s, &format!("git push origin {name}"), "/j/proj"),
            "{name}"
        );
    }
    for bad in [
        "--force",
        "-f",
        "+main",
        "main:other",
        "../x",
        "/abs",
        ".hidden",
        "a/../b",
        "x;y",
        "dir/",
    ] {
        assert!(
            !covers(&s, &format!("git push origin {bad}"), "/j/proj"),
            "{bad}"
        );
    }
    assert!(!covers(&s, "git push upstream feature", "/j/proj"));
    assert!(!covers(&s, "git push origin feature --force", "/j/proj"));
}

#[test]
fn the_subcommand_and_options_are_never_free() {
    let stages = [(git(), argv("git push --tags origin main"))];
    let call = Call::Command {
        tool: "run_command",
        stages: &stages,
        cwd: Path::new("/j"),
    };
    assert_eq!(Shape::freeable(&call), [3, 4]);
    assert!(matches!(
        Shape::of(&call, &[1]),
        Err(ShapeError::NotFreeable(1, _))
    ));
    assert!(matches!(
        Shape::of(&call, &[2]),
        Err(ShapeError::NotFreeable(2, _))
    ));
    let two = [stages[0].clone(), stages[0].clone()];
    let call = Call::Command {
        tool: "run_command",
        stages: &two,
        cwd: Path::new("/j"),
    };
    assert_eq!(Shape::of(&call, &[]), Err(ShapeError::NotOneProgram(2)));
}

#[test]
fn a_write_scope_is_the_file_or_its_directorys_files_with_its_extension() {
    let path = Path::new("/j/docs/a.md");
    let call = Call::Write {
        tool: "write_file",
        path,
    };
    let exact = Shape::of(&call, &[]).unwrap();
    let glob = Shape::of(&call, &[1]).unwrap();
    fn w(p: &str) -> Call<'_> {
        Call::Write {
            tool: "write_file",
            path: Path::new(p),
        }
    }
    assert!(exact.covers(&w("/j/docs/a.md")) && !exact.covers(&w("/j/docs/b.md")));
    assert!(glob.covers(&w("/j/docs/b.md")));
    for p in [
        "/j/docs/b.sh",
        "/j/docs/sub/b.md",
        "/j/a.md",
        "/j/docs/.x.md",
    ] {
        assert!(!glob.covers(&w(p)), "{p}");
    }
    assert!(!glob.covers(&Call::Write {
        tool: "edit_file",
        path: Path::new("/j/docs/b.md")
    }));
    assert_eq!(glob.describe(Path::new("/j")), "write_file of docs/*.md");
}

/// The preview's examples are the scope's own verdicts, and name what must never pass.
#[test]
fn the_preview_says_what_each_choice_covers() {
    let stages = [(git(), argv("git push origin main"))];
    let call = Call::Command {
        tool: "run_command",
        stages: &stages,
        cwd: Path::new("/j/proj"),
    };
    let life = Lifetimes {
        session_seconds: 8 * 3600,
        rule_seconds: 30 * 86_400,
    };
    let p = Preview::of(&call, Path::new("/j"), life).unwrap();
    assert_eq!(
        p.exact,
        "run_command `git push origin main` in proj or beneath"
    );
    let free = &p.free.iter().find(|f| f.place == 3).unwrap();
    assert_eq!(
        free.shape,
        "run_command `git push origin <any name>` in proj or beneath"
    );
    let shape = push_shape(&[3]);
    for e in &free.examples {
        let words = e.text.split(" (in ").next().unwrap();
        let cwd = if e.text.contains("(in ") {
            "/j"
        } else {
            "/j/proj"
        };
        assert_eq!(covers(&shape, words, cwd), e.covered, "{e:?}");
    }
    let text = p.text();
    for needle in [
        "once: this call only (the default)",
        "until it ends or 8 h",
        "30 days",
        "covers `git push origin main`, `git push origin other`",
        "`git push origin --force`",
        "`git push origin +main`",
        "`git push other main`",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
}
