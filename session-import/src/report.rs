//! What an import mapped, kept as ignorable, closed, refused and cut.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::ImportError;

/// A line that was cut from the import: not valid JSON, not an object, or over the bound.
#[derive(Debug, Clone)]
pub struct CutLine {
    /// The error naming the file, line and byte offset.
    pub error: ImportError,
    /// The line's length in bytes (without its newline).
    pub bytes: u64,
}

/// A record that mapped to events `Session::append` refused; it is kept as an ignorable event.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The 1-based line of the record.
    pub line: u64,
    /// The record's kind (`type`, or `type:payload.type`).
    pub kind: String,
    /// Why the session refused it.
    pub reason: String,
}

/// The report of one imported session.
#[derive(Debug, Clone, Default)]
pub struct ImportReport {
    /// The source files read for this session.
    pub files: Vec<PathBuf>,
    /// Non-empty lines read.
    pub lines: u64,
    /// Records mapped into the vocabulary, by record kind.
    pub mapped: BTreeMap<String, u64>,
    /// Records kept as ignorable `import/record` events, by record kind.
    pub ignorable: BTreeMap<String, u64>,
    /// User messages written.
    pub user_messages: u64,
    /// Assistant messages written (with content).
    pub assistant_messages: u64,
    /// Tool calls written.
    pub tool_calls: u64,
    /// Tool results taken from the source.
    pub tool_results: u64,
    /// Synthetic tool results written by repair's closers, by error code.
    pub closed_calls: BTreeMap<String, u64>,
    /// Turns closed as interrupted by repair's closers.
    pub closed_turns: u64,
    /// Turns written.
    pub turns: u64,
    /// Compactions written as surface replaces.
    pub compactions: u64,
    /// Rollbacks honoured as surface replaces.
    pub rollbacks: u64,
    /// Token usage written: input, output, cache read, cache write, reasoning.
    pub tokens: Tokens,
    /// Records whose events the session refused (kept as ignorable).
    pub refused: Vec<Refusal>,
    /// Lines cut: malformed, not objects, or too long.
    pub cut: Vec<CutLine>,
}

/// Token totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input tokens (for Codex including cached input, as Codex counts them).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache-read input tokens.
    pub cache_read: u64,
    /// Cache-write input tokens.
    pub cache_write: u64,
    /// Reasoning output tokens.
    pub reasoning: u64,
}

impl ImportReport {
    pub(crate) fn mapped(&mut self, kind: &str) {
        *self.mapped.entry(kind.to_owned()).or_default() += 1;
    }

    pub(crate) fn ignorable(&mut self, kind: &str) {
        *self.ignorable.entry(kind.to_owned()).or_default() += 1;
    }

    /// Records mapped in all.
    pub fn mapped_total(&self) -> u64 {
        self.mapped.values().sum()
    }

    /// Records kept as ignorable in all.
    pub fn ignorable_total(&self) -> u64 {
        self.ignorable.values().sum()
    }

    /// Synthetic tool results in all.
    pub fn closed_calls_total(&self) -> u64 {
        self.closed_calls.values().sum()
    }
}
