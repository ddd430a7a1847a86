//! The session table and a session's reads, without a process: output fed by hand.
use super::*;
use crate::config::RedactionSettings;

/// A redactor with the built-in patterns (the screen's tests use it too).
pub(super) fn redactor() -> Redactor {
    Redactor::new(&RedactionSettings {
        enabled: true,
        entropy_fallback: false,
        extra_patterns: Vec::new(),
    })
    .unwrap()
}

const FOUR: Capacity = Capacity {
    total: 4,
    per_caller: 4,
};

/// A session of `owner` and `caller` in `table`, running `x`, buffering `buffer` bytes.
fn open(
    table: &SessionTable,
    (owner, caller): (&str, &str),
    buffer: usize,
    capacity: Capacity,
) -> Result<Arc<Session>, CreateError> {
    let bounds = Bounds::buffer(buffer);
    table.create(
        owner,
        caller,
        "x".into(),
        CallId::new("1"),
        bounds,
        capacity,
    )
}

#[test]
fn the_limits_count_in_all_and_per_caller() {
    let table = SessionTable::default();
    let capacity = Capacity {
        total: 3,
        per_caller: 2,
    };
    let start = |caller: &str| open(&table, ("conn", caller), 64, capacity);
    assert!(start("alice").is_ok() && start("alice").is_ok());
    assert_eq!(start("alice").err(), Some(CreateError::FullForCaller));
    assert_eq!(table.room("bob", capacity), Ok(()));
    assert!(start("bob").is_ok());
    assert_eq!(start("carol").err(), Some(CreateError::Full));
    assert_eq!(table.room("carol", capacity), Err(CreateError::Full));
    // Nobody (no authentication) is counted in all only.
    let table = SessionTable::default();
    let anonymous = || open(&table, ("conn", ""), 64, capacity);
    assert!(anonymous().is_ok() && anonymous().is_ok() && anonymous().is_ok());
    assert_eq!(anonymous().err(), Some(CreateError::Full));
}

#[test]
fn reads_hand_out_whole_lines_and_hold_a_partial_one_until_quiet() {
    let table = SessionTable::default();
    let s = open(&table, ("me", ""), 64, FOUR).unwrap();
    s.output(OutputStream::Stdout, b"one\ntwo ghp_0123");
    let r = s.read(&redactor(), 1 << 20);
    assert_eq!(r.stdout, "one\n");
    s.output(OutputStream::Stdout, b"456789abcdefghijklmnopqrstuvwxyz\n");
    let r = s.read(&redactor(), 1 << 20);
    assert!(
        r.stdout.starts_with("two ") && !r.stdout.contains("ghp_0123"),
        "{}",
        r.stdout
    );
    s.output(OutputStream::Stdout, b">>> ");
    assert_eq!(s.read(&redactor(), 1 << 20).stdout, "");
    std::thread::sleep(QUIET + Duration::from_millis(50));
    assert_eq!(s.read(&redactor(), 1 << 20).stdout, ">>> ");
    // Over twice the buffer: the oldest lines go, whole, and are counted.
    s.output(
        OutputStream::Stderr,
        format!("{}\nkept\n", "x".repeat(200)).as_bytes(),
    );
    let r = s.read(&redactor(), 1 << 20);
    assert_eq!((r.stderr.as_str(), r.dropped_bytes), ("kept\n", 201));
    // A read takes at most its limit, cut after a newline, and says there is more.
    s.output(OutputStream::Stdout, b"aaaa\nbbbb\ncccc\n");
    let r = s.read(&redactor(), 11);
    assert_eq!((r.stdout.as_str(), r.more), ("aaaa\nbbbb\n", true));
    assert_eq!(s.read(&redactor(), 11).stdout, "cccc\n");
    assert!(table.get(&s.handle, "someone else").is_err());
    assert_eq!(s.handle.len(), 32);
}

/// Round 3, item 14: a secret printed in two parts, a pause of more than QUIET apart,
/// never comes back whole: the token a quiet line ends in waits, and the next read
/// judges the join.
#[test]
fn a_secret_in_two_writes_is_judged_at_the_join() {
    let table = SessionTable::default();
    let s = open(&table, ("me", ""), 1 << 16, FOUR).unwrap();
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    s.output(
        OutputStream::Stdout,
        format!("token {}", &secret[..14]).as_bytes(),
    );
    std::thread::sleep(QUIET + Duration::from_millis(50));
    let first = s.read(&redactor(), 1 << 20).stdout;
    assert_eq!(first, "token ", "the trailing token waits");
    std::thread::sleep(2 * QUIET);
    s.output(
        OutputStream::Stdout,
        format!("{}\n", &secret[14..]).as_bytes(),
    );
    let second = s.read(&redactor(), 1 << 20).stdout;
    let both = format!("{first}{second}");
    assert!(
        !both.contains(&secret[..12]) && !both.contains(&secret[20..]),
        "{both}"
    );
    // A key and its value in two writes, the value alone not a secret's shape.
    s.output(OutputStream::Stdout, b"password = ");
    std::thread::sleep(QUIET + Duration::from_millis(50));
    let key = s.read(&redactor(), 1 << 20).stdout;
    assert_eq!(key, "password = ");
    s.output(OutputStream::Stdout, b"hunter2hunter2\n");
    let value = s.read(&redactor(), 1 << 20).stdout;
    assert!(!value.contains("hunter2"), "{value}");
}

#[test]
fn a_handle_names_its_server_and_another_server_says_whose_it_is() {
    let (a, b) = (
        SessionTable::for_server("replica-a".into()),
        SessionTable::for_server("replica-b".into()),
    );
    let capacity = Capacity {
        total: 4,
        per_caller: 4,
    };
    let s = a
        .create(
            "o",
            "",
            "sleep 1".into(),
            CallId::new("1-1"),
            Bounds::buffer(64),
            capacity,
        )
        .unwrap();
    assert!(s.handle.ends_with("@replica-a"), "{}", s.handle);
    assert!(a.get(&s.handle, "o").is_ok());
    assert_eq!(
        b.get(&s.handle, "o").err(),
        Some(HandleError::Elsewhere("replica-a".into()))
    );
    assert_eq!(b.get("f00d", "o").err(), Some(HandleError::Unknown));
}
