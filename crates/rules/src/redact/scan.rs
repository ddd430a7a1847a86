//! The keyword scan: which of the rules' literal keywords occur in a text, in one pass.
//!
//! Owns the Aho-Corasick DFA over every keyword (ASCII case-insensitive, overlapping
//! matches) and the loop that walks it. A DFA step is a chain of two dependent loads, so one
//! walk is bound by memory latency, not bandwidth; the loop walks eight stretches of a long
//! text at once, each stretch running on past its end by the longest keyword's length, so a
//! keyword that straddles a boundary is still seen whole. It must never miss a keyword that
//! occurs (a missed keyword keeps a rule from running and lets its secret through); seeing
//! one twice is harmless. It imports nothing from the engine.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, StartKind};

/// Texts shorter than this are walked in one lane: splitting them gains nothing.
const SPLIT_AT: usize = 1 << 14;

/// Independent walks interleaved in the loop.
const LANES: usize = 8;

/// The keyword automaton.
pub(crate) struct Keywords {
    dfa: DFA,
    start: StateID,
    count: usize,
    longest: usize,
}

impl Keywords {
    /// An automaton over `words`; `Err` carries the builder's message.
    pub(crate) fn new(words: &[String]) -> Result<Keywords, String> {
        let dfa = DFA::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Unanchored)
            // Without a prefilter, only match states (and the unused dead state) are
            // special, which is what the loop below relies on.
            .prefilter(false)
            .build(words)
            .map_err(|e| e.to_string())?;
        let start = dfa.start_state(Anchored::No).map_err(|e| e.to_string())?;
        Ok(Keywords {
            dfa,
            start,
            count: words.len(),
            longest: words.iter().map(String::len).max().unwrap_or(0),
        })
    }

    /// For each keyword, whether it occurs in `text`. Stops early once all have been seen.
    pub(crate) fn scan(&self, text: &[u8]) -> Vec<bool> {
        let mut seen = Seen {
            flags: vec![false; self.count],
            left: self.count,
        };
        if self.count == 0 {
            return seen.flags;
        }
        if text.len() < SPLIT_AT {
            self.walk(text, 0, text.len(), self.start, &mut seen);
            return seen.flags;
        }
        let stretch = text.len() / LANES;
        let lane = |k: usize| &text[k * stretch..(k + 1) * stretch];
        let dfa = &self.dfa;
        let mut s = [self.start; LANES];
        let lanes = lane(0)
            .iter()
            .zip(lane(1))
            .zip(lane(2))
            .zip(lane(3))
            .zip(lane(4))
            .zip(lane(5))
            .zip(lane(6))
            .zip(lane(7));
        for (((((((&x0, &x1), &x2), &x3), &x4), &x5), &x6), &x7) in lanes {
            s[0] = dfa.next_state(Anchored::No, s[0], x0);
            s[1] = dfa.next_state(Anchored::No, s[1], x1);
            s[2] = dfa.next_state(Anchored::No, s[2], x2);
            s[3] = dfa.next_state(Anchored::No, s[3], x3);
            s[4] = dfa.next_state(Anchored::No, s[4], x4);
            s[5] = dfa.next_state(Anchored::No, s[5], x5);
            s[6] = dfa.next_state(Anchored::No, s[6], x6);
            s[7] = dfa.next_state(Anchored::No, s[7], x7);
            // Non-short-circuit `|`: one branch per step, not eight.
            if dfa.is_special(s[0])
                | dfa.is_special(s[1])
                | dfa.is_special(s[2])
                | dfa.is_special(s[3])
                | dfa.is_special(s[4])
                | dfa.is_special(s[5])
                | dfa.is_special(s[6])
                | dfa.is_special(s[7])
            {
                for &sid in &s {
                    self.record(sid, &mut seen);
                }
                if seen.left == 0 {
                    return seen.flags;
                }
            }
        }
        // Each lane runs on from where the common loop stopped: all but the last into the
        // next stretch by the longest keyword, so a match that began before the next lane's
        // start is found whole; the last to the end of the text.
        for (lane, &sid) in s.iter().enumerate() {
            let from = lane * stretch + stretch;
            let to = if lane + 1 < LANES {
                (from + self.longest.saturating_sub(1)).min(text.len())
            } else {
                text.len()
            };
            self.walk(text, from, to, sid, &mut seen);
            if seen.left == 0 {
                break;
            }
        }
        seen.flags
    }

    fn walk(&self, text: &[u8], from: usize, to: usize, mut sid: StateID, seen: &mut Seen) {
        for &byte in &text[from..to] {
            sid = self.dfa.next_state(Anchored::No, sid, byte);
            if self.dfa.is_special(sid) {
                self.record(sid, seen);
                if seen.left == 0 {
                    return;
                }
            }
        }
    }

    fn record(&self, sid: StateID, seen: &mut Seen) {
        if !self.dfa.is_match(sid) {
            return;
        }
        for i in 0..self.dfa.match_len(sid) {
            let p = self.dfa.match_pattern(sid, i).as_usize();
            if let Some(flag) = seen.flags.get_mut(p)
                && !*flag
            {
                *flag = true;
                seen.left -= 1;
            }
        }
    }
}

struct Seen {
    flags: Vec<bool>,
    left: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_across_lane_boundaries_are_seen() {
        let words: Vec<String> = ["ghp_", "private key", "pass"].map(String::from).to_vec();
        let k = Keywords::new(&words).unwrap();
        let n = (1 << 16) + 3;
        let stretch = n / LANES;
        let mut places = vec![0, n - 11];
        for lane in 1..LANES {
            places.extend((0..11).map(|back| lane * stretch - back));
        }
        for at in places {
            let mut text = vec![b'a'; n];
            text[at..at + 11].copy_from_slice(b"PRIVATE KEY");
            assert_eq!(k.scan(&text), vec![false, true, false], "at {at}");
        }
        assert_eq!(k.scan(b"x ghp_ y PASSWORD"), vec![true, false, true]);
    }
}
