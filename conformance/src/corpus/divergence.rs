//! Known divergences: differences from the reference that the project keeps on purpose.
//!
//! Each entry names the case, the checks it affects, why we differ, and a [`Rule`] that the
//! difference must satisfy exactly. A failure in a listed case that the rule does not explain
//! (another check, another value, another error) stays a failure. `docs/format.md` describes
//! both divergences for users of the format.

use std::path::Path;

use session_core::json::Value;

use super::Mismatch;

/// What a listed difference must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// We keep a number's stored spelling where the reference rewrote it through a double:
    /// the actual value's JSON text, with `"n":<ours>` replaced by `"n":<reference>`, is exactly
    /// the expected text (and `"n":<ours>` occurs in it).
    KeepsSpelling {
        /// The spelling stored in the file, which we keep.
        ours: &'static str,
        /// The spelling the reference's doubles produce.
        reference: &'static str,
    },
    /// The reference crashed with `TypeError: Cannot read properties of null` on a line that is
    /// valid JSON but not an object, or gave an artefact of reading a property of a number;
    /// we treat the line as any other unparsable line. For an operation's outcome, the
    /// expected error's message must start with `reference_message`; for every check, the
    /// actual value must be exactly what the reference produced for one of `like` (sibling
    /// cases built from the same log with another unparsable line at the same place), for the
    /// same check.
    ReadsAsUnparsable {
        /// How the reference's error message starts.
        reference_message: &'static str,
        /// Negative cases whose expected value ours must equal.
        like: &'static [&'static str],
    },
}

/// One known divergence.
#[derive(Debug, Clone, Copy)]
pub struct KnownDivergence {
    /// The case, e.g. `negative/number-overflow-in-data`.
    pub case: &'static str,
    /// The checks it affects, e.g. `results.load`.
    pub checks: &'static [&'static str],
    /// Why we differ, in one line.
    pub reason: &'static str,
    /// What the difference must be exactly.
    pub rule: Rule,
}

const OPS: &[&str] = &["results.inspect", "results.load", "results.readFrom"];

const OPS_AND_FILES: &[&str] = &[
    "results.inspect",
    "results.load",
    "results.readFrom",
    "results.load.files",
];

const SPELLING: &str = "numbers read from disk keep their stored spelling (lossless); the \
                        reference canonicalises them through doubles";

const NON_OBJECT: &str = "a line that is valid JSON but not an object is an unparsable line \
                          (committed-region or torn-tail rules); the reference crashes with a \
                          TypeError";

const fn spelling(
    case: &'static str,
    ours: &'static str,
    reference: &'static str,
) -> KnownDivergence {
    KnownDivergence {
        case,
        checks: OPS,
        reason: SPELLING,
        rule: Rule::KeepsSpelling { ours, reference },
    }
}

/// Every known divergence.
pub const KNOWN_DIVERGENCES: &[KnownDivergence] = &[
    spelling("negative/number-exponent-upper-in-data", "1E2", "100"),
    spelling("negative/number-float-trailing-zero-in-data", "1.0", "1"),
    spelling("negative/number-big-exponent-in-data", "1e21", "1e+21"),
    spelling(
        "negative/number-huge-integer-in-data",
        "123456789012345678901234567890",
        "1.2345678901234568e+29",
    ),
    spelling("negative/number-negative-zero-in-data", "-0", "0"),
    spelling("negative/number-overflow-in-data", "1e400", "null"),
    spelling(
        "negative/number-unsafe-integer-in-data",
        "9007199254740993",
        "9007199254740992",
    ),
    KnownDivergence {
        case: "negative/zstd-torn-frame-recovers-exponent-number",
        checks: OPS_AND_FILES,
        reason: SPELLING,
        rule: Rule::KeepsSpelling {
            ours: "1E2",
            reference: "100",
        },
    },
    KnownDivergence {
        case: "negative/null-line-before-turn-end",
        checks: OPS,
        reason: NON_OBJECT,
        rule: Rule::ReadsAsUnparsable {
            reference_message: "Cannot read properties of null",
            like: &[
                "garbage-line-before-turn-end",
                "non-object-line-before-turn-end",
            ],
        },
    },
    KnownDivergence {
        case: "negative/non-object-line-before-turn-end",
        checks: OPS,
        reason: NON_OBJECT,
        rule: Rule::ReadsAsUnparsable {
            reference_message: "corrupt session log: seq gap in committed region at line 34 \
                                (expected 101, got undefined)",
            like: &["garbage-line-before-turn-end"],
        },
    },
    KnownDivergence {
        case: "negative/null-line-in-open-tail",
        checks: OPS_AND_FILES,
        reason: NON_OBJECT,
        rule: Rule::ReadsAsUnparsable {
            reference_message: "Cannot read properties of null",
            like: &["array-line-in-open-tail", "garbage-line-in-open-tail"],
        },
    },
    KnownDivergence {
        case: "negative/garbage-then-null-line",
        checks: OPS_AND_FILES,
        reason: NON_OBJECT,
        rule: Rule::ReadsAsUnparsable {
            reference_message: "Cannot read properties of null",
            like: &["garbage-line-in-open-tail", "array-line-in-open-tail"],
        },
    },
];

/// Whether `check` compares the files under a root (`results.<op>.files`).
fn is_files_check(check: &str) -> bool {
    check.rsplit('.').next() == Some("files")
}

/// The divergence listed for `check` of `case` (e.g. `negative/null-line-in-open-tail`,
/// `results.load`), whatever the difference is. The runner accepts a difference only when the
/// entry's [`Rule`] explains it; other tests use this to know where the reference's expectation
/// is not ours.
pub fn listed(case: &str, check: &str) -> Option<&'static KnownDivergence> {
    KNOWN_DIVERGENCES
        .iter()
        .find(|d| d.case == case && d.checks.contains(&check))
}

/// The listed divergence that explains `mismatch` of `check` in `case`, if any.
pub(crate) fn matching(
    corpus: &Path,
    case: &str,
    check: &str,
    mismatch: &Mismatch,
) -> Option<&'static KnownDivergence> {
    let (Some(expected), Some(actual)) = (&mismatch.expected, &mismatch.actual) else {
        return None;
    };
    KNOWN_DIVERGENCES.iter().find(|d| {
        d.case == case
            && d.checks.contains(&check)
            && explains(d.rule, corpus, check, expected, actual)
    })
}

fn explains(rule: Rule, corpus: &Path, check: &str, expected: &Value, actual: &Value) -> bool {
    match rule {
        Rule::KeepsSpelling { ours, reference } => {
            let ours = format!("\"n\":{ours}");
            let theirs = format!("\"n\":{reference}");
            let same = |expected: &str, actual: &str| {
                actual.contains(&ours)
                    && !expected.contains(&ours)
                    && actual.replace(&ours, &theirs) == expected
            };
            if is_files_check(check) {
                // A file rewritten by the repair: its text differs by the spelling alone (its
                // compressed bytes differ with it); every other file is identical.
                let (Some(want), Some(got)) = (expected.as_object(), actual.as_object()) else {
                    return false;
                };
                let mut differing = 0;
                for (rel, w) in want.iter() {
                    let Some(g) = got.get(rel) else { return false };
                    if w == g {
                        continue;
                    }
                    differing += 1;
                    let text = |v: &Value| v.get("text").and_then(Value::as_str).map(str::to_owned);
                    match (text(w), text(g)) {
                        (Some(w), Some(g)) if same(&w, &g) => {}
                        _ => return false,
                    }
                }
                return differing > 0 && want.len() == got.len();
            }
            same(&expected.to_json(), &actual.to_json())
        }
        Rule::ReadsAsUnparsable {
            reference_message,
            like,
        } => {
            // The bytes a file holds are no error; every other check must show the
            // reference's own outcome.
            if !is_files_check(check) {
                let message = expected
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str);
                if !message.is_some_and(|m| m.starts_with(reference_message)) {
                    return false;
                }
            }
            like.iter().any(|sibling| {
                super::negative::negative_expected(&corpus.join("negative").join(sibling), check)
                    .is_some_and(|want| want.to_json() == actual.to_json())
            })
        }
    }
}
