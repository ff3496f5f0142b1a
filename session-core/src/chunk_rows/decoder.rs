//! The storage-line decoder of log readers: one stored line in, the record it holds and its
//! events out, with delta chunks stored compactly.
//!
//! Lines that the reference's writer produces for delta chunks (packed rows, and verbatim
//! `assistant/chunk` delta events) are recognized byte by byte and go straight into compact
//! storage without building JSON trees. Every other line, and every line the fast path does
//! not fully recognize (another key order, whitespace, non-canonical numbers, anything that
//! fails validation), takes the general path: JSON parse, then [`decode_storage_record`]'s
//! rules. Both paths give the same record and the same events for the lines the fast path
//! accepts.

use std::borrow::Cow;

use super::{Error, PackedRow};
use crate::Event;
use crate::event::Envelope;
use crate::event::compact::{DeltaKind, DeltaMeta, EventSink};
use crate::json::{self, MAX_SAFE_INTEGER, Number, ParseError, Value};

/// What one stored line holds (see [`StorageDecoder::decode_line`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum LineRecord {
    /// The line is not JSON (the parser's error; offsets are into the line decoded as UTF-8
    /// with invalid bytes replaced by U+FFFD).
    NotJson(ParseError),
    /// A packed row that fails validation (`malformed <tag> storage row: …`).
    MalformedRow(Error),
    /// A record stored verbatim, not a packed row, that is a valid event envelope
    /// ([`Event::from_value`]): its event was pushed.
    Event,
    /// A record stored verbatim, not a packed row, that is not a valid event envelope.
    Invalid(Value),
    /// `count` `assistant/chunk` events with seqs `seq0`, `seq0 + 1`, … were pushed: the
    /// members of a packed row, or one verbatim delta chunk event (`count` 1).
    Chunks {
        /// The seq of the first event.
        seq0: u64,
        /// How many events.
        count: usize,
    },
}

/// Decodes stored lines into events (`JSON.parse` then `decodeStorageRecord`, §3.3 of the
/// persistence spec), keeping delta chunk events in compact shared blocks.
///
/// Events accumulate in line order until [`StorageDecoder::take_events`]. The decoder applies
/// no log rules (seq contiguity, torn tails): its caller does, with the [`LineRecord`]s.
///
/// ```
/// use session_core::chunk_rows::{LineRecord, StorageDecoder};
///
/// let mut decoder = StorageDecoder::new();
/// let row = br#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#;
/// assert!(matches!(decoder.decode_line(row), LineRecord::Chunks { seq0: 4, count: 3 }));
/// let events = decoder.take_events();
/// assert_eq!(
///     events[2].to_json(),
///     r#"{"type":"assistant/chunk","seq":6,"time":13,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}}"#
/// );
/// ```
#[derive(Default)]
pub struct StorageDecoder {
    sink: EventSink,
    staged: Staged,
}

impl std::fmt::Debug for StorageDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageDecoder")
            .field("events", &self.sink.len())
            .finish_non_exhaustive()
    }
}

impl StorageDecoder {
    /// A decoder holding no events.
    pub fn new() -> StorageDecoder {
        StorageDecoder::default()
    }

    /// Decodes one line (without its newline), pushing its events.
    pub fn decode_line(&mut self, line: &[u8]) -> LineRecord {
        // One UTF-8 check serves every path: the fast paths take only lines that are UTF-8
        // (every byte outside a line's strings is ASCII syntax, so a line that is not would
        // fail in one of its strings anyway), and the general path reads the others with the
        // invalid bytes replaced. The check is `simdutf8`'s (vector instructions, chosen at run
        // time): `std::str::from_utf8` was 8 % of decoding the rows of a large log.
        let text = match simdutf8::basic::from_utf8(line) {
            Ok(text) => {
                if let Some(record) = self.fast_line(text) {
                    return record;
                }
                if let Some(event) = fast_envelope(text) {
                    self.sink.push_event(event);
                    return LineRecord::Event;
                }
                Cow::Borrowed(text)
            }
            Err(_) => String::from_utf8_lossy(line),
        };
        let value = match json::parse(&text) {
            Ok(v) => v,
            Err(e) => return LineRecord::NotJson(e),
        };
        match PackedRow::from_value(&value) {
            Err(e) => LineRecord::MalformedRow(e),
            Ok(Some(row)) => {
                row.expand_into(&mut self.sink);
                LineRecord::Chunks {
                    seq0: row.seq0(),
                    count: row.member_count(),
                }
            }
            Ok(None) => match Event::from_value(&value) {
                Ok(event) => {
                    self.sink.push_event(event);
                    LineRecord::Event
                }
                Err(_) => LineRecord::Invalid(value),
            },
        }
    }

    /// How many events the decoded lines pushed and [`StorageDecoder::take_events`] has not
    /// taken yet.
    pub fn event_count(&self) -> usize {
        self.sink.len()
    }

    /// The pushed events in line order; the decoder holds none afterwards.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.sink.take()
    }

    /// The fast path: `None` when the line is not in the exact form the reference writes (the
    /// general path then decides).
    fn fast_line(&mut self, text: &str) -> Option<LineRecord> {
        let line = text.as_bytes();
        let rest = line.strip_prefix(b"{\"type\":\"")?;
        let (kind, rest, packed) = if let Some(r) = rest.strip_prefix(b"text-chunks\",\"seq0\":") {
            (DeltaKind::Text, r, true)
        } else if let Some(r) = rest.strip_prefix(b"reasoning-chunks\",\"seq0\":") {
            (DeltaKind::Reasoning, r, true)
        } else if let Some(r) = rest.strip_prefix(b"tool-call-chunks\",\"seq0\":") {
            (DeltaKind::ToolCall, r, true)
        } else if let Some(r) = rest.strip_prefix(b"assistant/chunk\",\"seq\":") {
            (DeltaKind::Text, r, false)
        } else {
            return None;
        };
        let mut cur = Cursor::new(text, line.len() - rest.len());
        self.staged.clear();
        let record = if packed {
            self.staged.parse_row(&mut cur, kind)?
        } else {
            self.staged.parse_verbatim(&mut cur)?
        };
        if cur.pos != line.len() {
            return None;
        }
        self.staged.commit(&mut self.sink);
        Some(record)
    }
}

/// A stored event read key by key, with a long `sourceEventSeqs` array of integers read
/// straight into runs: `None` unless the line is one JSON object that the general path reads as
/// a valid event envelope that is not a packed row (the general path then decides).
fn fast_envelope(text: &str) -> Option<Event> {
    let line = text.as_bytes();
    if !line.starts_with(b"{\"") {
        return None;
    }
    let mut envelope = Envelope::default();
    let mut pos = 1;
    loop {
        let (name, after) = json::string_at(text, pos).ok()?;
        let key = envelope.key(&name).ok()?;
        pos = after;
        if line.get(pos) != Some(&b':') {
            return None;
        }
        pos += 1;
        let runs = if key.is_source_event_seqs() {
            int_runs(text, pos)
        } else {
            None
        };
        if let Some((runs, len, end)) = runs {
            envelope.source_runs(runs, len);
            pos = end;
        } else {
            let (value, end) = json::value_at(text, pos).ok()?;
            if key.is_type() && value.as_str().is_some_and(super::is_row_tag) {
                return None;
            }
            envelope.value(key, value).ok()?;
            pos = end;
        }
        match line.get(pos) {
            Some(b',') => pos += 1,
            Some(b'}') if pos + 1 == line.len() => break,
            _ => return None,
        }
    }
    envelope.finish().ok()
}

/// Runs `(first, count)` of consecutive integers, the number of integers, and the position
/// after the array.
type IntRuns = (Vec<(u64, u64)>, usize, usize);

/// A non-empty array of integers in the exact form [`Cursor::int`] reads, all non-negative,
/// starting at `pos`: its runs of consecutive values, its length and the position after it.
fn int_runs(text: &str, pos: usize) -> Option<IntRuns> {
    // The array is usually one long run (a message citing its chunks): each element is first
    // matched byte for byte against the decimal text of the previous one plus one, which
    // costs less than reading it digit by digit.
    let mut next = Decimal::default();
    int_runs_with(text, pos, |cur| {
        let n = match next.matches_at(cur.bytes, cur.pos) {
            Some(after) => {
                cur.pos = after;
                next.value
            }
            None => u64::try_from(cur.int()?).ok()?,
        };
        next.set_after(n);
        Some(n)
    })
}

/// [`int_runs`] with each element read by `element` (`None` refuses the array).
fn int_runs_with(
    text: &str,
    pos: usize,
    mut element: impl FnMut(&mut Cursor<'_>) -> Option<u64>,
) -> Option<IntRuns> {
    let mut cur = Cursor::new(text, pos);
    cur.lit("[")?;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut len = 0;
    loop {
        let n = element(&mut cur)?;
        len += 1;
        match runs.last_mut() {
            Some((first, count)) if *first + *count == n => *count += 1,
            _ => runs.push((n, 1)),
        }
        match cur.peek()? {
            b',' => cur.pos += 1,
            b']' => return Some((runs, len, cur.pos + 1)),
            _ => return None,
        }
    }
}

/// The decimal text of a non-negative integer, kept to match the next element of a run.
struct Decimal {
    /// The digits, right-aligned: `digits[start..]`.
    digits: [u8; 20],
    start: usize,
    value: u64,
}

impl Default for Decimal {
    /// No value: matches nothing.
    fn default() -> Decimal {
        Decimal {
            digits: [0; 20],
            start: 20,
            value: 0,
        }
    }
}

impl Decimal {
    /// Becomes the text of `n + 1`: an increment of the previous text when `n` is its value,
    /// else written out.
    fn set_after(&mut self, n: u64) {
        let Some(value) = n.checked_add(1) else {
            *self = Decimal::default();
            return;
        };
        if self.start < self.digits.len() && self.value == n {
            let mut i = self.digits.len();
            loop {
                i -= 1;
                if self.digits[i] != b'9' {
                    self.digits[i] += 1;
                    break;
                }
                self.digits[i] = b'0';
                if i == self.start {
                    // All nines: one more digit (`u64::MAX` has 20, `value` is below it).
                    self.start -= 1;
                    self.digits[self.start] = b'1';
                    break;
                }
            }
        } else {
            let mut i = self.digits.len();
            let mut v = value;
            loop {
                i -= 1;
                self.digits[i] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            self.start = i;
        }
        self.value = value;
    }

    /// Where the text of `value` ends when `line` holds it, as the whole integer literal that
    /// [`Cursor::int`] would read, at `pos`; `None` otherwise (the caller then reads the
    /// literal there as [`Cursor::int`] does).
    fn matches_at(&self, line: &[u8], pos: usize) -> Option<usize> {
        let text = &self.digits[self.start..];
        // `Cursor::int` reads at most 15 digits.
        if text.is_empty() || text.len() > 15 {
            return None;
        }
        let n = text.len();
        let end = pos.checked_add(n)?;
        let after = if let Some(word) = line.get(pos..).and_then(<[u8]>::first_chunk::<8>)
            && n < 8
        {
            // Up to 7 digits (every seq below 10^7) and the byte after them, in one load: a
            // slice comparison called `memcmp` for each element of a long array, and took
            // longer than the rest of the element's work.
            let expected = u64::from_le_bytes(self.low_word()) >> (8 * (8 - n));
            let mask = (1u64 << (8 * n)) - 1;
            if (u64::from_le_bytes(*word) ^ expected) & mask != 0 {
                return None;
            }
            Some(word[n])
        } else {
            if line.get(pos..end)? != text {
                return None;
            }
            line.get(end).copied()
        };
        // A longer literal, or a fraction or exponent: not this integer.
        match after {
            Some(b'0'..=b'9' | b'.' | b'e' | b'E') => None,
            _ => Some(end),
        }
    }

    /// The last eight bytes of `digits`: the text, right-aligned, in the high bytes of a
    /// little-endian word.
    fn low_word(&self) -> [u8; 8] {
        let mut word = [0; 8];
        word.copy_from_slice(&self.digits[12..]);
        word
    }
}

/// A byte cursor over one line.
struct Cursor<'a> {
    /// The line's bytes (`text`'s).
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str, pos: usize) -> Cursor<'a> {
        Cursor {
            bytes: text.as_bytes(),
            text,
            pos,
        }
    }

    fn lit(&mut self, s: &str) -> Option<()> {
        if self.bytes.get(self.pos..)?.starts_with(s.as_bytes()) {
            self.pos += s.len();
            Some(())
        } else {
            None
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// An integer literal that JavaScript prints exactly as written (at most 15 digits, no
    /// leading zero, not `-0`, no fraction or exponent): what the reference writes for safe
    /// integers. Such a literal parses to the same number as the general parser gives.
    fn int(&mut self) -> Option<i64> {
        let rest = self.bytes.get(self.pos..)?;
        let negative = rest.first() == Some(&b'-');
        let body = &rest[usize::from(negative)..];
        let mut v: i64 = 0;
        let mut digits = 0;
        for &b in body.iter().take(16) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v * 10 + i64::from(d);
            digits += 1;
        }
        if digits == 0
            || digits > 15
            || (digits > 1 && body[0] == b'0')
            || matches!(body.get(digits), Some(b'.' | b'e' | b'E'))
            || (negative && v == 0)
        {
            return None;
        }
        self.pos += usize::from(negative) + digits;
        Some(if negative { -v } else { v })
    }

    /// A string literal, decoded exactly as the general parser decodes it; `None` for
    /// anything the general parser would refuse or read differently (invalid UTF-8 included).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let bytes = self.bytes;
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.pos + 1;
        let mut end = json::string_special(bytes, start);
        if bytes.get(end) == Some(&b'"') {
            // Quotes are ASCII, so both ends are character boundaries.
            let s = self.text.get(start..end)?;
            self.pos = end + 1;
            return Some(Cow::Borrowed(s));
        }
        // Escapes: find the closing quote, then decode the literal with the general rules.
        loop {
            match bytes.get(end) {
                Some(b'"') => break,
                Some(b'\\') => end = json::string_special(bytes, end + 2),
                _ => return None,
            }
        }
        let literal = self.text.get(self.pos..=end)?;
        let (s, after) = json::string_at(literal, 0).ok()?;
        if after != literal.len() {
            return None;
        }
        self.pos = end + 1;
        Some(s)
    }
}

/// A recognized line, before it is committed to the sink.
#[derive(Default)]
struct Staged {
    kind: Option<DeltaKind>,
    turn: i64,
    step: i64,
    index: i64,
    id: String,
    name: Option<String>,
    parsed_order: bool,
    seq0: u64,
    times: Vec<i64>,
    text: String,
    ends: Vec<usize>,
}

const MAX_SAFE: i64 = MAX_SAFE_INTEGER;

impl Staged {
    fn clear(&mut self) {
        self.kind = None;
        self.name = None;
        self.id.clear();
        self.times.clear();
        self.text.clear();
        self.ends.clear();
    }

    fn push_text(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    /// `…"seq0":S,"time0":T,"data":{"turn":…,"step":…,"index":…,"dt":[…],` then
    /// `"texts":[…]}}` or `"id":…,("name":…,)?"args":[…]}}`, validated as
    /// [`PackedRow::from_value`] does (the cursor is after `"seq0":`).
    fn parse_row(&mut self, cur: &mut Cursor<'_>, kind: DeltaKind) -> Option<LineRecord> {
        let seq0 = u64::try_from(cur.int()?).ok()?;
        cur.lit(",\"time0\":")?;
        let time0 = cur.int()?;
        cur.lit(",\"data\":{\"turn\":")?;
        self.turn = cur.int()?;
        cur.lit(",\"step\":")?;
        self.step = cur.int()?;
        cur.lit(",\"index\":")?;
        self.index = cur.int()?;
        cur.lit(",\"dt\":[")?;
        self.times.push(time0);
        let mut time = time0;
        if cur.peek() == Some(b']') {
            cur.pos += 1;
        } else {
            loop {
                time += cur.int()?;
                if time.unsigned_abs() > MAX_SAFE.unsigned_abs() {
                    return None;
                }
                self.times.push(time);
                match cur.peek()? {
                    b',' => cur.pos += 1,
                    b']' => {
                        cur.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if kind.is_tool() {
            cur.lit(",\"id\":")?;
            let id = cur.string()?;
            self.id.push_str(&id);
            if cur.lit(",\"name\":").is_some() {
                self.name = Some(cur.string()?.into_owned());
            }
            cur.lit(",\"args\":[")?;
        } else {
            cur.lit(",\"texts\":[")?;
        }
        loop {
            let s = cur.string()?;
            self.push_text(&s);
            match cur.peek()? {
                b',' => cur.pos += 1,
                b']' => {
                    cur.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
        cur.lit("}}")?;
        let count = self.ends.len();
        if self.times.len() != count || seq0 + (count as u64 - 1) > MAX_SAFE.unsigned_abs() {
            return None;
        }
        self.kind = Some(kind);
        self.seq0 = seq0;
        self.parsed_order = false;
        Some(LineRecord::Chunks { seq0, count })
    }

    /// `…"seq":S,"time":T,"data":{"turn":…,"step":…,"chunk":{"type":"<kind>","index":…,`
    /// then `"text":…}}}` or `"id":…,("name":…,)?"argumentsDelta":…}}}` (the cursor is after
    /// `"seq":`).
    fn parse_verbatim(&mut self, cur: &mut Cursor<'_>) -> Option<LineRecord> {
        let seq = u64::try_from(cur.int()?).ok()?;
        cur.lit(",\"time\":")?;
        let time = cur.int()?;
        cur.lit(",\"data\":{\"turn\":")?;
        self.turn = cur.int()?;
        cur.lit(",\"step\":")?;
        self.step = cur.int()?;
        cur.lit(",\"chunk\":{\"type\":\"")?;
        let kind = if cur.lit("text-delta\"").is_some() {
            DeltaKind::Text
        } else if cur.lit("reasoning-delta\"").is_some() {
            DeltaKind::Reasoning
        } else if cur.lit("tool-call-delta\"").is_some() {
            DeltaKind::ToolCall
        } else {
            return None;
        };
        cur.lit(",\"index\":")?;
        self.index = cur.int()?;
        if kind.is_tool() {
            cur.lit(",\"id\":")?;
            let id = cur.string()?;
            self.id.push_str(&id);
            if cur.lit(",\"name\":").is_some() {
                self.name = Some(cur.string()?.into_owned());
            }
            cur.lit(",\"argumentsDelta\":")?;
        } else {
            cur.lit(",\"text\":")?;
        }
        let s = cur.string()?;
        self.push_text(&s);
        cur.lit("}}}")?;
        self.times.push(time);
        self.kind = Some(kind);
        self.seq0 = seq;
        self.parsed_order = true;
        Some(LineRecord::Chunks {
            seq0: seq,
            count: 1,
        })
    }

    /// Whether `meta` holds exactly the staged shared fields.
    fn matches(&self, kind: DeltaKind, meta: &DeltaMeta) -> bool {
        fn int_is(v: &Value, n: i64) -> bool {
            matches!(v, Value::Number(x) if !x.is_verbatim() && x.as_i64() == Some(n))
        }
        meta.kind == kind
            && meta.parsed_order == self.parsed_order
            && int_is(&meta.turn, self.turn)
            && int_is(&meta.step, self.step)
            && int_is(&meta.index, self.index)
            && (!kind.is_tool()
                || (meta.id.as_str() == Some(self.id.as_str())
                    && meta.name.as_ref().map(Value::as_str) == self.name.as_deref().map(Some)))
    }

    /// Pushes the staged members into `sink`.
    fn commit(&self, sink: &mut EventSink) {
        let Some(kind) = self.kind else {
            return;
        };
        if !sink.current_meta().is_some_and(|m| self.matches(kind, m)) {
            let int =
                |n: i64| Value::Number(Number::from_i64(n).unwrap_or_else(|| Number::from(0u8)));
            sink.set_meta(DeltaMeta {
                kind,
                turn: int(self.turn),
                step: int(self.step),
                index: int(self.index),
                id: if kind.is_tool() {
                    Value::from(self.id.as_str())
                } else {
                    Value::Null
                },
                name: self.name.as_deref().map(Value::from),
                parsed_order: self.parsed_order,
            });
        }
        sink.push_members(self.seq0, &self.times, &self.text, &self.ends);
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use proptest::prelude::*;

    use super::*;
    use crate::chunk_rows::{Decoded, decode_storage_record, write_batch_lines};
    use crate::event::KeyOrder;

    /// The general path alone: `JSON.parse`, `decodeStorageRecord`, then the envelope check.
    fn reference(line: &[u8]) -> (String, Vec<Event>) {
        let text = String::from_utf8_lossy(line);
        let value = match json::parse(&text) {
            Ok(v) => v,
            Err(e) => return (format!("not json: {e}"), Vec::new()),
        };
        match decode_storage_record(value) {
            Err(e) => (format!("malformed: {e}"), Vec::new()),
            Ok(Decoded::Expanded(events)) => (
                format!("chunks {} {}", events[0].seq(), events.len()),
                events,
            ),
            Ok(Decoded::Passthrough(v)) => match Event::from_value(&v) {
                // A verbatim delta chunk: the fast path reports it as one chunk event.
                Ok(e) if is_delta(&e) => (format!("chunks {} 1", e.seq()), vec![e]),
                Ok(e) => (format!("record {}", e.to_json()), vec![e]),
                Err(_) => (format!("invalid {}", v.to_json()), Vec::new()),
            },
        }
    }

    fn is_delta(e: &Event) -> bool {
        e.event_type() == "assistant/chunk"
            && e.surface_op_value().is_none()
            && e.source_event_seqs_value().is_none()
            && !e.ignorable()
            && super::super::is_packable(e)
    }

    fn describe(record: &LineRecord, events: &[Event]) -> String {
        match record {
            LineRecord::NotJson(e) => format!("not json: {e}"),
            LineRecord::MalformedRow(e) => format!("malformed: {e}"),
            LineRecord::Event => {
                let e = &events[0];
                if is_delta(e) {
                    format!("chunks {} 1", e.seq())
                } else {
                    format!("record {}", e.to_json())
                }
            }
            LineRecord::Invalid(value) => format!("invalid {}", value.to_json()),
            LineRecord::Chunks { seq0, count } => format!("chunks {seq0} {count}"),
        }
    }

    fn assert_same_events(got: &[Event], want: &[Event], line: &str) {
        assert_eq!(got.len(), want.len(), "{line}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g, w, "{line}");
            assert_eq!(w, g, "{line}");
            assert_eq!(g.to_json(), w.to_json(), "{line}");
            assert_eq!(g.key_order(), w.key_order(), "{line}");
            assert_eq!(g.to_value().to_json(), w.to_value().to_json(), "{line}");
            assert_eq!(g.data(), w.data(), "{line}");
            assert_eq!(g.data().to_json(), w.data().to_json(), "{line}");
            assert_eq!(g.event_type(), w.event_type());
            assert_eq!((g.seq(), g.time()), (w.seq(), w.time()));
            assert!(g.ptr_eq(&g.clone()));
        }
    }

    /// Decodes `line` with the decoder and with the general path and requires the same
    /// record and the same events.
    fn check_line(line: &str) {
        let mut decoder = StorageDecoder::new();
        let record = decoder.decode_line(line.as_bytes());
        let events = decoder.take_events();
        let (want, want_events) = reference(line.as_bytes());
        assert_eq!(describe(&record, &events), want, "{line}");
        assert_same_events(&events, &want_events, line);
    }

    #[test]
    fn integer_runs_match_reading_every_element() {
        /// `int_runs` without the match against the previous element plus one.
        fn parsed(line: &str, pos: usize) -> Option<IntRuns> {
            int_runs_with(line, pos, |cur| u64::try_from(cur.int()?).ok())
        }
        let mut arrays: Vec<String> = Vec::new();
        // Runs across every digit-count boundary, up to the 15 digits `Cursor::int` reads.
        for p in 0..16u32 {
            let edge = 10u64.pow(p);
            let from = edge.saturating_sub(3);
            let items: Vec<String> = (from..edge + 3).map(|n| n.to_string()).collect();
            arrays.push(format!("[{}]", items.join(",")));
        }
        // Breaks, repeats, near misses and non-integers after a run.
        for tail in [
            "8,9,10,12,13",
            "8,9,9,10",
            "8,9,100",
            "8,9,1e1",
            "8,9,10.0",
            "8,9,10e0",
            "8,9,010",
            "8,9,-10",
            "8,9,10 ",
            "8,9,10]",
            "8,9,10,",
            "8,9,1",
            "9,10,11x",
            "0,1,2,3",
            "0,0,1",
            "99,100,101,1000",
            "1234566,1234567,1234578",
            "1234566,1234567,2234568",
            "1234566,1234567,12345680",
            "999999999999998,999999999999999,1000000000000000",
        ] {
            arrays.push(format!("[{tail}]"));
            arrays.push(format!("[{tail}"));
        }
        for array in &arrays {
            for suffix in ["", ",\"surfaceOp\":\"append\"}", "}"] {
                let line = format!("{array}{suffix}");
                assert_eq!(int_runs(&line, 0), parsed(&line, 0), "{line}");
            }
        }
    }

    #[test]
    fn integers_are_read_like_the_general_parser() {
        for text in [
            "0",
            "-0",
            "00",
            "01",
            "-01",
            "7",
            "-7",
            "123456789012345",
            "1234567890123456",
            "-999999999999999",
            "9007199254740993",
            "1.0",
            "1e3",
            "1E3",
            "-",
            "",
            "12x",
            "+1",
        ] {
            let mut cur = Cursor::new(text, 0);
            let fast = cur.int();
            let general = json::parse(text).ok().and_then(|v| match &v {
                Value::Number(n) if !n.is_verbatim() => n.as_i64(),
                _ => None,
            });
            match fast {
                // The cursor stops at the first byte that cannot continue the literal.
                Some(n) => assert_eq!(
                    Some(n),
                    json::parse(&text[..cur.pos]).ok().and_then(|v| v.as_i64()),
                    "{text}"
                ),
                None => assert!(
                    general.is_none() || text.trim_start_matches('-').len() > 15,
                    "{text}"
                ),
            }
        }
    }

    #[test]
    fn fast_path_lines_match_the_general_path() {
        for line in [
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,-2],"texts":["a","\n\"\\ \u00e9 \ud83d\ude00","c"]}}"#,
            r#"{"type":"reasoning-chunks","seq0":0,"time0":-5,"data":{"turn":-3,"step":0,"index":7,"dt":[],"texts":["only"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":1786074901017,"data":{"turn":1,"step":2,"index":2,"dt":[111,56,0],"id":"call_0","name":"read","args":["","{","\"","file"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":1,"data":{"turn":1,"step":2,"index":2,"dt":[1],"id":"c","args":["x","y"]}}"#,
            r#"{"type":"assistant/chunk","seq":37,"time":1786074895264,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":"ional"}}}"#,
            r#"{"type":"assistant/chunk","seq":3,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":""}}}"#,
            r#"{"type":"assistant/chunk","seq":3,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"i","name":"n","argumentsDelta":"{"}}}"#,
            r#"{"type":"assistant/chunk","seq":3,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"i","argumentsDelta":"{"}}}"#,
        ] {
            check_line(line);
            let mut decoder = StorageDecoder::new();
            decoder.decode_line(line.as_bytes());
            // The fast path took it: members are compact.
            assert!(
                decoder
                    .take_events()
                    .iter()
                    .all(|e| e.as_member().is_some()),
                "{line}"
            );
        }
    }

    #[test]
    fn near_misses_take_the_general_path_with_its_results() {
        for line in [
            // Numbers the reference would not write, or that fail validation.
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1.0,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":-0,"step":1,"index":0,"dt":[1e0,2],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":-1,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":9007199254740990,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":900719925474099,"data":{"turn":1,"step":1,"index":0,"dt":[999999999999999,999999999999999,999999999999999,999999999999999,999999999999999,999999999999999,999999999999999,999999999999999,999999999999999,999999999999999],"texts":["a","b","c","d","e","f","g","h","i","j","k"]}}"#,
            r#"{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
            r#"{"type":"text-chunks","seq0":999999999999999,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a",2,"c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","\ud800","c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"],"x":1}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]},"x":1}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}} "#,
            "{\"type\":\"text-chunks\",\"seq0\":4,\"time0\":10,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,2],\"texts\":[\"a\",\"b\",\"c\"]}}\r",
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"turn":2,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":1,"data":{"turn":1,"step":2,"index":2,"dt":[1],"id":5,"args":["x","y"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":1,"data":{"turn":1,"step":2,"index":2,"dt":[1],"id":"c","name":null,"args":["x","y"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":1,"data":{"turn":1,"step":2,"index":2,"dt":[1],"args":["x","y"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"step":1,"turn":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]"#,
            r#"{"type":"assistant/chunk","seq":1.0,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}}"#,
            r#"{"type":"assistant/chunk","seq":-1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x","more":1}}}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}},"ignorable":true}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"name":"n","id":"i","argumentsDelta":"{"}}}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x\u0001"}}}"#,
            r#"{"type":"turn/end","seq":5,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{"message":{"id":"m"}},"sourceEventSeqs":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,30,31,32],"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{},"sourceEventSeqs":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,30,31,1.0],"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{},"sourceEventSeqs":[1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33],"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{},"sourceEventSeqs":[1,2,-3],"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{},"sourceEventSeqs":[],"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{},"sourceEventSeqs":[1, 2],"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":40,"time":1,"data":{},"sourceEventSeqs":"x","surfaceOp":"append"}"#,
            r#"{"type":"x","seq":1,"time":0,"data":{},"seq":2}"#,
            r#"{"type":"x","seq":1,"time":0,"data":{},"ignorable":true}"#,
            r#"{"type":"x","seq":1,"time":0,"data":{},"ignorable":false}"#,
            r#"{"type":"x","seq":1,"time":0}"#,
            r#"{"seq":1,"time":0,"data":[1,{"a":"\u00e9"}],"type":"x"}"#,
            r#"{"type":"text-chunks","seq":1,"time":0,"data":{}}"#,
            r#"{"type":"x","seq":1,"time":0,"data":{}}x"#,
            r#"{"type":"x","seq":1,"time":0,"data":{},}"#,
            r#"{"type":"x","seq":1,"time":0,"data":{} }"#,
            r#"{ "type":"x","seq":1,"time":0,"data":{}}"#,
            r#"{"type":"x","seq":1,"time":0,"data":"\ud800"}"#,
            r#"{"type":"x","seq":"5","time":0,"data":{}}"#,
            "",
            "\r",
            "garbage",
            "[1,2]",
        ] {
            check_line(line);
        }
        // Invalid UTF-8 is replaced, as the general path does.
        let line = b"{\"type\":\"assistant/chunk\",\"seq\":1,\"time\":0,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"a\xFFb\"}}}";
        let mut decoder = StorageDecoder::new();
        let record = decoder.decode_line(line);
        let events = decoder.take_events();
        assert_eq!(describe(&record, &events), reference(line).0);
        assert_same_events(&events, &reference(line).1, "invalid utf-8");
    }

    #[test]
    fn a_line_that_is_not_utf8_anywhere_decodes_like_the_general_path() {
        // A byte that is not UTF-8, in a text, in a key, in the syntax: each line is read as
        // the general path reads it (with the invalid byte replaced), in both forms.
        let lines: [&[u8]; 2] = [
            br#"{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["ab","c\"d"]}}"#,
            br#"{"type":"assistant/chunk","seq":3,"time":4,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"xy"}}}"#,
        ];
        for line in lines {
            for at in 0..line.len() {
                for byte in [0x80u8, 0xC3, 0xFF] {
                    let mut damaged = line.to_vec();
                    damaged[at] = byte;
                    let mut decoder = StorageDecoder::new();
                    let record = decoder.decode_line(&damaged);
                    let events = decoder.take_events();
                    let (want, want_events) = reference(&damaged);
                    let shown = String::from_utf8_lossy(&damaged);
                    assert_eq!(describe(&record, &events), want, "{shown}");
                    assert_same_events(&events, &want_events, &shown);
                }
            }
        }
    }

    #[test]
    fn rows_that_cross_block_boundaries_keep_their_members() {
        fn row(seq0: u64, dts: &[i64], texts: &[String]) -> String {
            let dt: Vec<String> = dts.iter().map(ToString::to_string).collect();
            let texts: Vec<String> = texts.iter().map(|t| format!("\"{t}\"")).collect();
            format!(
                r#"{{"type":"reasoning-chunks","seq0":{seq0},"time0":5,"data":{{"turn":1,"step":1,"index":0,"dt":[{}],"texts":[{}]}}}}"#,
                dt.join(","),
                texts.join(",")
            )
        }
        let texts = |n: usize, tag: &str| -> Vec<String> {
            (0..n).map(|k| format!("{tag}{k}\u{e9}")).collect()
        };
        // A row longer than a block, rows of 7 members (a block holds 1,024, no multiple of
        // 7), and a row with a time step too large for a block's relative times in its middle.
        let mut lines = vec![row(0, &[1; 2999], &texts(3000, "long"))];
        let mut seq = 3000;
        for i in 0..400 {
            lines.push(row(seq, &[1; 6], &texts(7, &format!("r{i}-"))));
            seq += 7;
        }
        let mut dts = vec![1; 99];
        dts[50] = 3_000_000_000;
        lines.push(row(seq, &dts, &texts(100, "jump")));
        let mut decoder = StorageDecoder::new();
        let mut want = Vec::new();
        for line in &lines {
            assert!(matches!(
                decoder.decode_line(line.as_bytes()),
                LineRecord::Chunks { .. }
            ));
            want.extend(reference(line.as_bytes()).1);
        }
        let got = decoder.take_events();
        assert_same_events(&got, &want, "rows across blocks");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.to_json(), w.to_json());
        }
        let block_of = |e: &Event| {
            e.as_member()
                .map(|(b, _)| std::ptr::from_ref(b).cast::<()>())
        };
        // The long row spans three blocks; the row with the time jump, two.
        let long: std::collections::HashSet<_> = got[..3000].iter().map(block_of).collect();
        assert_eq!(long.len(), 3);
        let last = got.len() - 100;
        assert_ne!(block_of(&got[last + 50]), block_of(&got[last + 51]));
        // No block holds more than its bound.
        let mut per_block = std::collections::HashMap::new();
        for e in &got {
            *per_block.entry(block_of(e)).or_insert(0usize) += 1;
        }
        assert!(
            per_block
                .values()
                .all(|&n| n <= crate::event::compact::BLOCK_MEMBERS)
        );
    }

    #[test]
    fn members_keep_line_order_and_span_blocks() {
        let mut decoder = StorageDecoder::new();
        let mut want = Vec::new();
        let mut seq = 0u64;
        let mut lines = Vec::new();
        for i in 0..700u64 {
            // Rows of 3 members, verbatim deltas, other events, and huge time jumps that do
            // not fit a block's relative times.
            let time0 = if i % 97 == 0 {
                4_000_000_000 * (i as i64)
            } else {
                i as i64
            };
            lines.push(format!(
                r#"{{"type":"text-chunks","seq0":{seq},"time0":{time0},"data":{{"turn":1,"step":{},"index":0,"dt":[1,2],"texts":["a{i}","b","c"]}}}}"#,
                i / 50
            ));
            seq += 3;
            lines.push(format!(
                r#"{{"type":"assistant/chunk","seq":{seq},"time":{time0},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"v{i}"}}}}}}"#
            ));
            seq += 1;
            lines.push(format!(
                r#"{{"type":"step/start","seq":{seq},"time":0,"data":{{"turn":1,"step":{i}}}}}"#
            ));
            seq += 1;
        }
        for line in &lines {
            decoder.decode_line(line.as_bytes());
            want.extend(reference(line.as_bytes()).1);
        }
        assert_eq!(decoder.event_count(), want.len());
        let got = decoder.take_events();
        assert_eq!(decoder.event_count(), 0);
        assert_same_events(&got, &want, "many lines");
        // Several blocks were used, and members of one block share it.
        let blocks: std::collections::HashSet<*const ()> = got
            .iter()
            .filter_map(|e| {
                e.as_member()
                    .map(|(b, _)| std::ptr::from_ref(b).cast::<()>())
            })
            .collect();
        assert!(blocks.len() > 3, "{}", blocks.len());
        // Members are not identical to other members, and equal to their own clones.
        assert!(!got[0].ptr_eq(&got[1]));
        assert_ne!(got[0], got[1]);
        assert_eq!(got[5].key_order(), KeyOrder::APPEND);
        assert_eq!(got[3].key_order(), KeyOrder::PARSED);
    }

    fn arb_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,6}",
            "[\\PC]{0,4}",
            Just("\"\\\n\t\u{1}\u{7f}\u{2028}/".to_owned()),
        ]
    }

    fn arb_number() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => (0i64..5).prop_map(|n| n.to_string()),
            1 => Just("-0".to_owned()),
            1 => Just("1.0".to_owned()),
            1 => Just("2e0".to_owned()),
            1 => (-999_999_999_999_999i64..999_999_999_999_999).prop_map(|n| n.to_string()),
        ]
    }

    #[derive(Debug, Clone)]
    struct Chunk {
        kind: u8,
        turn: String,
        index: String,
        id: String,
        name: Option<String>,
        text: String,
        gap: i64,
    }

    fn arb_chunk() -> impl Strategy<Value = Chunk> {
        (
            0u8..3,
            arb_number(),
            arb_number(),
            prop_oneof!["c[0-9]", Just("c\u{e9}\"".to_owned())],
            proptest::option::of("[a-z]{1,3}"),
            arb_text(),
            prop_oneof![Just(0i64), -5i64..200, Just(3_000_000_000i64)],
        )
            .prop_map(|(kind, turn, index, id, name, text, gap)| Chunk {
                kind,
                turn,
                index,
                id,
                name,
                text,
                gap,
            })
    }

    fn chunk_line(c: &Chunk, seq: u64, time: i64) -> String {
        let kind = ["text-delta", "reasoning-delta", "tool-call-delta"][c.kind as usize];
        let mut chunk = format!(r#"{{"type":"{kind}","index":{}"#, c.index);
        let text = Value::from(c.text.as_str()).to_json();
        if c.kind == 2 {
            let _ = write!(chunk, r#","id":{}"#, Value::from(c.id.as_str()).to_json());
            if let Some(name) = &c.name {
                let _ = write!(chunk, r#","name":"{name}""#);
            }
            let _ = write!(chunk, r#","argumentsDelta":{text}}}"#);
        } else {
            let _ = write!(chunk, r#","text":{text}}}"#);
        }
        format!(
            r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":{},"step":1,"chunk":{chunk}}}}}"#,
            c.turn
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        // Batches packed by the writer decode to the same events through both paths, and a
        // truncated or bit-flipped line gives the same record as the general path.
        #[test]
        fn packed_batches_decode_like_the_general_path(
            runs in proptest::collection::vec(
                (arb_chunk(), proptest::collection::vec((arb_text(), -5i64..300), 0..6)),
                1..12,
            ),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            // Runs of chunks that differ only in text and time, so that rows form.
            let chunks: Vec<Chunk> = runs
                .into_iter()
                .flat_map(|(first, rest)| {
                    let more: Vec<Chunk> = rest
                        .into_iter()
                        .map(|(text, gap)| Chunk { text, gap, ..first.clone() })
                        .collect();
                    std::iter::once(first).chain(more)
                })
                .collect();
            let mut time = 1_786_074_891_852i64;
            let events: Vec<Event> = chunks
                .iter()
                .enumerate()
                .map(|(seq, c)| {
                    time += c.gap;
                    Event::parse(&chunk_line(c, seq as u64, time)).unwrap()
                })
                .collect();
            let mut text = String::new();
            write_batch_lines(&events, true, &mut text);
            let mut decoder = StorageDecoder::new();
            let mut want = Vec::new();
            let mut got = Vec::new();
            for line in text.split('\n') {
                let record = decoder.decode_line(line.as_bytes());
                let line_events = decoder.take_events();
                let (desc, events) = reference(line.as_bytes());
                prop_assert_eq!(describe(&record, &line_events), desc);
                want.extend(events);
                got.extend(line_events);
            }
            assert_same_events(&got, &want, &text);
            // The same events as were packed (a packed member has a live append's key order).
            prop_assert_eq!(&got, &events);
            let lines: Vec<String> = got.iter().map(Event::to_json).collect();
            let packed: Vec<String> = events.iter().map(Event::to_json).collect();
            prop_assert_eq!(lines, packed);
            // Damaged lines.
            for line in text.split('\n') {
                let bytes = line.as_bytes();
                let truncated = &bytes[..cut.index(bytes.len() + 1)];
                let mut flipped = bytes.to_vec();
                flipped[flip.index(bytes.len())] = byte;
                for damaged in [truncated, &flipped[..]] {
                    let mut decoder = StorageDecoder::new();
                    let record = decoder.decode_line(damaged);
                    let events = decoder.take_events();
                    let (desc, want) = reference(damaged);
                    prop_assert_eq!(describe(&record, &events), desc);
                    assert_same_events(&events, &want, &String::from_utf8_lossy(damaged));
                }
            }
        }
    }
}
