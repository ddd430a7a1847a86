//! Shipping the trail off the host (DESIGN §12): every record, byte for byte, to OTLP/HTTP
//! JSON logs and to RFC 5424 syslog over TCP, off the call's hot path.
//!
//! The local fsync still gates execution; shipping never does. [`super::AuditLog`] hands each line
//! it wrote to [`Shipper::offer`], which appends it to each sink's spool file
//! (`spool_dir/<sink>-<server>.spool`, one write, no wait) and rings the sink's thread. The
//! thread reads the spool in order, sends batches, makes the spool durable, and records the
//! last seq the sink confirmed (`<sink>-<server>.sent`, fsynced); once everything in the
//! spool was confirmed, the spool is emptied. So memory stays bounded whatever the
//! receiver does (one batch), a receiver that is down or never reads only makes the spool
//! grow, and a server that is killed or restarted replays what was not confirmed, in seq
//! order, skipping what was. A sink that fails:
//! - `on_failure = "spool"`: records wait, and the thread tries again every half second;
//! - `on_failure = "deny"`: the same, and while a sink is down [`Shipper::refusing`] says
//!   why, and the gate refuses new calls (AUDIT_UNAVAILABLE) until it is back.
//!
//! A record the receiver got but whose confirmation was lost (the server killed between
//! the two) is sent again: delivery is at least once, and `audit verify --received` drops
//! identical repeats.
//!
//! The wire formats are written here, deliberately: OTLP/HTTP JSON is one small JSON
//! document per batch (serde_json), syslog is RFC 5424 with RFC 6587 octet counting. The
//! OpenTelemetry SDK's processors drop a failed batch and report no per-batch delivery, and
//! the syslog crate frames TCP with newlines, which a JSON line cannot be trusted to survive;
//! both would break the ordered, replayable, exactly-as-written delivery this needs. Only
//! `http://` is spoken: ship to a collector or agent on the host or the local network, which
//! forwards with TLS.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

pub use crate::config::{ShipFailure, ShipSettings};

/// Records per batch.
const BATCH: usize = 256;
/// How long one send may take before the sink counts as down.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a down sink is tried again.
const RETRY: Duration = Duration::from_millis(500);
/// How long the sink lets records gather before it sends, so that a busy server sends
/// batches rather than one request per record.
const LINGER: Duration = Duration::from_millis(20);
/// How often the spool and the sent marker are made durable while the sink keeps up.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// The sinks of one server.
pub struct Shipper {
    sinks: Vec<Arc<Sink>>,
    deny: bool,
}

impl std::fmt::Debug for Shipper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shipper")
            .field(
                "sinks",
                &self.sinks.iter().map(|s| s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Where a sink sends.
enum Wire {
    Otlp {
        address: String,
        path: String,
        resource: Value,
        /// One keep-alive connection, kept while it works.
        conn: Mutex<Option<TcpStream>>,
    },
    Syslog {
        address: String,
        hostname: String,
        app: String,
        /// One connection, kept while it works: one stream keeps the records in order.
        conn: Mutex<Option<TcpStream>>,
    },
}

struct Sink {
    name: &'static str,
    /// What each record is sent as, and the server it is from (for OCSF).
    format: crate::config::ShipFormat,
    server: String,
    /// Where it sends (its thread sends; deny mode also probes it before a call).
    wire: Wire,
    /// Set while a call waits for this sink's acknowledgement: the thread sends at once
    /// instead of letting records gather.
    urgent: AtomicBool,
    /// Rung after each offer; the sink's thread waits on it when it has nothing to send.
    bell: SyncSender<()>,
    down: AtomicBool,
    /// Why it is down, for the refusal.
    why: Mutex<String>,
    spool: Mutex<Spool>,
}

/// A sink's spool: every record offered, in seq order, until the sink has confirmed it;
/// and the last seq confirmed. Records are written here before they are sent, so a server
/// that is killed loses none of what it had not shipped yet.
struct Spool {
    file: File,
    /// `<sink>-<server>.sent`: the last seq delivered, rewritten in place.
    marker: File,
    /// The last seq delivered (persisted in `<sink>-<server>.sent`).
    sent: u64,
    /// Where the sink's next read starts.
    read_offset: u64,
    /// Whether lines were appended since the last fsync.
    dirty: bool,
}

impl Spool {
    fn open(dir: &Path, stem: &str) -> std::io::Result<Spool> {
        use std::os::unix::fs::PermissionsExt;
        if !dir.exists() {
            // What waits here is the trail itself: the server's user only.
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let file = super::private::options()
            .read(true)
            .append(true)
            .open(dir.join(format!("{stem}.spool")))?;
        let mut marker = super::private::options()
            .read(true)
            .write(true)
            .truncate(false)
            .open(dir.join(format!("{stem}.sent")))?;
        let mut text = String::new();
        marker.read_to_string(&mut text)?;
        let sent = text.trim().parse().unwrap_or(0);
        Ok(Spool {
            file,
            marker,
            sent,
            read_offset: 0,
            dirty: false,
        })
    }

    fn append(&mut self, line: &str) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.file.write_all(&bytes)?;
        self.dirty = true;
        Ok(())
    }

    /// Makes the spool and the marker durable.
    fn sync(&mut self) {
        if self.dirty && self.file.sync_data().is_ok() && self.marker.sync_data().is_ok() {
            self.dirty = false;
        }
    }

    /// Up to `BATCH` records after the read offset not yet delivered, and the offset after
    /// the last one read.
    fn next_batch(&mut self) -> std::io::Result<(Vec<(u64, String)>, u64)> {
        self.file.seek(SeekFrom::Start(self.read_offset))?;
        let mut reader = BufReader::new(&self.file);
        let mut offset = self.read_offset;
        let mut batch = Vec::new();
        let mut line = String::new();
        while batch.len() < BATCH {
            line.clear();
            let n = reader.read_line(&mut line)?;
            if n == 0 || !line.ends_with('\n') {
                break; // the end, or a line still being written
            }
            offset += n as u64;
            let text = line.trim_end_matches('\n');
            if let Some(seq) = seq_of(text)
                && seq > self.sent
            {
                batch.push((seq, text.to_owned()));
            }
        }
        Ok((batch, offset))
    }

    /// Records `seq` as delivered: a fixed-width rewrite in place (made durable with the
    /// spool, at most a second later; a crash before that sends the batch again).
    fn mark_sent(&mut self, seq: u64, offset: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.marker
            .write_all_at(format!("{seq:020}\n").as_bytes(), 0)?;
        self.sent = seq;
        self.read_offset = offset;
        self.dirty = true;
        Ok(())
    }

    /// Empties the spool when everything in it was delivered and nothing came since.
    fn compact(&mut self) -> std::io::Result<()> {
        if self.file.metadata()?.len() == self.read_offset && self.read_offset > 0 {
            self.file.set_len(0)?;
            self.file.sync_data()?;
            self.read_offset = 0;
        }
        Ok(())
    }
}

/// A record's `seq`, read from its line.
fn seq_of(line: &str) -> Option<u64> {
    serde_json::from_str::<Value>(line)
        .ok()?
        .get("seq")?
        .as_u64()
}

impl Shipper {
    /// Starts a thread per configured sink. `server` is `terminal` or `files`.
    pub fn start(settings: &ShipSettings, server: &str) -> std::io::Result<Arc<Shipper>> {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".into());
        let mut wires: Vec<(&'static str, Wire)> = Vec::new();
        if let Some((address, path)) = &settings.otlp_http {
            wires.push((
                "otlp",
                Wire::Otlp {
                    address: address.clone(),
                    path: path.clone(),
                    resource: json!({"attributes": [
                        {"key": "service.name", "value": {"stringValue": "safe-mcp"}},
                        {"key": "safe_mcp.server", "value": {"stringValue": server}},
                        {"key": "host.name", "value": {"stringValue": hostname}},
                    ]}),
                    conn: Mutex::new(None),
                },
            ));
        }
        if let Some(address) = &settings.syslog_tcp {
            wires.push((
                "syslog",
                Wire::Syslog {
                    address: address.clone(),
                    hostname: hostname.clone(),
                    app: "safe-mcp".into(),
                    conn: Mutex::new(None),
                },
            ));
        }
        let mut sinks = Vec::new();
        for (name, wire) in wires {
            let spool = Spool::open(&settings.spool_dir, &format!("{name}-{server}"))?;
            let (bell, rung) = std::sync::mpsc::sync_channel(1);
            let sink = Arc::new(Sink {
                name,
                format: settings.format,
                server: server.to_owned(),
                wire,
                urgent: AtomicBool::new(false),
                bell,
                down: AtomicBool::new(false),
                why: Mutex::new(String::new()),
                spool: Mutex::new(spool),
            });
            let worker = Arc::clone(&sink);
            std::thread::Builder::new()
                .name(format!("ship-{name}"))
                .spawn(move || worker.run(&rung))?;
            sinks.push(sink);
        }
        Ok(Arc::new(Shipper {
            sinks,
            deny: settings.on_failure == ShipFailure::Deny,
        }))
    }

    /// Hands a line the trail has written to each sink: one write to its spool (the
    /// kernel's page cache; the sink's thread makes it durable), then a ring. Never waits
    /// for the network.
    pub fn offer(&self, seq: u64, line: &str) {
        for sink in &self.sinks {
            if let Ok(mut spool) = sink.spool.lock()
                && let Err(e) = spool.append(line)
            {
                tracing::warn!("the {} sink's spool cannot take seq {seq}: {e}", sink.name);
            }
            let _ = sink.bell.try_send(());
        }
    }

    /// Under `on_failure = "deny"`, why calls are refused now: a sink is down, as its
    /// thread last saw it or as a look now shows (a receiver that closed its end since is
    /// seen before the call, not after it ran).
    pub fn refusing(&self) -> Option<String> {
        if !self.deny {
            return None;
        }
        self.sinks
            .iter()
            .find(|s| {
                if s.down.load(Ordering::Acquire) {
                    return true;
                }
                match s.alive_now() {
                    Ok(()) => false,
                    Err(e) => {
                        s.fail(&e);
                        true
                    }
                }
            })
            .map(|s| {
                let why = s.why.lock().map(|w| w.clone()).unwrap_or_default();
                format!(
                    "the audit {} sink is down ({why}) and [audit.ship] on_failure = \"deny\"",
                    s.name
                )
            })
    }

    /// Under `on_failure = "deny"`, waits until each sink that acknowledges what it gets
    /// (OTLP answers each batch) has confirmed the record `seq`, at most `SEND_TIMEOUT` (5 s);
    /// why not, if it has not. Syslog over TCP has no acknowledgement: what holds there is
    /// [`Shipper::refusing`]'s look at the connection before the call.
    pub fn confirmed(&self, seq: u64) -> Result<(), String> {
        if !self.deny {
            return Ok(());
        }
        for sink in self
            .sinks
            .iter()
            .filter(|s| matches!(s.wire, Wire::Otlp { .. }))
        {
            sink.urgent.store(true, Ordering::Release);
            let _ = sink.bell.try_send(());
            let deadline = std::time::Instant::now() + SEND_TIMEOUT;
            let done = loop {
                let sent = sink.spool.lock().map(|s| s.sent).unwrap_or(0);
                if sent >= seq {
                    break true;
                }
                if std::time::Instant::now() >= deadline || sink.down.load(Ordering::Acquire) {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            sink.urgent.store(false, Ordering::Release);
            if !done {
                return Err(format!(
                    "the audit {} sink did not acknowledge record {seq} and [audit.ship] on_failure = \"deny\"",
                    sink.name
                ));
            }
        }
        Ok(())
    }
}

impl Sink {
    fn run(&self, rung: &Receiver<()>) {
        let wire = &self.wire;
        let mut synced = std::time::Instant::now();
        loop {
            let next = match self.spool.lock() {
                Ok(mut s) => {
                    // Durable at least every second, and at once while the sink is down
                    // (then records wait here for longer).
                    if self.down.load(Ordering::Acquire) || synced.elapsed() >= SYNC_EVERY {
                        s.sync();
                        synced = std::time::Instant::now();
                    }
                    s.next_batch()
                }
                Err(_) => return,
            };
            let (mut batch, offset) = match next {
                Ok(b) => b,
                Err(e) => {
                    self.fail(&e);
                    std::thread::sleep(RETRY);
                    continue;
                }
            };
            if batch.is_empty() {
                if let Ok(mut s) = self.spool.lock() {
                    // Lines with seq already delivered (a replay after a restart) are
                    // skipped by moving the offset past them.
                    s.read_offset = offset.max(s.read_offset);
                    let _ = s.compact();
                }
                // Probe a down sink even when nothing new arrives (deny mode waits on it).
                if self.down.load(Ordering::Acquire) {
                    match send(wire, &[]) {
                        Ok(()) => self.up(),
                        Err(e) => self.fail(&e),
                    }
                }
                match rung.recv_timeout(RETRY) {
                    Ok(()) if self.urgent.load(Ordering::Acquire) => {}
                    Ok(()) => std::thread::sleep(LINGER),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                continue;
            }
            if self.format == crate::config::ShipFormat::Ocsf {
                for (_, line) in &mut batch {
                    *line = super::ocsf::event(line, &self.server).to_string();
                }
            }
            match send(wire, &batch) {
                Ok(()) => {
                    self.up();
                    if let (Ok(mut s), Some((seq, _))) = (self.spool.lock(), batch.last())
                        && let Err(e) = s.mark_sent(*seq, offset)
                    {
                        tracing::warn!("the {} sink cannot record what it sent: {e}", self.name);
                    }
                }
                Err(e) => {
                    self.fail(&e);
                    std::thread::sleep(RETRY);
                }
            }
        }
    }

    /// Whether the receiver is there now, without sending a record: a kept connection the
    /// receiver has closed reads as readable with nothing to read; then (or with none kept)
    /// a fresh connection must open.
    fn alive_now(&self) -> std::io::Result<()> {
        let (address, conn) = match &self.wire {
            Wire::Otlp { address, conn, .. } | Wire::Syslog { address, conn, .. } => {
                (address, conn)
            }
        };
        let Ok(mut held) = conn.try_lock() else {
            return Ok(()); // the thread is sending on it now: its outcome will say
        };
        if held.as_ref().is_some_and(|s| !peer_closed(s)) {
            return Ok(());
        }
        *held = None;
        let stream = connect(address)?;
        if matches!(self.wire, Wire::Syslog { .. }) {
            *held = Some(stream);
        }
        Ok(())
    }

    fn up(&self) {
        if self.down.swap(false, Ordering::AcqRel) {
            tracing::info!("the audit {} sink is back", self.name);
        }
    }

    fn fail(&self, e: &std::io::Error) {
        if let Ok(mut why) = self.why.lock() {
            *why = e.to_string();
        }
        if !self.down.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                "the audit {} sink is down ({e}); records wait in the spool",
                self.name
            );
        }
    }
}

fn connect(address: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other(format!("{address} did not resolve"));
    for a in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, SEND_TIMEOUT) {
            Ok(s) => {
                s.set_write_timeout(Some(SEND_TIMEOUT))?;
                s.set_read_timeout(Some(SEND_TIMEOUT))?;
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether the receiver has closed (or reset) a connection we keep.
fn peer_closed(stream: &TcpStream) -> bool {
    let _ = stream.set_nonblocking(true);
    let mut byte = [0u8; 1];
    let closed = match stream.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    closed
}

/// Sends `batch` (empty: a connectivity probe).
fn send(wire: &Wire, batch: &[(u64, String)]) -> std::io::Result<()> {
    match wire {
        Wire::Otlp {
            address,
            path,
            resource,
            conn,
        } => {
            let mut held = conn
                .lock()
                .map_err(|_| std::io::Error::other("the OTLP connection lock"))?;
            if batch.is_empty() {
                if held.is_none() {
                    connect(address)?;
                }
                return Ok(());
            }
            let body = otlp_body(resource, batch).to_string();
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            // A kept connection the collector has closed fails at once; then one fresh try.
            let kept = held.take().filter(|s| !peer_closed(s));
            let fresh = kept.is_none();
            let mut stream = match kept {
                Some(s) => s,
                None => connect(address)?,
            };
            let answered = post(&mut stream, &head, &body);
            let (answered, stream) = match answered {
                Err(_) if !fresh => {
                    let mut again = connect(address)?;
                    (post(&mut again, &head, &body), again)
                }
                other => (other, stream),
            };
            if answered? {
                *held = Some(stream);
            }
            Ok(())
        }
        Wire::Syslog {
            address,
            hostname,
            app,
            conn,
        } => {
            let mut held = conn
                .lock()
                .map_err(|_| std::io::Error::other("the syslog connection lock"))?;
            let mut stream = match held.take() {
                // A receiver that closed its end shows as readable with nothing to read.
                Some(s) if !peer_closed(&s) => s,
                _ => connect(address)?,
            };
            let mut bytes = Vec::new();
            for (_, line) in batch {
                bytes.extend_from_slice(&syslog_frame(hostname, app, line));
            }
            stream.write_all(&bytes)?;
            stream.flush()?;
            *held = Some(stream);
            Ok(())
        }
    }
}

/// A read of `stream` that a signal interrupted is the same read again: a socket with a
/// receive timeout is never restarted by the kernel (signal(7)), and an interrupted wait for
/// the collector's answer, taken for a failure, re-sent a batch it had received (a test saw
/// seq 67, 68, 67, 68 at the sink).
fn read_again(stream: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// One request on `stream`; `Ok(keep)` on a 2xx answer, with whether the connection may be
/// used again. (`write_all` already writes an interrupted write again, from where it was.)
fn post(stream: &mut TcpStream, head: &str, body: &str) -> std::io::Result<bool> {
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut answer = Vec::with_capacity(256);
    let mut byte = [0u8; 1024];
    let end = loop {
        let n = read_again(stream, &mut byte)?;
        if n == 0 {
            return Err(std::io::Error::other(
                "the collector closed without an answer",
            ));
        }
        answer.extend_from_slice(&byte[..n]);
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if answer.len() > 16 * 1024 {
            return Err(std::io::Error::other(
                "the collector's answer head is too long",
            ));
        }
    };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let status = head.get(9..12).unwrap_or("");
    if !status.starts_with('2') {
        return Err(std::io::Error::other(format!(
            "the collector answered {}",
            head.lines().next().unwrap_or("")
        )));
    }
    // Read the answer's body, so that the next request starts clean.
    let length: Option<usize> = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok());
    let Some(length) = length else {
        return Ok(false); // no length: the body runs to the close
    };
    let mut have = answer.len() - end;
    while have < length {
        let n = read_again(stream, &mut byte)?;
        if n == 0 {
            return Ok(false);
        }
        have += n;
    }
    Ok(!head.contains("connection: close"))
}

/// The OTLP/HTTP JSON logs request for `batch`: each record's line is a log's body, as a
/// string, unchanged; its seq is an attribute.
pub fn otlp_body(resource: &Value, batch: &[(u64, String)]) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        .to_string();
    let records: Vec<Value> = batch
        .iter()
        .map(|(seq, line)| {
            json!({
                "timeUnixNano": now,
                "observedTimeUnixNano": now,
                "severityNumber": 9,
                "severityText": "INFO",
                "body": {"stringValue": line},
                "attributes": [{"key": "safe_mcp.seq", "value": {"intValue": seq.to_string()}}],
            })
        })
        .collect();
    json!({"resourceLogs": [{
        "resource": resource,
        "scopeLogs": [{"scope": {"name": "safe-mcp.audit"}, "logRecords": records}],
    }]})
}

/// One RFC 5424 message (facility auth, severity info: `<38>1`), framed with RFC 6587
/// octet counting: `LEN SP MSG`. MSG is the line, unchanged.
pub fn syslog_frame(hostname: &str, app: &str, line: &str) -> Vec<u8> {
    let time = super::chain::rfc3339_now();
    let pid = std::process::id();
    let message = format!("<38>1 {time} {hostname} {app} {pid} audit - {line}");
    let mut framed = format!("{} ", message.len()).into_bytes();
    framed.extend_from_slice(message.as_bytes());
    framed
}

#[cfg(test)]
mod tests {

    /// A read a signal interrupted is read again, never taken for a failure that re-sends
    /// the batch (issue 50, item 4).
    #[test]
    fn an_interrupted_read_is_read_again() {
        struct Interrupting(usize);
        impl std::io::Read for Interrupting {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0 > 0 {
                    self.0 -= 1;
                    return Err(std::io::ErrorKind::Interrupted.into());
                }
                buf[0] = b'x';
                Ok(1)
            }
        }
        let mut buf = [0u8; 4];
        assert_eq!(
            super::read_again(&mut Interrupting(3), &mut buf).unwrap(),
            1
        );
        assert_eq!(buf[0], b'x');
    }

    use super::*;

    #[test]
    fn the_line_is_carried_unchanged() {
        let line = r#"{"seq":7,"kind":"attempt","command":"echo \"hi\" \u00e9"}"#;
        let body = otlp_body(&json!({}), &[(7, line.to_owned())]);
        let carried = &body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
        assert_eq!(carried["body"]["stringValue"], line);
        assert_eq!(carried["attributes"][0]["value"]["intValue"], "7");
        let frame = String::from_utf8(syslog_frame("host", "safe-mcp", line)).unwrap();
        let (len, message) = frame.split_once(' ').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), message.len());
        assert!(message.starts_with("<38>1 "));
        assert!(message.ends_with(line));
        assert_eq!(seq_of(line), Some(7));
    }
}
