//! Verifying the trail as a receiver stored it (DESIGN §12): lines in any order, each once
//! or more, with whatever the receiver put before the record (a syslog header).
//!
//! Every record must match its own hash (HMAC when a key is given); records are ordered by
//! `seq`; each that follows its predecessor must link to it (`prev`); a `seq` that is
//! missing is a gap, reported with its range, never papered over; a `checkpoint` record
//! whose head is present must name that head's digest. What a receiver cannot prove is
//! said as such: the chain across a gap is unchecked.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Chain;

/// What a receiver's copy holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReceivedReport {
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
}

fn field<'a>(record: &'a Map<String, Value>, key: &str) -> &'a str {
    record.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Verifies `text`, one record per line.
pub fn verify_received(text: &str, chain: &Chain) -> Result<ReceivedReport, String> {
    let mut by_seq: BTreeMap<u64, (String, Map<String, Value>)> = BTreeMap::new();
    let mut report = ReceivedReport::default();
    for (n, raw) in text.lines().enumerate() {
        let Some(start) = raw.find('{') else {
            if raw.trim().is_empty() {
                continue;
            }
            return Err(format!("line {}: no record on it", n + 1));
        };
        let line = raw[start..].trim_end();
        let mut record: Map<String, Value> = serde_json::from_str(line)
            .map_err(|e| format!("line {}: not a JSON record ({e})", n + 1))?;
        // An OCSF event carries the record's own line (`[audit.ship] format = "ocsf"`).
        let original = super::ocsf::original(&record).map(str::to_owned);
        let line = match original {
            Some(original) => {
                record = serde_json::from_str(&original).map_err(|e| {
                    format!(
                        "line {}: the OCSF event's original is not a record ({e})",
                        n + 1
                    )
                })?;
                original
            }
            None => line.to_owned(),
        };
        let line = line.as_str();
        if field(&record, "alg") != chain.alg() {
            return Err(format!(
                "line {}: written with {:?}, verified with {:?}",
                n + 1,
                field(&record, "alg"),
                chain.alg()
            ));
        }
        if !chain.hash_matches(&record) {
            return Err(format!(
                "line {}: the record does not match its own hash",
                n + 1
            ));
        }
        let seq = record
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("line {}: no seq", n + 1))?;
        match by_seq.get(&seq) {
            Some((seen, _)) if seen == line => report.duplicates += 1,
            Some(_) => {
                return Err(format!(
                    "seq {seq} was received twice with different content"
                ));
            }
            None => {
                by_seq.insert(seq, (line.to_owned(), record));
            }
        }
    }
    let mut previous: Option<(u64, &str)> = None;
    for (&seq, (line, record)) in &by_seq {
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut options = AuditOptions::closed();
        options.checkpoint_every = Some(std::time::Duration::ZERO);
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
        let report = verify_received(&shuffled.join("\n"), &chain).unwrap();
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
        assert_eq!(report.gaps, vec![(3, 3)]);
        let edited = lines.join("\n").replacen("\"i\":1", "\"i\":9", 1);
        assert!(verify_received(&edited, &chain).is_err());
    }
}
