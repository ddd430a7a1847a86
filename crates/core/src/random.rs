//! Names nobody can guess: random bytes from the kernel, in hex.
//!
//! A leaf: it imports nothing of this crate. Used for the commands' HOME, session handles
//! and a connection's owner id.

/// `bytes` random bytes from `/dev/urandom`, as lowercase hex.
pub fn hex(bytes: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}
