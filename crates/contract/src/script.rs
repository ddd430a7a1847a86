//! A script's `#!` line, read the one way the core (which names a refused interpreter) and
//! the executor (which grants the interpreter execute) both need.

use std::path::PathBuf;

/// The interpreter a `#!` line names (`line` is what follows `#!`, up to the end of the
/// line or of the bytes given), and for `/usr/bin/env [-opts] NAME` also the `NAME` that
/// `env` looks for on the PATH.
pub fn shebang(line: &[u8]) -> Option<(PathBuf, Option<String>)> {
    let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    let name = interpreter
        .file_name()
        .is_some_and(|n| n == "env")
        .then(|| words.find(|w| !w.starts_with('-')).map(str::to_owned))
        .flatten();
    Some((interpreter, name))
}

#[cfg(test)]
mod tests {
    use super::shebang;
    use std::path::PathBuf;

    #[test]
    fn an_interpreter_and_what_env_looks_for() {
        assert_eq!(
            shebang(b"/bin/sh -e\nexec gzip"),
            Some((PathBuf::from("/bin/sh"), None))
        );
        assert_eq!(
            shebang(b"/usr/bin/env -S node --x\n"),
            Some((PathBuf::from("/usr/bin/env"), Some("node".into())))
        );
        assert_eq!(shebang(b"   \n"), None);
    }
}
