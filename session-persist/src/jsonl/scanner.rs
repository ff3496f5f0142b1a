//! `SessionLogScanner`: the incremental reader of the logical JSONL text.
//!
//! The scanner is fed raw bytes in arbitrary chunks (lines may cross chunk and frame
//! boundaries; only an unfinished line is copied). Each complete line is decoded as UTF-8
//! lossily, parsed, and expanded from packed chunk rows. It keeps the valid contiguous prefix and
//! decides what is a torn tail and what is corruption:
//!
//! * The first unparsable line (blank lines and valid JSON that is not an object included) or
//!   seq gap becomes the pending *issue*; the preserved prefix stops before it.
//! * Lines after an issue are ignored unless they decode to a `turn/end`: a later `turn/end`
//!   proves the damage lies in the committed region, and the issue is raised as an error. A gap
//!   row that itself holds a `turn/end` raises at once.
//! * A trailing fragment without a newline is torn and ignored.
//!
//! [`ScanOutput::committed_bytes`] is the end of the last accepted line; everything after it is
//! torn if and only if scanning completed without an error.

use session_core::Event;
use session_core::chunk_rows::{LineRecord, StorageDecoder};
use session_core::header::js_string;
use session_core::json::{ParseErrorKind, Value};

use std::sync::PoisonError;

use super::header_line::{ParsedHeader, parse_strict};
use super::seal::LineDigest;
use crate::backend::SharedEventSink;
use crate::error::{Error, Result, UnparsableLine};

/// The first problem found in the body, raised only if a later line holds a `turn/end`.
#[derive(Debug, Clone)]
enum Issue {
    Unparsable {
        line: u64,
        cause: UnparsableLine,
    },
    Gap {
        line: u64,
        expected: u64,
        got: String,
    },
}

impl Issue {
    fn to_error(&self) -> Error {
        match self {
            Issue::Unparsable { line, cause } => Error::UnparsableCommitted {
                line: *line,
                cause: cause.clone(),
            },
            Issue::Gap {
                line,
                expected,
                got,
            } => Error::SeqGap {
                line: *line,
                expected: *expected,
                got: got.clone(),
            },
        }
    }
}

/// The complete lines at the start of a buffer, decoded (parsed and expanded) but not yet
/// judged: what [`decode_lines`] produces, possibly on another thread, for
/// [`SessionLogScanner::merge`] to apply in log order.
#[derive(Debug, Default)]
pub(crate) struct DecodedLines {
    /// Each complete line: its length without the newline, and what it holds.
    lines: Vec<(usize, LineRecord)>,
    /// The events the lines pushed, in line order.
    events: Vec<Event>,
    /// The bytes of the complete lines, newlines included.
    consumed: usize,
}

/// The index of the first `\n` of `bytes` at or after `from`.
pub(crate) fn find_newline(bytes: &[u8], from: usize) -> Option<usize> {
    memchr::memchr(b'\n', bytes.get(from..)?).map(|p| from + p)
}

/// The index of the last `\n` of `bytes`.
pub(crate) fn rfind_newline(bytes: &[u8]) -> Option<usize> {
    // Most pieces searched are whole frames, which end at a record's newline: the last byte
    // answers without `memrchr`'s setup (about 1.5 % of a write-behind restore's samples).
    match bytes.split_last() {
        Some((b'\n', _)) => Some(bytes.len() - 1),
        _ => memchr::memrchr(b'\n', bytes),
    }
}

/// Decodes every complete line of `buf` (as if `buf` started at a line boundary).
pub(crate) fn decode_lines(buf: &[u8], decoder: &mut StorageDecoder) -> DecodedLines {
    let mut lines = Vec::with_capacity(buf.len() / 128);
    let mut start = 0;
    while let Some(end) = find_newline(buf, start) {
        let line = &buf[start..end];
        lines.push((end - start, decoder.decode_line(line)));
        start = end + 1;
    }
    DecodedLines {
        lines,
        events: decoder.take_events(),
        consumed: start,
    }
}

/// What a finished scan found.
#[derive(Debug)]
pub(crate) struct ScanOutput {
    /// The header record.
    pub(crate) header: ParsedHeader,
    /// The valid contiguous prefix (stops before `invalid`).
    pub(crate) events: Vec<Event>,
    /// The index of the first contiguous record with an invalid envelope, and the events from
    /// it on (each record with an invalid envelope kept as stored, [`Event::verbatim`]).
    pub(crate) invalid: Option<(usize, Vec<Event>)>,
    /// The end of the last accepted line (the header's end when no line was accepted).
    pub(crate) committed_bytes: u64,
    /// The digest of every complete line fed after the header, when asked for
    /// ([`SessionLogScanner::digest_lines`]).
    pub(crate) lines: Option<LineDigest>,
}

/// The incremental log scanner (see the module documentation).
pub(crate) struct SessionLogScanner {
    header: ParsedHeader,
    carry: Vec<u8>,
    /// Logical offset of the next unread byte (the start of `carry`).
    offset: u64,
    line: u64,
    committed: u64,
    count: u64,
    events: Vec<Event>,
    invalid: Option<(usize, Vec<Event>)>,
    issue: Option<Issue>,
    decoder: StorageDecoder,
    /// Where accepted events go as each decoded batch is merged, instead of `events`.
    sink: Option<SharedEventSink>,
    /// The digest of the complete lines fed so far, when asked for.
    lines: Option<LineDigest>,
}

impl std::fmt::Debug for SessionLogScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLogScanner")
            .field("offset", &self.offset)
            .field("line", &self.line)
            .field("committed", &self.committed)
            .field("count", &self.count)
            .field("events", &self.events.len())
            .field("issue", &self.issue)
            .field("sink", &self.sink.is_some())
            .finish_non_exhaustive()
    }
}

impl SessionLogScanner {
    /// Starts a scan from exactly one header record: non-empty, ending in `\n`, with no other
    /// newline.
    pub(crate) fn new(header_record: &[u8]) -> Result<SessionLogScanner> {
        let Some((&b'\n', body)) = header_record.split_last() else {
            return Err(Error::EmptyLog { zstd: false });
        };
        if body.contains(&b'\n') {
            return Err(Error::EmptyLog { zstd: false });
        }
        let header = parse_strict(&String::from_utf8_lossy(body))?;
        let len = header_record.len() as u64;
        Ok(SessionLogScanner {
            header,
            carry: Vec::new(),
            offset: len,
            line: 0,
            committed: len,
            count: 0,
            events: Vec::new(),
            invalid: None,
            issue: None,
            decoder: StorageDecoder::new(),
            sink: None,
            lines: None,
        })
    }

    /// Hands every valid event accepted from now on to `sink` (started with the header),
    /// at the end of each merged batch; [`ScanOutput::events`] then holds only the events
    /// accepted after [`SessionLogScanner::detach`].
    pub(crate) fn attach(&mut self, sink: Option<&SharedEventSink>) {
        if let Some(sink) = sink {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .start(&self.header.value);
            self.sink = Some(sink.clone());
        }
    }

    /// Hashes every complete line fed from now on, its newline included, into
    /// [`ScanOutput::lines`] (the records as read, for comparing a copy with what was written).
    pub(crate) fn digest_lines(&mut self) {
        self.lines = Some(LineDigest::default());
    }

    /// Keeps the events accepted from now on in [`ScanOutput::events`].
    pub(crate) fn detach(&mut self) {
        self.sink = None;
    }

    /// Every byte fed so far, header included.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.offset + self.carry.len() as u64
    }

    /// The end of the last accepted line.
    pub(crate) fn committed_bytes(&self) -> u64 {
        self.committed
    }

    /// How many valid events the prefix holds, not counting those handed to a sink.
    pub(crate) fn event_count(&self) -> usize {
        self.events.len()
    }

    /// Feeds the next bytes of the log.
    pub(crate) fn write(&mut self, chunk: &[u8]) -> Result<()> {
        let mut rest = chunk;
        if !self.carry.is_empty() {
            let Some(nl) = find_newline(rest, 0) else {
                self.carry.extend_from_slice(rest);
                return Ok(());
            };
            let mut line = std::mem::take(&mut self.carry);
            line.extend_from_slice(&rest[..=nl]);
            rest = &rest[nl + 1..];
            if let Some(digest) = &mut self.lines {
                digest.lines(&line);
            }
            let decoded = decode_lines(&line, &mut self.decoder);
            self.merge(decoded)?;
        }
        let decoded = decode_lines(rest, &mut self.decoder);
        let consumed = decoded.consumed;
        if let Some(digest) = &mut self.lines {
            digest.lines(&rest[..consumed]);
        }
        self.merge(decoded)?;
        self.carry.extend_from_slice(&rest[consumed..]);
        Ok(())
    }

    /// Feeds the next bytes of the log, `plain`, whose complete lines were already decoded
    /// into `decoded` on the assumption that `plain` starts at a line boundary. When it does
    /// not (an earlier fragment is pending), `decoded` is dropped and `plain` is scanned here.
    pub(crate) fn write_decoded(&mut self, plain: &[u8], decoded: DecodedLines) -> Result<()> {
        if !self.carry.is_empty() {
            return self.write(plain);
        }
        let consumed = decoded.consumed;
        if let Some(digest) = &mut self.lines {
            digest.lines(&plain[..consumed]);
        }
        self.merge(decoded)?;
        self.carry.extend_from_slice(&plain[consumed..]);
        Ok(())
    }

    /// Ends the scan; a trailing fragment without a newline is torn and ignored.
    pub(crate) fn finish(self) -> ScanOutput {
        ScanOutput {
            header: self.header,
            events: self.events,
            invalid: self.invalid,
            committed_bytes: self.committed,
            lines: self.lines,
        }
    }

    /// Applies the log rules to decoded lines that continue the log at `self.offset`.
    fn merge(&mut self, decoded: DecodedLines) -> Result<()> {
        let mut events = decoded.events.into_iter();
        for (len, record) in decoded.lines {
            let start = self.offset;
            self.offset += len as u64 + 1;
            self.line += 1;
            let line = self.line;
            // What the line holds: whether it is a turn/end, its seq test (`seq === expected`,
            // with the seq as `String(seq)` in the message), and its events.
            let (has_turn_end, gap, pushed) = match &record {
                LineRecord::NotJson(e) if e.kind == ParseErrorKind::LoneSurrogate => {
                    return Err(Error::LoneSurrogate {
                        line: Some(line),
                        offset: start + e.offset as u64,
                    });
                }
                LineRecord::Event => {
                    // A valid envelope's seq is a non-negative safe integer, whose `String` is
                    // its decimal form.
                    let Some(event) = events.as_slice().first() else {
                        continue;
                    };
                    let gap =
                        (event.seq() != self.count).then(|| (self.count, event.seq().to_string()));
                    (event.event_type() == "turn/end", gap, 1)
                }
                // Valid JSON that is not an object (`null`, a number, an array) is treated
                // like any unparsable line (the reference fails on it with a TypeError, or
                // reports a seq gap; see docs/format.md).
                LineRecord::Invalid(value) if value.as_object().is_none() => {
                    self.issue.get_or_insert(Issue::Unparsable {
                        line,
                        cause: UnparsableLine::NotAnObject,
                    });
                    continue;
                }
                LineRecord::Invalid(value) => {
                    let seq = value.get("seq");
                    // `-0` equals 0.
                    let gap = (seq.and_then(Value::as_u64) != Some(self.count))
                        .then(|| (self.count, js_string(seq)));
                    let turn_end = value.get("type").and_then(Value::as_str) == Some("turn/end");
                    (turn_end, gap, 0)
                }
                LineRecord::Chunks { seq0, count } => {
                    let gap = (*seq0 != self.count).then(|| (self.count, seq0.to_string()));
                    (false, gap, *count)
                }
                // Not JSON, or a malformed packed row.
                _ => {
                    self.issue.get_or_insert_with(|| Issue::Unparsable {
                        line,
                        cause: UnparsableLine::of(&record),
                    });
                    continue;
                }
            };
            let row = events.by_ref().take(pushed);
            if let Some(issue) = &self.issue {
                if has_turn_end {
                    return Err(issue.to_error());
                }
                row.for_each(drop);
                continue;
            }
            if let Some((expected, got)) = gap {
                let issue = Issue::Gap {
                    line,
                    expected,
                    got,
                };
                let err = has_turn_end.then(|| issue.to_error());
                self.issue = Some(issue);
                if let Some(err) = err {
                    return Err(err);
                }
                row.for_each(drop);
                continue;
            }
            // After an invalid envelope the valid prefix is closed: later events go with it.
            let n = match record {
                LineRecord::Event | LineRecord::Chunks { .. } => {
                    let n = match record {
                        LineRecord::Chunks { count, .. } => count as u64,
                        _ => 1,
                    };
                    match &mut self.invalid {
                        None => self.events.extend(row),
                        Some((_, after)) => after.extend(row),
                    }
                    n
                }
                LineRecord::Invalid(value) => {
                    let event = Event::verbatim(value, self.count);
                    match &mut self.invalid {
                        None => self.invalid = Some((self.count as usize, vec![event])),
                        Some((_, after)) => after.push(event),
                    }
                    1
                }
                _ => 0,
            };
            self.count += n;
            self.committed = self.offset;
        }
        if let Some(sink) = &self.sink
            && !self.events.is_empty()
        {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .accept(&mut self.events);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n";

    fn ev(seq: u64, ty: &str) -> String {
        format!("{{\"type\":\"{ty}\",\"seq\":{seq},\"time\":0,\"data\":{{}}}}\n")
    }

    fn scan_all(body: &str) -> Result<ScanOutput> {
        let mut s = SessionLogScanner::new(HEADER.as_bytes())?;
        s.write(body.as_bytes())?;
        Ok(s.finish())
    }

    fn seqs(out: &ScanOutput) -> Vec<u64> {
        out.events.iter().map(Event::seq).collect()
    }

    #[test]
    fn newline_search_matches_a_plain_search() {
        let text = b"0123456789\nabcdefgh\n\n\xff\x0a\x8a\nxyz0123456789abcdef";
        for start in 0..text.len() {
            for end in start..=text.len() {
                let bytes = &text[start..end];
                for from in 0..=bytes.len() {
                    let want = bytes[from..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map(|p| from + p);
                    assert_eq!(find_newline(bytes, from), want);
                }
                assert_eq!(
                    rfind_newline(bytes),
                    bytes.iter().rposition(|&b| b == b'\n')
                );
            }
        }
    }

    // persistence §7.6 #37
    #[test]
    fn requires_exactly_one_newline_terminated_header_record() {
        for bad in ["", "{}", "{}\n{}\n", "\n\n"] {
            let e = SessionLogScanner::new(bad.as_bytes()).unwrap_err();
            assert!(e.to_string().contains("header-less"), "{bad:?}: {e}");
        }
    }

    // persistence §7.6 #38 (writing after `finish` is prevented by `finish` taking the scanner)
    #[test]
    fn lifecycle_and_committed_bytes() {
        let mut s = SessionLogScanner::new(HEADER.as_bytes()).unwrap();
        s.write(b"").unwrap();
        let a = ev(0, "turn/start");
        s.write(a.as_bytes()).unwrap();
        s.write(b"").unwrap();
        assert_eq!(s.committed_bytes(), (HEADER.len() + a.len()) as u64);
        // A boundary newline arriving alone completes the previous fragment.
        let b = ev(1, "step/start");
        s.write(&b.as_bytes()[..b.len() - 1]).unwrap();
        assert_eq!(s.committed_bytes(), (HEADER.len() + a.len()) as u64);
        s.write(b"\n").unwrap();
        assert_eq!(
            s.committed_bytes(),
            (HEADER.len() + a.len() + b.len()) as u64
        );
        s.write(b"{\"type\":\"assistant/chunk\",\"seq\":2,\"ti")
            .unwrap();
        assert_eq!(s.event_count(), 2);
        let out = s.finish();
        assert_eq!(seqs(&out), vec![0, 1]);
        assert_eq!(
            out.committed_bytes,
            (HEADER.len() + a.len() + b.len()) as u64
        );
    }

    // persistence §7.6 #39
    #[test]
    fn tolerable_suffix_keeps_scanning_until_a_turn_end() {
        let body = format!(
            "{}{}{}{}",
            ev(0, "turn/start"),
            ev(2, "step/start"),
            ev(3, "step/end"),
            ev(4, "turn/end")
        );
        let e = scan_all(&body).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)"
        );
    }

    // persistence §7.6 #40
    #[test]
    fn records_split_across_chunks_including_multibyte_characters() {
        let body = format!(
            "{}{{\"type\":\"user/message\",\"seq\":1,\"time\":0,\"data\":{{\"text\":\"héllo 开发 😀\"}}}}\n{}",
            ev(0, "turn/start"),
            ev(2, "turn/end")
        );
        let whole = scan_all(&body).unwrap();
        for size in [1, 2, 3, 5, 7, 64] {
            let mut s = SessionLogScanner::new(HEADER.as_bytes()).unwrap();
            let mut checkpoints = Vec::new();
            for chunk in body.as_bytes().chunks(size) {
                s.write(chunk).unwrap();
                checkpoints.push(s.event_count());
            }
            assert!(checkpoints.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(checkpoints.last(), Some(&3));
            let out = s.finish();
            assert_eq!(out.events, whole.events, "chunk size {size}");
            assert_eq!(out.committed_bytes, whole.committed_bytes);
        }
        assert_eq!(
            whole.events[1].data().get("text").and_then(Value::as_str),
            Some("héllo 开发 😀")
        );
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let mut s = SessionLogScanner::new(HEADER.as_bytes()).unwrap();
        s.write(b"{\"type\":\"x\",\"seq\":0,\"time\":0,\"data\":\"a\xFFb\"}\n")
            .unwrap();
        let out = s.finish();
        assert_eq!(out.events[0].data().as_str(), Some("a\u{FFFD}b"));
    }

    // persistence §7.6 #50
    #[test]
    fn gap_without_later_turn_end_keeps_the_prefix() {
        let out = scan_all(&format!("{}{}", ev(0, "turn/start"), ev(2, "step/start"))).unwrap();
        assert_eq!(seqs(&out), vec![0]);
        assert_eq!(
            out.committed_bytes,
            (HEADER.len() + ev(0, "turn/start").len()) as u64
        );
    }

    // persistence §7.6 #51
    #[test]
    fn gap_before_a_later_turn_end_is_corruption() {
        let body = format!("{}{}{}", ev(0, "turn/start"), ev(2, "x"), ev(3, "turn/end"));
        assert!(
            scan_all(&body)
                .unwrap_err()
                .to_string()
                .contains("seq gap in committed region")
        );
        // A gap row that itself holds the turn/end raises at once.
        let body = format!("{}{}", ev(0, "turn/start"), ev(5, "turn/end"));
        assert_eq!(
            scan_all(&body).unwrap_err().to_string(),
            "corrupt session log: seq gap in committed region at line 2 (expected 1, got 5)"
        );
    }

    // persistence §7.6 #52
    #[test]
    fn corrupt_line_before_a_later_turn_end_is_corruption() {
        let body = format!("{}{{garbage\n{}", ev(0, "turn/start"), ev(1, "turn/end"));
        assert_eq!(
            scan_all(&body).unwrap_err().to_string(),
            "corrupt session log: unparsable committed event at line 2"
        );
        // Blank lines are unparsable too.
        let body = format!("{}\n{}", ev(0, "turn/start"), ev(1, "turn/end"));
        assert_eq!(
            scan_all(&body).unwrap_err().to_string(),
            "corrupt session log: unparsable committed event at line 2"
        );
    }

    // persistence §7.6 #53
    #[test]
    fn header_only_log() {
        let out = scan_all("").unwrap();
        assert!(out.events.is_empty());
        assert_eq!(out.committed_bytes, HEADER.len() as u64);
    }

    // persistence §7.6 #54
    #[test]
    fn corrupt_line_after_the_last_turn_end_bounds_the_prefix() {
        let prefix = format!("{}{}", ev(0, "turn/start"), ev(1, "turn/end"));
        let body = format!("{prefix}{{bad\n{}", ev(2, "turn/start"));
        let out = scan_all(&body).unwrap();
        assert_eq!(seqs(&out), vec![0, 1]);
        assert_eq!(out.committed_bytes, (HEADER.len() + prefix.len()) as u64);
    }

    // persistence §7.6 #55
    #[test]
    fn gap_after_turn_end_is_an_uncommitted_tail() {
        let prefix = format!("{}{}", ev(0, "turn/start"), ev(1, "turn/end"));
        let body = format!("{prefix}{}{}", ev(7, "turn/start"), ev(8, "step/start"));
        let out = scan_all(&body).unwrap();
        assert_eq!(seqs(&out), vec![0, 1]);
        assert_eq!(out.committed_bytes, (HEADER.len() + prefix.len()) as u64);
    }

    fn text_row(seq0: u64, n: usize) -> String {
        let dt = vec!["1"; n - 1].join(",");
        let texts = (0..n)
            .map(|i| format!("\"t{i}\""))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "{{\"type\":\"text-chunks\",\"seq0\":{seq0},\"time0\":100,\"data\":{{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[{dt}],\"texts\":[{texts}]}}}}\n"
        )
    }

    // persistence §7.6 #59
    #[test]
    fn packed_row_advances_the_cursor_by_its_run() {
        let body = format!(
            "{}{}{}",
            ev(0, "turn/start"),
            text_row(1, 4),
            ev(5, "turn/end")
        );
        let out = scan_all(&body).unwrap();
        assert_eq!(seqs(&out), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(
            out.events[2].to_json(),
            "{\"type\":\"assistant/chunk\",\"seq\":2,\"time\":101,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"t1\"}}}"
        );
    }

    // persistence §7.6 #60
    #[test]
    fn malformed_packed_row_in_the_committed_region() {
        let bad = "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":0,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1],\"texts\":[\"a\",\"b\",\"c\"]}}\n";
        let body = format!("{}{bad}{}", ev(0, "turn/start"), ev(4, "turn/end"));
        assert_eq!(
            scan_all(&body).unwrap_err().to_string(),
            "corrupt session log: unparsable committed event at line 2"
        );
    }

    /// The error's message is the reference's and names only the line; its source says why
    /// the first bad line could not be decoded.
    #[test]
    fn an_unparsable_committed_line_names_why_as_its_source() {
        use std::error::Error as _;
        let bad_row = "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":0,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1],\"texts\":[\"a\",\"b\",\"c\"]}}\n";
        for (bad, cause, inner) in [
            (
                "{garbage\n",
                "the line is not JSON",
                Some("unexpected character 'g' at byte 1"),
            ),
            (
                "\n",
                "the line is not JSON",
                Some("unexpected end of JSON input"),
            ),
            ("[1,2]\n", "the line is JSON but not an object", None),
            (bad_row, "malformed text-chunks storage row", None),
        ] {
            // The first bad line is the one named, also when a later one is bad too.
            let body = format!("{}{bad}{{x\n{}", ev(0, "turn/start"), ev(1, "turn/end"));
            let err = scan_all(&body).unwrap_err();
            assert_eq!(
                err.to_string(),
                "corrupt session log: unparsable committed event at line 2",
                "{bad:?}"
            );
            let source = err.source().expect("a source");
            assert!(source.to_string().starts_with(cause), "{bad:?}: {source}");
            assert_eq!(
                source.source().map(ToString::to_string).as_deref(),
                inner,
                "{bad:?}"
            );
        }
    }

    // persistence §7.6 #61
    #[test]
    fn packed_row_with_a_gap_after_the_last_turn_end_is_dropped_whole() {
        let prefix = format!("{}{}", ev(0, "turn/start"), ev(1, "turn/end"));
        let body = format!("{prefix}{}", text_row(5, 3));
        let out = scan_all(&body).unwrap();
        assert_eq!(seqs(&out), vec![0, 1]);
        assert_eq!(out.committed_bytes, (HEADER.len() + prefix.len()) as u64);
    }

    #[test]
    fn invalid_envelope_is_recorded_and_ends_the_prefix() {
        let body = format!(
            "{}{{\"type\":\"x\",\"seq\":1,\"time\":0,\"data\":{{}},\"extra\":1}}\n{}",
            ev(0, "turn/start"),
            ev(2, "turn/end")
        );
        let out = scan_all(&body).unwrap();
        assert_eq!(seqs(&out), vec![0]);
        let (index, after) = out.invalid.unwrap();
        assert_eq!(index, 1);
        // The invalid record kept as stored, then every later event.
        assert_eq!(after.len(), 2);
        assert!(after[0].is_verbatim());
        let record = after[0].stored_record().unwrap();
        assert_eq!(record.get("extra").and_then(Value::as_u64), Some(1));
        assert_eq!(after[1].to_json(), ev(2, "turn/end").trim_end());
        assert_eq!(out.committed_bytes, (HEADER.len() + body.len()) as u64);
    }

    #[test]
    fn lines_after_an_invalid_envelope_are_still_checked_in_order() {
        let invalid = "{\"type\":\"x\",\"seq\":1,\"time\":0,\"data\":{},\"extra\":1}\n";
        let body = format!("{}{invalid}{}{}", ev(0, "a"), ev(2, "b"), ev(3, "turn/end"));
        let out = scan_all(&body).unwrap();
        assert_eq!(seqs(&out), vec![0]);
        assert_eq!(out.committed_bytes, (HEADER.len() + body.len()) as u64);
        let body = format!("{}{invalid}{}{}", ev(0, "a"), ev(2, "b"), ev(4, "turn/end"));
        assert_eq!(
            scan_all(&body).unwrap_err().to_string(),
            "corrupt session log: seq gap in committed region at line 4 (expected 3, got 4)"
        );
    }

    #[test]
    fn gap_texts_follow_javascript_string_conversion() {
        for (raw, got) in [("\"1\"", "1"), ("null", "null"), ("1.5", "1.5")] {
            let body = format!(
                "{}{{\"type\":\"turn/end\",\"seq\":{raw},\"time\":0,\"data\":{{}}}}\n",
                ev(0, "turn/start")
            );
            assert_eq!(
                scan_all(&body).unwrap_err().to_string(),
                format!(
                    "corrupt session log: seq gap in committed region at line 2 (expected 1, got {got})"
                )
            );
        }
        let body = format!("{}{{\"type\":\"turn/end\"}}\n", ev(0, "turn/start"));
        assert!(
            scan_all(&body)
                .unwrap_err()
                .to_string()
                .ends_with("got undefined)")
        );
    }

    #[test]
    fn non_object_json_lines_are_unparsable_lines() {
        for raw in ["null", "42", "[]", "[1,{}]", "\"text\"", "true"] {
            // Before a later turn/end: corruption of the committed region, named by its line.
            let body = format!("{}{raw}\n{}", ev(0, "turn/start"), ev(1, "turn/end"));
            assert_eq!(
                scan_all(&body).unwrap_err().to_string(),
                "corrupt session log: unparsable committed event at line 2",
                "{raw}"
            );
            // In the open tail: the prefix ends before it, whatever follows.
            let body = format!(
                "{}{raw}\n{{garbage\n{}",
                ev(0, "turn/start"),
                ev(1, "step/start")
            );
            let out = scan_all(&body).unwrap();
            assert_eq!(out.events.len(), 1, "{raw}");
            assert!(out.invalid.is_none());
            let first = (HEADER.len() + ev(0, "turn/start").len()) as u64;
            assert_eq!(out.committed_bytes, first, "{raw}");
        }
    }

    #[test]
    fn lone_surrogates_are_refused_with_line_and_offset() {
        let first = ev(0, "turn/start");
        let body = format!("{first}{{\"type\":\"x\",\"seq\":1,\"time\":0,\"data\":\"\\udc00\"}}\n");
        match scan_all(&body).unwrap_err() {
            Error::LoneSurrogate { line, offset } => {
                assert_eq!(line, Some(2));
                let at = HEADER.len() + first.len() + body[first.len()..].find("\\udc00").unwrap();
                assert!(offset >= at as u64, "{offset} vs {at}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn crlf_lines_are_accepted() {
        let body = "{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{}}\r\n";
        let out = scan_all(body).unwrap();
        assert_eq!(seqs(&out), vec![0]);
    }
}
