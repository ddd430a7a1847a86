// Generated test data for redaction.rs: fake secrets with real shapes, and look-alikes that are not secrets.
// In three files, each under 800 lines; `positives()` walks both halves of the positives.
include!("redaction_positives_a.rs");
include!("redaction_positives_b.rs");
include!("redaction_negatives.rs");

/// Every positive case: (kind, realistic text containing a secret, the secret substring).
pub fn positives() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
    POSITIVES_A.iter().chain(POSITIVES_B)
}
