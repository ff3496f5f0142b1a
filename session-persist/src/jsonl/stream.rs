//! A bounded streaming reader of one JSONL session log, plain or Zstandard: its header, then
//! its events a batch at a time.
//!
//! [`Backend::load_stored`](crate::Backend::load_stored) returns the whole log at once (and
//! decodes its frames on several threads); this reader holds one read buffer, one record and
//! one batch, whatever the log's length, for a pass over a whole log that keeps nothing, such
//! as comparing a copy with its source. A `.zstd` file is decoded as a stream (every frame's
//! checksum is checked as it is read).
//!
//! Each record gets the checks a load applies to the records it accepts: JSON, a valid event
//! envelope or packed row, and seq contiguity from 0. A stream does not repair, so what a load
//! would cut as a torn tail (a last record without its newline, an undecodable last frame) is
//! an error here, naming the 1-based line after the header.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use memchr::memchr;
use session_core::chunk_rows::{LineRecord, StorageDecoder};
use session_core::{Event, SessionHeader};

use super::frames::MAX_RECORD_BYTES;
use super::header_line::parse_strict;
use crate::error::{Error, Result, UnparsableLine};

/// The read buffer (the zstd decoder's output window is about 128 KiB).
const READ_BUFFER_BYTES: usize = 1 << 20;

/// A JSONL session log read a batch of events at a time (see the module documentation).
pub struct LogStream {
    path: PathBuf,
    reader: Box<dyn BufRead + Send>,
    header: SessionHeader,
    decoder: StorageDecoder,
    record: Vec<u8>,
    /// Lines after the header read so far.
    line: u64,
    /// Bytes of logical text read so far, the header's and the newlines included.
    bytes: u64,
    next_seq: u64,
    /// `(line, events decoded through it)` for the lines of the batch being read.
    ends: Vec<(u64, usize)>,
}

impl std::fmt::Debug for LogStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStream")
            .field("path", &self.path)
            .field("line", &self.line)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl LogStream {
    /// Opens the log at `path` (Zstandard when its name ends in `.zstd`) and reads its header
    /// record (the strict parse of a load).
    pub fn open(path: &Path) -> Result<LogStream> {
        let file = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
        let zstd = path.extension().is_some_and(|e| e == "zstd");
        let inner: Box<dyn Read + Send> = if zstd {
            Box::new(
                zstd::stream::read::Decoder::new(file).map_err(|e| Error::io("read", path, e))?,
            )
        } else {
            Box::new(file)
        };
        let mut stream = LogStream {
            path: path.to_path_buf(),
            reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, inner)),
            header: SessionHeader::new("", 0),
            decoder: StorageDecoder::new(),
            record: Vec::new(),
            line: 0,
            bytes: 0,
            next_seq: 0,
            ends: Vec::new(),
        };
        match stream.read_record()? {
            Some(true) => {}
            _ => return Err(Error::EmptyLog { zstd }),
        }
        let text = std::str::from_utf8(&stream.record)
            .map_err(|_| Error::HeaderNotJson { cause: None })?;
        stream.header = parse_strict(text)?.meta;
        Ok(stream)
    }

    /// The header, read as a load reads it.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The seq the next event must have: how many events were read.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// How many records (lines after the header) were read.
    pub fn records(&self) -> u64 {
        self.line
    }

    /// How many bytes of logical text (plaintext) were read, the header's included.
    pub fn plaintext_bytes(&self) -> u64 {
        self.bytes
    }

    /// The next events, at least `min_events` of them (fewer only at the end of the log) and
    /// as many more as the last record read expands to; `None` at the end of the log.
    pub fn next_batch(&mut self, min_events: usize) -> Result<Option<Vec<Event>>> {
        self.ends.clear();
        while self.decoder.event_count() < min_events.max(1) {
            match self.read_record()? {
                None => break,
                Some(false) => {
                    return Err(Error::UnparsableCommitted {
                        line: self.line + 1,
                        cause: UnparsableLine::Unterminated,
                    });
                }
                Some(true) => {}
            }
            self.line += 1;
            match self.decoder.decode_line(&self.record) {
                LineRecord::Event | LineRecord::Chunks { .. } => {}
                LineRecord::Invalid(value) => {
                    return Err(Error::InvalidStoredEnvelope {
                        index: usize::try_from(self.next_seq)
                            .unwrap_or(usize::MAX)
                            .saturating_add(self.decoder.event_count()),
                        cause: Event::from_value(&value).err(),
                    });
                }
                // Not JSON, or a malformed packed row.
                other => {
                    return Err(Error::UnparsableCommitted {
                        line: self.line,
                        cause: UnparsableLine::of(&other),
                    });
                }
            }
            self.ends.push((self.line, self.decoder.event_count()));
        }
        let events = self.decoder.take_events();
        if events.is_empty() {
            return Ok(None);
        }
        let mut ends = self.ends.iter();
        let mut current = ends.next().copied().unwrap_or((self.line, events.len()));
        for (i, event) in events.iter().enumerate() {
            while i >= current.1 {
                current = ends.next().copied().unwrap_or((self.line, events.len()));
            }
            if event.seq() != self.next_seq {
                return Err(Error::SeqGap {
                    line: current.0,
                    expected: self.next_seq,
                    got: event.seq().to_string(),
                });
            }
            self.next_seq += 1;
        }
        Ok(Some(events))
    }

    /// Reads the next record into `self.record`, without its newline: `Some(true)` for a
    /// complete record, `Some(false)` for bytes the log ends in without a newline, `None` at
    /// the end. A record longer than [`MAX_RECORD_BYTES`] is refused before it is held.
    fn read_record(&mut self) -> Result<Option<bool>> {
        self.record.clear();
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("read", &self.path, e)),
            };
            if buf.is_empty() {
                return Ok((!self.record.is_empty()).then_some(false));
            }
            let (piece, used, complete) = match memchr(b'\n', buf) {
                Some(end) => (&buf[..end], end + 1, true),
                None => (buf, buf.len(), false),
            };
            if (self.record.len() + piece.len()) as u64 > MAX_RECORD_BYTES {
                return Err(Error::UnparsableCommitted {
                    line: self.line + 1,
                    cause: UnparsableLine::TooLong {
                        limit: MAX_RECORD_BYTES,
                    },
                });
            }
            self.record.extend_from_slice(piece);
            self.reader.consume(used);
            self.bytes += used as u64;
            if complete {
                return Ok(Some(true));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const HEADER: &str =
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

    fn event(seq: u64) -> String {
        format!(r#"{{"type":"session/title","seq":{seq},"time":1,"data":{{"title":"t{seq}"}}}}"#)
    }

    /// A log file of `text` (zstd-encoded as one frame when `zstd`) in a fresh directory.
    fn log(tag: &str, text: &str, zstd: bool) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "session-persist-stream-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (name, bytes) = if zstd {
            (
                "session.jsonl.zstd",
                zstd::encode_all(text.as_bytes(), 3).unwrap(),
            )
        } else {
            ("session.jsonl", text.as_bytes().to_vec())
        };
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn text(lines: &[String]) -> String {
        let mut out = format!("{HEADER}\n");
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    fn read_all(path: &Path, batch: usize) -> Result<Vec<Vec<String>>> {
        let mut stream = LogStream::open(path)?;
        assert_eq!(&*stream.header().id, "s");
        let mut out = Vec::new();
        while let Some(events) = stream.next_batch(batch)? {
            out.push(events.iter().map(Event::to_json).collect());
        }
        Ok(out)
    }

    #[test]
    fn reads_plain_and_zstd_logs_a_batch_at_a_time() {
        let lines: Vec<String> = (0..10).map(event).collect();
        for zstd in [false, true] {
            let path = log(&format!("ok-{zstd}"), &text(&lines), zstd);
            let batches = read_all(&path, 4).unwrap();
            assert_eq!(
                batches.iter().map(Vec::len).collect::<Vec<_>>(),
                [4, 4, 2],
                "zstd {zstd}"
            );
            assert_eq!(batches.concat(), lines, "zstd {zstd}");
            let mut stream = LogStream::open(&path).unwrap();
            while stream.next_batch(3).unwrap().is_some() {}
            assert_eq!(stream.records(), 10);
            assert_eq!(stream.plaintext_bytes(), text(&lines).len() as u64);
        }
    }

    #[test]
    fn refuses_a_seq_gap_naming_its_line() {
        let lines = vec![event(0), event(1), event(3)];
        let path = log("gap", &text(&lines), false);
        let err = read_all(&path, 100).unwrap_err();
        assert!(
            matches!(err, Error::SeqGap { line: 3, expected: 2, ref got } if got == "3"),
            "{err:?}"
        );
    }

    #[test]
    fn refuses_a_torn_or_unparsable_record_naming_its_line() {
        let mut torn = text(&[event(0), event(1)]);
        torn.push_str(r#"{"type":"session/title","se"#);
        let err = read_all(&log("torn", &torn, false), 1).unwrap_err();
        assert!(
            matches!(err, Error::UnparsableCommitted { line: 3, .. }),
            "{err:?}"
        );

        let bad = text(&[event(0), "{not json".to_owned()]);
        let err = read_all(&log("bad", &bad, true), 1).unwrap_err();
        assert!(
            matches!(err, Error::UnparsableCommitted { line: 2, .. }),
            "{err:?}"
        );

        let envelope = text(&[event(0), r#"{"type":"x","seq":1}"#.to_owned()]);
        let err = read_all(&log("envelope", &envelope, false), 1).unwrap_err();
        assert!(
            matches!(err, Error::InvalidStoredEnvelope { index: 1, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn refuses_an_empty_log_and_a_bad_header() {
        let err = LogStream::open(&log("empty", "", true)).unwrap_err();
        assert!(matches!(err, Error::EmptyLog { zstd: true }), "{err:?}");
        let path = log("header", &format!("{}\n", event(0)), false);
        let err = LogStream::open(&path).unwrap_err();
        assert!(matches!(err, Error::NotSessionHeader { .. }), "{err:?}");
    }
}
