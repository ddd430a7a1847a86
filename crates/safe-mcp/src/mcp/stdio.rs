//! The MCP session's stdin and stdout, as non-blocking pipes when they are pipes.
//!
//! `rmcp::transport::stdio()` uses tokio's stdin and stdout, which hand every read and every
//! write to a blocking thread: two extra thread wake-ups per request, about as long as the
//! rest of an `explain_command` on this machine kind. When both ends are pipes (how most MCP
//! clients start a server), we read and write them through the runtime's epoll instead.
//! Each end is re-opened through `/proc/self/fd`, which gives us our own open file
//! description, so `O_NONBLOCK` is never set on one the client might share. Anything else
//! (a terminal, a socket pair, a file) keeps tokio's stdio.
//!
//! Either way the messages go through [`LineTransport`], our newline-delimited JSON-RPC
//! framing, which answers a line that cannot be a message instead of dropping it.

use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use tokio::net::unix::pipe::{Receiver, Sender};

/// Both ends as epoll-driven pipes, or `None` when either is not a pipe.
pub fn pipes() -> Option<(Receiver, Sender)> {
    let is_fifo = |fd: &str| {
        std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok_and(|m| m.file_type().is_fifo())
    };
    if !is_fifo("0") || !is_fifo("1") {
        return None;
    }
    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let input = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open("/proc/self/fd/0")
        .ok()?;
    let output = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nonblocking)
        .open("/proc/self/fd/1")
        .ok()?;
    Some((
        Receiver::from_file(input).ok()?,
        Sender::from_file(output).ok()?,
    ))
}

/// The longest message accepted, as rmcp's own stdio transport has it.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// The longest error message sent back about a bad line.
const MAX_ERROR_CHARS: usize = 200;

/// Newline-delimited JSON-RPC over a byte stream, answering what cannot be a message.
///
/// rmcp's stdio transport drops a line that is not JSON (or not UTF-8, or holds a lone
/// surrogate, or nests too deeply) and one over 16 MiB without a word, so a client waits for
/// an answer that never comes. Here such a line gets the error JSON-RPC names for it, with
/// `id: null` and a bounded message: `-32700` (parse error) for a line that is not JSON, and
/// `-32600` (invalid request) for one that is too long or is JSON but not a message (with
/// its `id` when it has one). A notification nobody knows is ignored, as JSON-RPC requires.
/// The server stays up either way.
pub struct LineTransport<R> {
    reader: tokio::io::BufReader<R>,
    /// The line read so far; kept across a cancelled `receive`, which the service loop does.
    line: Vec<u8>,
    /// The rest of a line longer than the limit is being skipped.
    skipping: bool,
    writer: std::sync::Arc<tokio::sync::Mutex<Box<dyn tokio::io::AsyncWrite + Send + Unpin>>>,
}

impl<R: tokio::io::AsyncRead + Send + Unpin> LineTransport<R> {
    /// A transport reading `reader` and writing `writer`.
    pub fn new(reader: R, writer: impl tokio::io::AsyncWrite + Send + Unpin + 'static) -> Self {
        LineTransport {
            reader: tokio::io::BufReader::new(reader),
            line: Vec::new(),
            skipping: false,
            writer: std::sync::Arc::new(tokio::sync::Mutex::new(Box::new(writer))),
        }
    }

    /// Sends the JSON-RPC error `code` for `id` as one whole line, under the writer's lock
    /// and off the read path, so that a cancelled `receive` cannot cut it short.
    fn answer(&self, id: serde_json::Value, code: i64, message: String) {
        let message: String = message.chars().take(MAX_ERROR_CHARS).collect();
        let reply = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        });
        let mut bytes = reply.to_string().into_bytes();
        bytes.push(b'\n');
        let writer = std::sync::Arc::clone(&self.writer);
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let mut w = writer.lock().await;
            if w.write_all(&bytes).await.is_ok() {
                let _ = w.flush().await;
            }
        });
    }

    /// Reads into `self.line` until a newline. `Ok(false)` at end of input.
    async fn read_line(&mut self) -> std::io::Result<bool> {
        use tokio::io::AsyncBufReadExt;
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                return Ok(false);
            }
            let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if !self.skipping {
                if self.line.len() + chunk.len() > MAX_LINE_BYTES {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            let used = done.unwrap_or(buf.len());
            self.reader.consume(used);
            if done.is_some() {
                return Ok(true);
            }
        }
    }
}

impl<R: tokio::io::AsyncRead + Send + Unpin> rmcp::transport::Transport<rmcp::RoleServer>
    for LineTransport<R>
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<rmcp::RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = std::sync::Arc::clone(&self.writer);
        async move {
            use tokio::io::AsyncWriteExt;
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut w = writer.lock().await;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<rmcp::RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    eprintln!("safe-mcp: cannot read the MCP stream: {e}");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            if std::mem::take(&mut self.skipping) {
                self.answer(
                    serde_json::Value::Null,
                    -32600,
                    format!("Invalid Request: the message is longer than {MAX_LINE_BYTES} bytes"),
                );
                continue;
            }
            let mut bytes = line.as_slice();
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice(bytes) {
                Ok(message) => return Some(message),
                Err(e) => match serde_json::from_slice::<serde_json::Value>(bytes) {
                    Err(parse) => self.answer(
                        serde_json::Value::Null,
                        -32700,
                        format!("Parse error: {parse}"),
                    ),
                    Ok(value) => {
                        let id = value.get("id").cloned();
                        let notification = id.is_none() && value.get("method").is_some();
                        if !notification {
                            self.answer(
                                id.unwrap_or(serde_json::Value::Null),
                                -32600,
                                format!("Invalid Request: {e}"),
                            );
                        }
                    }
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        use tokio::io::AsyncWriteExt;
        self.writer.lock().await.shutdown().await
    }
}
