//! Verifying the trail as a receiver stored it (DESIGN §12): lines in any order, each once
//! or more, with whatever the receiver put before the record (a syslog header), from one
//! server or from a fleet's.
//!
//! Records are grouped into chains by the `server` they carry (a trail written before
//! servers were named is one chain, named ""). In each chain, every record must match its
//! own hash (HMAC when a key is given); records are ordered by `seq`; each that follows its
//! predecessor must link to it (`prev`); a `seq` that is missing is a gap, reported with its
//! range and its server, never papered over; a `checkpoint` record whose head is present
//! must name that head's digest. What a receiver cannot prove is said as such: the chain
//! across a gap is unchecked.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Chain;

/// What a receiver's copy holds of one server's chain.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReceivedReport {
    /// The server the records name ("" for records that name none).
    pub server: String,
    /// Distinct records.
    pub records: usize,
    /// The lowest and highest seq.
    pub first: u64,
    pub last: u64,
    /// Missing seq ranges, inclusive.
    pub gaps: Vec<(u64, u64)>,
    /// Lines received more than once (identical).
    pub duplicates: usize,
    /// Checkpoints whose head was present and matched.
    pub checkpoints: usize,
    /// The server whose record at seq `first - 1` this chain's first record links to: one
    /// chain under two names (a trail written before servers were named, then named).
    pub continues: Option<String>,
    /// The chain starts after seq 1 and links to nothing received: what came before its
    /// first record (shipping began later, or records were cut) cannot be checked here.
    pub unverified_start: bool,
}

fn field<'a>(record: &'a Map<String, Value>, key: &str) -> &'a str {
    record.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A record as received: the exact line it was sealed as, and its fields.
type Sealed = (String, Map<String, Value>);

/// One chain's records by seq.
type Records = BTreeMap<u64, Sealed>;

/// Verifies `text`, one record per line: one report per server, by server id.
pub fn verify_received(text: &str, chain: &Chain) -> Result<Vec<ReceivedReport>, String> {
    let mut servers: BTreeMap<String, (Records, usize)> = BTreeMap::new();
    for (n, raw) in text.lines().enumerate() {
        let Some((line, record)) = parse(n + 1, raw, chain)? else {
            continue;
        };
        let seq = record
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("line {}: no seq", n + 1))?;
        let server = field(&record, "server").to_owned();
        let (by_seq, duplicates) = servers.entry(server.clone()).or_default();
        match by_seq.get(&seq) {
            Some((seen, _)) if *seen == line => *duplicates += 1,
            Some(_) => {
                return Err(format!(
                    "{}seq {seq} was received twice with different content",
                    named(&server)
                ));
            }
            None => {
                by_seq.insert(seq, (line, record));
            }
        }
    }
    let mut reports = Vec::new();
    for (server, (by_seq, duplicates)) in &servers {
        let mut report = one_chain(by_seq, chain).map_err(|e| format!("{}{e}", named(server)))?;
        report.server = server.clone();
        report.duplicates = *duplicates;
        if report.first > 1 {
            let prev = by_seq
                .get(&report.first)
                .map(|(_, r)| field(r, "prev"))
                .unwrap_or_default();
            report.continues = servers
                .iter()
                .filter(|(other, _)| *other != server)
                .find(|(_, (theirs, _))| {
                    theirs
                        .get(&(report.first - 1))
                        .is_some_and(|(line, _)| chain.digest(line.as_bytes()) == prev)
                })
                .map(|(other, _)| other.clone());
            report.unverified_start = report.continues.is_none();
        }
        reports.push(report);
    }
    Ok(reports)
}

/// The distinct records of `text` (lines as [`verify_received`] reads them; a line with no
/// record on it is passed over, since this reads and does not judge: verify for that), in
/// time order, then by server and seq. What `audit report --received` shows.
pub fn received_records(text: &str) -> Vec<Value> {
    let mut seen: BTreeMap<(String, u64), Value> = BTreeMap::new();
    for raw in text.lines() {
        let Ok(Some((_, record))) = unwrap(raw) else {
            continue;
        };
        let Some(seq) = record.get("seq").and_then(Value::as_u64) else {
            continue;
        };
        let server = field(&record, "server").to_owned();
        seen.entry((server, seq)).or_insert(Value::Object(record));
    }
    let mut records: Vec<((String, String, u64), Value)> = seen
        .into_iter()
        .map(|((server, seq), r)| {
            let time = r
                .get("time")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            ((time, server, seq), r)
        })
        .collect();
    records.sort_by(|a, b| a.0.cmp(&b.0));
    records.into_iter().map(|(_, r)| r).collect()
}

/// "server X: " before a message about X's chain; nothing for the unnamed one.
fn named(server: &str) -> String {
    if server.is_empty() {
        String::new()
    } else {
        format!("server {server}: ")
    }
}

/// Line `n`'s record (after any prefix a receiver added; an OCSF event's original) and the
/// exact text it was sealed as; `None` for a blank line.
fn parse(n: usize, raw: &str, chain: &Chain) -> Result<Option<Sealed>, String> {
    let Some((line, record)) = unwrap(raw).map_err(|e| format!("line {n}: {e}"))? else {
        return Ok(None);
    };
    if field(&record, "alg") != chain.alg() {
        return Err(format!(
            "line {n}: written with {:?}, verified with {:?}",
            field(&record, "alg"),
            chain.alg()
        ));
    }
    if !chain.hash_matches(&record) {
        return Err(format!("line {n}: the record does not match its own hash"));
    }
    Ok(Some((line, record)))
}

/// The record a received line holds (after any prefix a receiver added; an OCSF event's
/// original) and the exact text it was sealed as, unchecked; `None` for a blank line.
fn unwrap(raw: &str) -> Result<Option<Sealed>, String> {
    let Some(start) = raw.find('{') else {
        if raw.trim().is_empty() {
            return Ok(None);
        }
        return Err("no record on it".to_owned());
    };
    let line = raw[start..].trim_end();
    let record: Map<String, Value> =
        serde_json::from_str(line).map_err(|e| format!("not a JSON record ({e})"))?;
    // An OCSF event carries the record's own line (`[audit.ship] format = "ocsf"`).
    match super::ocsf::original(&record).map(str::to_owned) {
        Some(original) => {
            let record = serde_json::from_str(&original)
                .map_err(|e| format!("the OCSF event's original is not a record ({e})"))?;
            Ok(Some((original, record)))
        }
        None => Ok(Some((line.to_owned(), record))),
    }
}

/// The links, gaps and checkpoints of one server's records.
fn one_chain(by_seq: &Records, chain: &Chain) -> Result<ReceivedReport, String> {
    let mut report = ReceivedReport::default();
    let mut previous: Option<(u64, &str)> = None;
    for (&seq, (line, record)) in by_seq {
        match previous {
            Some((p, p_line)) if seq == p + 1 => {
                if field(record, "prev") != chain.digest(p_line.as_bytes()) {
                    return Err(format!(
                        "seq {seq} does not link to seq {p}: one of them is not what was written"
                    ));
                }
            }
            Some((p, _)) => report.gaps.push((p + 1, seq - 1)),
            None => report.first = seq,
        }
        if field(record, "kind") == "checkpoint"
            && let Some(head) = record.get("head_seq").and_then(Value::as_u64)
            && let Some((head_line, _)) = by_seq.get(&head)
        {
            if field(record, "head_hash") != chain.digest(head_line.as_bytes()) {
                return Err(format!(
                    "the checkpoint at seq {seq} names another head than seq {head}"
                ));
            }
            report.checkpoints += 1;
        }
        previous = Some((seq, line));
        report.last = seq;
    }
    report.records = by_seq.len();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditLog, AuditOptions};

    fn trail(n: usize) -> Vec<String> {
        trail_of(n, None)
    }

    /// `n` records of a fresh trail whose server is `server` (one made at start if `None`).
    fn trail_of(n: usize, server: Option<&str>) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut options = AuditOptions::closed();
        options.checkpoint_every = Some(std::time::Duration::ZERO);
        options.server_id = server.map(str::to_owned);
        let log = AuditLog::open(&path, options);
        for i in 0..n {
            log.append("note", Map::from_iter([("i".into(), i.into())]), false)
                .unwrap();
        }
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn out_of_order_duplicated_and_prefixed_lines_verify() {
        let lines = trail(4);
        let chain = Chain::new(None);
        let mut shuffled: Vec<String> = lines.iter().rev().cloned().collect();
        shuffled.push(lines[2].clone());
        shuffled[0] = format!(
            "<38>1 2026-12-01T00:00:00Z host safe-mcp 1 audit - {}",
            shuffled[0]
        );
        let [report] = &verify_received(&shuffled.join("\n"), &chain).unwrap()[..] else {
            panic!("one server");
        };
        assert!(report.server.starts_with("s-"), "{report:?}");
        assert_eq!(report.records, lines.len());
        assert_eq!(report.duplicates, 1);
        assert!(report.gaps.is_empty());
        assert!(report.checkpoints >= 1, "{report:?}");
    }

    #[test]
    fn a_missing_record_is_a_gap_and_an_edit_is_refused() {
        let lines = trail(3);
        let chain = Chain::new(None);
        let mut cut = lines.clone();
        cut.remove(2);
        let report = verify_received(&cut.join("\n"), &chain).unwrap();
        assert_eq!(report[0].gaps, vec![(3, 3)]);
        let edited = lines.join("\n").replacen("\"i\":1", "\"i\":9", 1);
        assert!(verify_received(&edited, &chain).is_err());
    }

    #[test]
    fn a_fleets_merged_stream_verifies_per_server_and_names_the_gap_s_server() {
        let chain = Chain::new(None);
        let (a, b) = (
            trail_of(5, Some("replica-a")),
            trail_of(3, Some("replica-b")),
        );
        // Interleaved as one receiver would store them: both chains start at seq 1.
        let mut merged: Vec<String> = a
            .iter()
            .zip(&b)
            .flat_map(|(x, y)| [x.clone(), y.clone()])
            .collect();
        merged.extend(a[b.len()..].iter().cloned());
        let reports = verify_received(&merged.join("\n"), &chain).unwrap();
        let seen: Vec<(&str, usize, bool)> = reports
            .iter()
            .map(|r| (r.server.as_str(), r.records, r.gaps.is_empty()))
            .collect();
        assert_eq!(
            seen,
            vec![("replica-a", a.len(), true), ("replica-b", b.len(), true)]
        );
        // One of b's records lost: the gap is b's, a's chain is whole.
        let lost = merged.iter().position(|l| *l == b[1]).unwrap();
        merged.remove(lost);
        let reports = verify_received(&merged.join("\n"), &chain).unwrap();
        assert!(reports[0].gaps.is_empty());
        assert_eq!(reports[1].gaps, vec![(2, 2)]);
        // An edit is refused, at its line.
        let edited = merged.join("\n").replacen("\"i\":2", "\"i\":9", 1);
        let why = verify_received(&edited, &chain).unwrap_err();
        assert!(why.contains("line"), "{why}");
    }

    #[test]
    fn a_trail_keeps_its_server_id_across_restarts_and_servers_sharing_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let open = |id: Option<&str>| {
            let mut options = AuditOptions::closed();
            options.server_id = id.map(str::to_owned);
            AuditLog::open(&path, options)
        };
        let first = open(Some("replica-a"));
        first.append("note", Map::new(), true).unwrap();
        // A second server on the same file, configured otherwise, and a restart without
        // any id: one chain, one name.
        let second = open(Some("replica-z"));
        second.append("note", Map::new(), true).unwrap();
        first.append("note", Map::new(), true).unwrap();
        drop((first, second));
        open(None).append("note", Map::new(), true).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let reports = verify_received(&text, &Chain::new(None)).unwrap();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(
            (reports[0].server.as_str(), reports[0].records),
            ("replica-a", 4)
        );
        assert!(reports[0].gaps.is_empty());
    }

    #[test]
    fn a_chain_named_part_way_is_linked_across_the_names_and_a_cut_start_is_said() {
        // A trail written before servers were named, then by a named server: one chain.
        let chain = Chain::new(None);
        let records: Vec<Map<String, Value>> = (1..=4u64)
            .map(|seq| {
                let mut r = Map::from_iter([("seq".to_owned(), Value::from(seq))]);
                if seq > 2 {
                    r.insert("server".into(), "replica-a".into());
                }
                r
            })
            .collect();
        let mut prev = crate::audit::GENESIS.to_owned();
        let mut all = Vec::new();
        for r in records {
            let line = chain.seal(r, &prev).unwrap();
            prev = chain.digest(line.as_bytes());
            all.push(line);
        }
        let reports = verify_received(&all.join("\n"), &chain).unwrap();
        assert_eq!(reports.len(), 2, "{reports:?}");
        let named = &reports[1];
        assert_eq!((named.server.as_str(), named.first), ("replica-a", 3));
        assert_eq!(named.continues.as_deref(), Some(""));
        assert!(!named.unverified_start && !reports[0].unverified_start);
        // The first named record cut: the named chain's start links to nothing received.
        let mut cut = all.clone();
        cut.remove(2);
        let reports = verify_received(&cut.join("\n"), &chain).unwrap();
        assert!(
            reports[1].unverified_start && reports[1].continues.is_none(),
            "{reports:?}"
        );
    }

    #[test]
    fn a_merged_stream_reads_as_its_distinct_records_in_time_order() {
        let (a, b) = (
            trail_of(3, Some("replica-a")),
            trail_of(2, Some("replica-b")),
        );
        let mut stream: Vec<String> = b.iter().chain(a.iter()).cloned().collect();
        stream.push(format!(
            "<38>1 2026-12-01T00:00:00Z host safe-mcp 1 audit - {}",
            a[1]
        ));
        stream.push("not a record".into());
        let records = received_records(&stream.join("\n"));
        assert_eq!(
            records.len(),
            a.len() + b.len(),
            "duplicates and noise dropped"
        );
        let times: Vec<&str> = records
            .iter()
            .map(|r| r["time"].as_str().unwrap())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        for server in ["replica-a", "replica-b"] {
            assert!(records.iter().any(|r| r["server"] == server), "{server}");
        }
    }
}
