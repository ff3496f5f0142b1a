//! Zstandard frames: the structural scanner, the frame decoder (with torn-frame prefix
//! decoding) and the frame encoder.
//!
//! A zstd-JSONL file is a concatenation of standard, checksummed Zstandard frames (RFC 8878):
//! frame 1 holds the header line, every later frame one append batch.

use std::io;
use std::sync::Arc;

use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, InBuffer, OutBuffer, ResetDirective};

use super::scanner::rfind_newline;
use crate::error::{Error, Result, ZstdStructureError};

/// The Zstandard frame magic, `28 B5 2F FD` on disk.
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// The compression level of written frames (libzstd's default, which the reference uses).
pub const ZSTD_LEVEL: i32 = 3;

/// Size of the reused decoder output buffer.
const DECODE_CHUNK: usize = 1 << 20;

/// The most plaintext one frame may decompress to: 2 GiB. The reference writes one frame per
/// durable batch and builds a batch as one JavaScript string, which V8 caps at 2^29 - 24 UTF-16
/// units, so at most 3 * (2^29 - 24) bytes (about 1.5 GiB) of UTF-8; a frame that expands
/// further is refused with [`Error::ZstdFrame`] naming its byte offset (its source is a
/// [`PlaintextLimit`]). Frames are decoded in bounded pieces, never into a buffer of their
/// declared size, so this limit bounds the work, not the memory, of a read.
pub const MAX_FRAME_PLAINTEXT_BYTES: u64 = 2 << 30;

/// The most bytes one record (one line, without its newline) may hold in a Zstandard log:
/// 512 MiB. A record is one `JSON.stringify` result in the reference, a JavaScript string of at
/// most 2^29 - 24 UTF-16 units, so every ASCII record the reference can write fits. A longer
/// line (for example a frame of zeros, which never ends a line) is refused with
/// [`Error::ZstdFrame`] naming the offset of the frame that exceeds the limit, before more
/// than this much of it is buffered: this bounds the memory a hostile frame can take.
pub const MAX_RECORD_BYTES: u64 = 512 << 20;

/// Which decompression limit a frame exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaintextLimitKind {
    /// [`MAX_FRAME_PLAINTEXT_BYTES`]: the plaintext of one frame.
    Frame,
    /// [`MAX_RECORD_BYTES`]: one record (line).
    Record,
}

/// The source of an [`Error::ZstdFrame`] for a frame that decompresses beyond a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaintextLimit {
    /// Which limit.
    pub kind: PlaintextLimitKind,
    /// The limit, in bytes.
    pub limit: u64,
}

impl std::fmt::Display for PlaintextLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            PlaintextLimitKind::Frame => write!(
                f,
                "the frame decompresses to more than {} bytes (MAX_FRAME_PLAINTEXT_BYTES)",
                self.limit
            ),
            PlaintextLimitKind::Record => write!(
                f,
                "a record decompresses to more than {} bytes without a newline (MAX_RECORD_BYTES)",
                self.limit
            ),
        }
    }
}

impl std::error::Error for PlaintextLimit {}

/// Counts decompressed plaintext against [`MAX_FRAME_PLAINTEXT_BYTES`] (per frame) and
/// [`MAX_RECORD_BYTES`] (the open record, across frames), so that a reader refuses an
/// expansion bomb before buffering more than one record's limit of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlainBudget {
    frame: u64,
    record: u64,
    max_frame: u64,
    max_record: u64,
}

impl Default for PlainBudget {
    fn default() -> PlainBudget {
        PlainBudget::new(MAX_FRAME_PLAINTEXT_BYTES, MAX_RECORD_BYTES)
    }
}

impl PlainBudget {
    /// A budget with the given limits.
    pub(crate) fn new(max_frame: u64, max_record: u64) -> PlainBudget {
        PlainBudget {
            frame: 0,
            record: 0,
            max_frame,
            max_record,
        }
    }

    /// A new frame starts (the open record continues).
    pub(crate) fn start_frame(&mut self) {
        self.frame = 0;
    }

    /// Counts `piece`, the next plaintext of the frame at byte `offset`.
    pub(crate) fn feed(&mut self, piece: &[u8], offset: usize) -> Result<()> {
        let len = piece.len() as u64;
        self.frame = self.frame.saturating_add(len);
        self.record = match rfind_newline(piece) {
            Some(nl) => (piece.len() - nl - 1) as u64,
            None => self.record.saturating_add(len),
        };
        let exceeded = if self.frame > self.max_frame {
            Some(PlaintextLimit {
                kind: PlaintextLimitKind::Frame,
                limit: self.max_frame,
            })
        } else if self.record > self.max_record {
            Some(PlaintextLimit {
                kind: PlaintextLimitKind::Record,
                limit: self.max_record,
            })
        } else {
            None
        };
        match exceeded {
            Some(limit) => Err(Error::ZstdFrame {
                offset: offset as u64,
                source: Arc::new(io::Error::new(io::ErrorKind::InvalidData, limit)),
            }),
            None => Ok(()),
        }
    }
}

/// The largest plaintext bound of a frame that is decoded in one piece, on any thread: larger
/// frames (and frames whose bound is unknown) are streamed into the scanner in
/// [`DECODE_CHUNK`] pieces, in file order, under a [`PlainBudget`].
pub(crate) const MAX_BUFFERED_FRAME_PLAIN: usize = 4 << 20;

/// The byte range `[start, end)` of one complete frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRange {
    /// First byte of the frame.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
}

/// The result of [`scan_zstd_frames`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameScan {
    /// The complete frames, in order.
    pub frames: Vec<FrameRange>,
    /// Where an incomplete final frame starts, when the input ends inside one.
    pub torn_start: Option<usize>,
}

fn structure(kind: ZstdStructureError, offset: usize) -> Error {
    Error::ZstdStructure {
        kind,
        offset: offset as u64,
    }
}

/// `scanZstdFrames`: splits `buf` into frames from their headers and block headers alone (no
/// block is decoded). Invalid structure inside the input is an error; input that ends inside a
/// frame yields `torn_start`. Stops after `max_frames` complete frames when given.
pub fn scan_zstd_frames(buf: &[u8], max_frames: Option<usize>) -> Result<FrameScan> {
    let (frames, torn_start) = scan_frames(buf, 0, max_frames)?;
    Ok(FrameScan {
        frames: frames
            .iter()
            .map(|f| FrameRange {
                start: f.start,
                end: f.end,
            })
            .collect(),
        torn_start,
    })
}

/// The largest window a streaming decoder accepts by default (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`).
const MAX_STREAM_WINDOW: u64 = 1 << 27;

/// The most plaintext one block can produce (`Block_Maximum_Size`).
const MAX_BLOCK_PLAIN: usize = 128 * 1024;

/// One complete frame, as found by [`scan_frames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameInfo {
    /// First byte of the frame (relative to the scanned buffer, plus the base).
    pub(crate) start: usize,
    /// One past its last byte.
    pub(crate) end: usize,
    /// An upper bound of its plaintext size, when a one-shot decode into a buffer of that
    /// size is equivalent to the streaming decode (the window is within the streaming
    /// decoder's limit).
    pub(crate) max_plain: Option<usize>,
}

/// The scanner behind [`scan_zstd_frames`], for `buf` holding the bytes from offset `base` of
/// a file: complete frames with offsets `base + …`, and where an incomplete final frame starts.
/// Errors name absolute offsets.
pub(crate) fn scan_frames(
    buf: &[u8],
    base: usize,
    max_frames: Option<usize>,
) -> Result<(Vec<FrameInfo>, Option<usize>)> {
    let mut frames = Vec::new();
    let mut off = 0usize;
    while off < buf.len() {
        if max_frames.is_some_and(|m| frames.len() >= m) {
            break;
        }
        let rest = &buf[off..];
        if rest.len() < 4 {
            return Ok((frames, Some(base + off)));
        }
        let magic = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if magic != ZSTD_MAGIC {
            return Err(structure(ZstdStructureError::InvalidMagic, base + off));
        }
        let Some(&descriptor) = rest.get(4) else {
            return Ok((frames, Some(base + off)));
        };
        if descriptor & 0x18 != 0 {
            // The error names the descriptor byte itself, as the reference does.
            return Err(structure(ZstdStructureError::ReservedBit, base + off + 4));
        }
        let fcs_flag = descriptor >> 6;
        let single_segment = descriptor & 0x20 != 0;
        let has_checksum = descriptor & 0x04 != 0;
        let dict_bytes = [0usize, 1, 2, 4][usize::from(descriptor & 0x03)];
        let fcs_bytes = if fcs_flag == 0 {
            usize::from(single_segment)
        } else {
            1usize << fcs_flag
        };
        let header_rest = usize::from(!single_segment) + dict_bytes + fcs_bytes;
        let mut pos = 5 + header_rest;
        if pos > rest.len() {
            return Ok((frames, Some(base + off)));
        }
        let window = if single_segment {
            // The window is the content size.
            let fcs = &rest[5 + dict_bytes..pos];
            let mut size = 0u64;
            for (i, &b) in fcs.iter().enumerate() {
                size |= u64::from(b) << (8 * i);
            }
            if fcs_bytes == 2 {
                size += 256;
            }
            size
        } else {
            let w = rest[5];
            let exponent = u32::from(w >> 3) + 10;
            let unit = 1u64 << exponent;
            unit + (unit >> 3) * u64::from(w & 7)
        };
        let mut blocks = 0usize;
        loop {
            if pos + 3 > rest.len() {
                return Ok((frames, Some(base + off)));
            }
            let header = u32::from(rest[pos])
                | u32::from(rest[pos + 1]) << 8
                | u32::from(rest[pos + 2]) << 16;
            let last = header & 1 != 0;
            let block_type = (header >> 1) & 3;
            let size = (header >> 3) as usize;
            if block_type == 3 {
                // The error names the block header, as the reference does.
                return Err(structure(
                    ZstdStructureError::ReservedBlockType,
                    base + off + pos,
                ));
            }
            let payload = if block_type == 1 { 1 } else { size };
            pos += 3;
            if payload > rest.len() - pos {
                return Ok((frames, Some(base + off)));
            }
            pos += payload;
            blocks += 1;
            if last {
                break;
            }
        }
        if has_checksum {
            if rest.len() - pos < 4 {
                return Ok((frames, Some(base + off)));
            }
            pos += 4;
        }
        frames.push(FrameInfo {
            start: base + off,
            end: base + off + pos,
            max_plain: (dict_bytes == 0 && window <= MAX_STREAM_WINDOW)
                .then(|| blocks.checked_mul(MAX_BLOCK_PLAIN))
                .flatten(),
        });
        off += pos;
    }
    Ok((frames, None))
}

fn zstd_error(code: usize) -> io::Error {
    io::Error::other(ZstdDecodeError { code })
}

/// A libzstd decoder failure: the source of an [`Error::ZstdFrame`] (inside its `io::Error`).
/// `Display` is libzstd's text (`Restored data doesn't match checksum`); [`Self::code_name`] is
/// the name of its `ZSTD_ErrorCode`, which the reference's errors carry as `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZstdDecodeError {
    /// libzstd's error result (a `size_t` that `ZSTD_isError` accepts).
    pub code: usize,
}

impl ZstdDecodeError {
    /// The `ZSTD_ErrorCode` name, as Node's zlib reports it (`ZSTD_error_checksum_wrong`);
    /// `None` for a code this table does not know.
    pub fn code_name(&self) -> Option<&'static str> {
        use zstd_safe::zstd_sys::ZSTD_ErrorCode as C;
        // zstd_errors.h: the codes a decoder can return. The table is written out because the
        // bindings give no safe way from a number to the enum.
        const NAMES: [(C, &str); 20] = [
            (C::ZSTD_error_GENERIC, "ZSTD_error_GENERIC"),
            (C::ZSTD_error_prefix_unknown, "ZSTD_error_prefix_unknown"),
            (
                C::ZSTD_error_version_unsupported,
                "ZSTD_error_version_unsupported",
            ),
            (
                C::ZSTD_error_frameParameter_unsupported,
                "ZSTD_error_frameParameter_unsupported",
            ),
            (
                C::ZSTD_error_frameParameter_windowTooLarge,
                "ZSTD_error_frameParameter_windowTooLarge",
            ),
            (
                C::ZSTD_error_corruption_detected,
                "ZSTD_error_corruption_detected",
            ),
            (C::ZSTD_error_checksum_wrong, "ZSTD_error_checksum_wrong"),
            (
                C::ZSTD_error_literals_headerWrong,
                "ZSTD_error_literals_headerWrong",
            ),
            (
                C::ZSTD_error_dictionary_corrupted,
                "ZSTD_error_dictionary_corrupted",
            ),
            (
                C::ZSTD_error_dictionary_wrong,
                "ZSTD_error_dictionary_wrong",
            ),
            (
                C::ZSTD_error_parameter_unsupported,
                "ZSTD_error_parameter_unsupported",
            ),
            (
                C::ZSTD_error_parameter_outOfBound,
                "ZSTD_error_parameter_outOfBound",
            ),
            (
                C::ZSTD_error_tableLog_tooLarge,
                "ZSTD_error_tableLog_tooLarge",
            ),
            (
                C::ZSTD_error_maxSymbolValue_tooLarge,
                "ZSTD_error_maxSymbolValue_tooLarge",
            ),
            (C::ZSTD_error_stage_wrong, "ZSTD_error_stage_wrong"),
            (C::ZSTD_error_init_missing, "ZSTD_error_init_missing"),
            (
                C::ZSTD_error_memory_allocation,
                "ZSTD_error_memory_allocation",
            ),
            (
                C::ZSTD_error_workSpace_tooSmall,
                "ZSTD_error_workSpace_tooSmall",
            ),
            (
                C::ZSTD_error_dstSize_tooSmall,
                "ZSTD_error_dstSize_tooSmall",
            ),
            (C::ZSTD_error_srcSize_wrong, "ZSTD_error_srcSize_wrong"),
        ];
        let number = self.code.wrapping_neg();
        NAMES
            .iter()
            .find(|(c, _)| *c as usize == number)
            .map(|(_, name)| *name)
    }
}

impl std::fmt::Display for ZstdDecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(zstd_safe::get_error_name(self.code))
    }
}

impl std::error::Error for ZstdDecodeError {}

/// A reusable Zstandard frame decoder: one decompression context and one output buffer for a
/// whole log, so decoding allocates nothing per frame.
pub(crate) struct FrameDecoder {
    ctx: DCtx<'static>,
    out: Vec<u8>,
}

impl FrameDecoder {
    pub(crate) fn new() -> FrameDecoder {
        FrameDecoder {
            ctx: DCtx::create(),
            out: vec![0u8; DECODE_CHUNK],
        }
    }

    /// Decodes one complete frame, validating its checksum, and hands the plaintext to `sink`
    /// in pieces. Decoder failures become `frame at byte <offset> failed validation`; errors of
    /// `sink` pass through.
    pub(crate) fn decode_frame(
        &mut self,
        frame: &[u8],
        offset: usize,
        mut sink: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let fail = |source: io::Error| Error::ZstdFrame {
            offset: offset as u64,
            source: Arc::new(source),
        };
        self.ctx
            .reset(ResetDirective::SessionOnly)
            .map_err(|c| fail(zstd_error(c)))?;
        let mut input = InBuffer::around(frame);
        loop {
            let mut output = OutBuffer::around(&mut self.out[..]);
            let hint = self
                .ctx
                .decompress_stream(&mut output, &mut input)
                .map_err(|c| fail(zstd_error(c)))?;
            let produced = output.pos();
            if produced > 0 {
                sink(&self.out[..produced])?;
            }
            if hint == 0 {
                if input.pos() != frame.len() {
                    return Err(fail(io::Error::other("trailing data after the frame")));
                }
                return Ok(());
            }
            if input.pos() == frame.len() && produced < self.out.len() {
                return Err(fail(io::Error::other("frame is incomplete")));
            }
        }
    }

    /// Decodes one complete frame and appends its plaintext to `out`. Produces exactly what
    /// [`FrameDecoder::decode_frame`] hands its sink, in one piece: a frame whose plaintext
    /// bound is known is decoded in one shot straight into `out`, and any failure is redone
    /// with the streaming decoder so that the error, and the plaintext it emitted before the
    /// error, are the streaming decoder's.
    pub(crate) fn decode_frame_append(
        &mut self,
        frame: &[u8],
        info: FrameInfo,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let len = out.len();
        if let Some(bound) = info.max_plain.filter(|b| *b <= MAX_BUFFERED_FRAME_PLAIN) {
            out.reserve(bound);
            let mut cursor = io::Cursor::new(&mut *out);
            cursor.set_position(len as u64);
            if self.ctx.decompress(&mut cursor, frame).is_ok() {
                return Ok(());
            }
            out.truncate(len);
        }
        self.decode_frame(frame, info.start, |piece| {
            out.extend_from_slice(piece);
            Ok(())
        })
    }

    /// Decodes one complete frame that holds one record (a header frame) into a buffer, under
    /// a fresh [`PlainBudget`]: a frame that expands beyond [`MAX_RECORD_BYTES`] without a
    /// newline is refused before more is buffered.
    pub(crate) fn decode_frame_to_vec(&mut self, frame: &[u8], offset: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut budget = PlainBudget::default();
        self.decode_frame(frame, offset, |chunk| {
            budget.feed(chunk, offset)?;
            out.extend_from_slice(chunk);
            Ok(())
        })?;
        Ok(out)
    }

    /// Prefix-decodes a torn final frame starting at byte `offset`: the plaintext its complete
    /// blocks produce, without the end-of-frame and checksum checks. A decoder error yields
    /// empty plaintext, as in the reference. The plaintext counts against `budget` (which
    /// carries the open record of the frames before); exceeding it is an error.
    pub(crate) fn decode_torn(
        &mut self,
        torn: &[u8],
        offset: usize,
        budget: &mut PlainBudget,
    ) -> Result<Vec<u8>> {
        if self.ctx.reset(ResetDirective::SessionOnly).is_err() {
            return Ok(Vec::new());
        }
        budget.start_frame();
        let mut plain = Vec::new();
        let mut input = InBuffer::around(torn);
        loop {
            let mut output = OutBuffer::around(&mut self.out[..]);
            let Ok(hint) = self.ctx.decompress_stream(&mut output, &mut input) else {
                return Ok(Vec::new());
            };
            let produced = output.pos();
            budget.feed(&self.out[..produced], offset)?;
            plain.extend_from_slice(&self.out[..produced]);
            if hint == 0 || (input.pos() == torn.len() && produced < self.out.len()) {
                return Ok(plain);
            }
        }
    }
}

/// Compresses `plain` as one checksummed frame at level 3, exactly as the reference's streaming
/// compressor does (content size not recorded).
pub(crate) fn encode_frame(plain: &[u8]) -> Result<Vec<u8>> {
    let fail = |code: usize| Error::Encode {
        source: Arc::new(zstd_error(code)),
    };
    let mut ctx = CCtx::create();
    ctx.set_parameter(CParameter::CompressionLevel(ZSTD_LEVEL))
        .map_err(fail)?;
    ctx.set_parameter(CParameter::ChecksumFlag(true))
        .map_err(fail)?;
    let mut out: Vec<u8> = Vec::with_capacity(zstd_safe::compress_bound(plain.len()) + 64);
    let mut scratch = vec![0u8; zstd_safe::CCtx::out_size().max(1 << 14)];
    let mut input = InBuffer::around(plain);
    // Feed everything without ending the frame (the size stays unknown to the compressor) ...
    while input.pos() < plain.len() {
        let mut output = OutBuffer::around(&mut scratch[..]);
        ctx.compress_stream2(
            &mut output,
            &mut input,
            zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_continue,
        )
        .map_err(fail)?;
        let n = output.pos();
        out.extend_from_slice(&scratch[..n]);
    }
    // ... then end it.
    loop {
        let mut output = OutBuffer::around(&mut scratch[..]);
        let mut empty = InBuffer::around(&[]);
        let remaining = ctx
            .compress_stream2(
                &mut output,
                &mut empty,
                zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_end,
            )
            .map_err(fail)?;
        let n = output.pos();
        out.extend_from_slice(&scratch[..n]);
        if remaining == 0 {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(text: &str) -> Vec<u8> {
        encode_frame(text.as_bytes()).unwrap()
    }

    // persistence §7.7 #1
    #[test]
    fn scans_concatenated_checksummed_frames() {
        let a = frame("{\"type\":\"session\"}\n");
        let b = frame("{\"type\":\"turn/start\",\"seq\":0}\n");
        let mut buf = a.clone();
        buf.extend_from_slice(&b);
        assert_eq!(&buf[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
        let scan = scan_zstd_frames(&buf, None).unwrap();
        assert_eq!(
            scan.frames,
            vec![
                FrameRange {
                    start: 0,
                    end: a.len()
                },
                FrameRange {
                    start: a.len(),
                    end: buf.len()
                }
            ]
        );
        assert_eq!(scan.torn_start, None);
        for f in &scan.frames {
            assert_ne!(buf[f.start + 4] & 0x04, 0, "checksum bit set");
        }
        let first = scan_zstd_frames(&buf, Some(1)).unwrap();
        assert_eq!(first.frames.len(), 1);
        assert_eq!(first.torn_start, None);
        let mut dec = FrameDecoder::new();
        let mut plain = Vec::new();
        for f in &scan.frames {
            plain.extend(
                dec.decode_frame_to_vec(&buf[f.start..f.end], f.start)
                    .unwrap(),
            );
        }
        assert_eq!(
            String::from_utf8(plain).unwrap(),
            "{\"type\":\"session\"}\n{\"type\":\"turn/start\",\"seq\":0}\n"
        );
    }

    // persistence §7.7 #4 (checksum failure), §7.7 #2 (one decoder for every frame)
    #[test]
    fn checksum_failures_name_the_frame() {
        let mut a = frame("hello\n");
        let last = a.len() - 1;
        a[last] ^= 0xFF;
        let mut dec = FrameDecoder::new();
        let e = dec.decode_frame_to_vec(&a, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt Zstandard session log: frame at byte 0 failed validation"
        );
        assert!(
            std::error::Error::source(&e)
                .unwrap()
                .to_string()
                .contains("checksum")
        );
        // The context stays usable after a failure.
        let b = frame("world\n");
        assert_eq!(dec.decode_frame_to_vec(&b, 9).unwrap(), b"world\n");
    }

    // persistence §7.7 #5: output at and beyond the reused chunk boundary
    #[test]
    fn decodes_across_the_output_chunk_boundary() {
        for n in [
            DECODE_CHUNK - 1,
            DECODE_CHUNK,
            DECODE_CHUNK + 1,
            3 * DECODE_CHUNK + 7,
        ] {
            let plain: Vec<u8> = (0..n).map(|i| b'a' + (i % 23) as u8).collect();
            let f = encode_frame(&plain).unwrap();
            let mut dec = FrameDecoder::new();
            let mut pieces = 0;
            let mut out = Vec::new();
            dec.decode_frame(&f, 0, |c| {
                pieces += 1;
                out.extend_from_slice(c);
                Ok(())
            })
            .unwrap();
            assert_eq!(out, plain, "{n} bytes");
            assert!(pieces >= n.div_ceil(DECODE_CHUNK));
        }
    }

    // persistence §7.7 #7
    #[test]
    fn incomplete_versus_invalid_structure() {
        let f = frame("abc\n");
        for cut in [1, 3, 4, 5] {
            let scan = scan_zstd_frames(&f[..cut], None).unwrap();
            assert_eq!(scan.frames, vec![]);
            assert_eq!(scan.torn_start, Some(0), "cut at {cut}");
        }
        let e = scan_zstd_frames(&[0, 0, 0, 0, 0], None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt Zstandard session log: invalid frame magic at byte 0"
        );
        let mut reserved = f.clone();
        reserved[4] |= 0x08;
        assert_eq!(
            scan_zstd_frames(&reserved, None).unwrap_err().to_string(),
            "corrupt Zstandard session log: reserved frame-header bit at byte 4"
        );
        // Magic, descriptor 0x00 (window byte), then a block header cut short.
        let short_block = [0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x50, 0x01, 0x00];
        assert_eq!(
            scan_zstd_frames(&short_block, None).unwrap().torn_start,
            Some(0)
        );
        // Block type 3 is reserved.
        let mut bad_block = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x50];
        bad_block.extend_from_slice(&[0x07, 0x00, 0x00]);
        let mut buf = f.clone();
        buf.extend_from_slice(&bad_block);
        assert_eq!(
            scan_zstd_frames(&buf, None).unwrap_err().to_string(),
            format!(
                "corrupt Zstandard session log: reserved block type at byte {}",
                f.len() + 6
            )
        );
    }

    /// A hand-built frame: magic, descriptor, header bytes, blocks, optional checksum.
    fn manual(descriptor: u8, header: &[u8], blocks: &[(u32, &[u8])], checksum: bool) -> Vec<u8> {
        let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, descriptor];
        out.extend_from_slice(header);
        for (i, (ty, payload)) in blocks.iter().enumerate() {
            let last = u32::from(i + 1 == blocks.len());
            let size = if *ty == 1 { 4 } else { payload.len() as u32 };
            let h = last | ty << 1 | size << 3;
            out.extend_from_slice(&h.to_le_bytes()[..3]);
            out.extend_from_slice(payload);
        }
        if checksum {
            out.extend_from_slice(&[1, 2, 3, 4]);
        }
        out
    }

    // persistence §7.7 #8
    #[test]
    fn header_variants_rle_blocks_and_trailers() {
        let raw: &[(u32, &[u8])] = &[(0, b"abcd")];
        let cases = [
            manual(0x00, &[0x50], raw, false),
            manual(0x21, &[4, 0], raw, false),
            manual(0x42, &[0x50, 0, 0, 0, 0], raw, false),
            manual(0x83, &[0x50, 0, 0, 0, 0, 0, 0, 0, 0], raw, false),
            manual(0xE3, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], raw, false),
            manual(0x00, &[0x50], &[(1, b"z")], false),
            manual(0x00, &[0x50], &[(0, b"ab"), (1, b"c")], false),
            manual(0x04, &[0x50], raw, true),
        ];
        for (i, c) in cases.iter().enumerate() {
            let scan = scan_zstd_frames(c, None).unwrap();
            assert_eq!(
                scan.frames,
                vec![FrameRange {
                    start: 0,
                    end: c.len()
                }],
                "case {i}"
            );
            assert_eq!(scan.torn_start, None);
        }
        let with_checksum = &cases[7];
        let cut = &with_checksum[..with_checksum.len() - 1];
        assert_eq!(scan_zstd_frames(cut, None).unwrap().torn_start, Some(0));
        // Real RLE content round-trips through the decoder.
        let rle = frame(&"x".repeat(100_000));
        let mut dec = FrameDecoder::new();
        assert_eq!(dec.decode_frame_to_vec(&rle, 0).unwrap().len(), 100_000);
    }

    // persistence §7.8 #1
    #[test]
    fn torn_frames_prefix_decode() {
        let f = frame("{\"a\":1}\n{\"b\":2}\n");
        let mut dec = FrameDecoder::new();
        // Missing its last checksum byte: torn at 0, yet the whole content decodes.
        let cut = &f[..f.len() - 1];
        assert_eq!(scan_zstd_frames(cut, None).unwrap().torn_start, Some(0));
        let mut budget = PlainBudget::default();
        assert_eq!(
            dec.decode_torn(cut, 0, &mut budget).unwrap(),
            b"{\"a\":1}\n{\"b\":2}\n"
        );
        // A stub of the magic decodes to nothing.
        assert_eq!(dec.decode_torn(&f[..2], 0, &mut budget).unwrap(), b"");
        // Garbage decodes to nothing instead of failing.
        assert_eq!(
            dec.decode_torn(&[0x28, 0xB5, 0x2F, 0xFD, 0x18, 1, 2], 0, &mut budget)
                .unwrap(),
            b""
        );
    }

    // Decompression limits: per frame, and per record across pieces and frames.
    #[test]
    fn the_plain_budget_refuses_long_frames_and_records_naming_the_frame() {
        let limit_at = |r: Result<()>| match r {
            Err(Error::ZstdFrame { offset, source }) => source
                .get_ref()
                .and_then(|s| s.downcast_ref::<PlaintextLimit>())
                .map(|l| (offset, l.kind)),
            _ => None,
        };
        let mut b = PlainBudget::new(10, 4);
        assert!(b.feed(b"ab\ncd", 0).is_ok());
        // The open record "cd" continues into the next frame: 2 + 3 > 4.
        b.start_frame();
        assert_eq!(
            limit_at(b.feed(b"efg", 7)),
            Some((7, PlaintextLimitKind::Record))
        );
        let mut b = PlainBudget::new(10, 4);
        assert!(b.feed(b"abc\nabc\n", 0).is_ok());
        assert_eq!(
            limit_at(b.feed(b"ab\n", 3)),
            Some((3, PlaintextLimitKind::Frame))
        );
        // A new frame starts its own count.
        b.start_frame();
        assert!(b.feed(b"abc\nabc\n", 9).is_ok());
        // A torn frame is bounded too.
        let plain = "x".repeat(DECODE_CHUNK * 3);
        let f = frame(&plain);
        let mut dec = FrameDecoder::new();
        let mut small = PlainBudget::new(u64::MAX, DECODE_CHUNK as u64);
        assert_eq!(
            limit_at(
                dec.decode_torn(&f[..f.len() - 1], 5, &mut small)
                    .map(|_| ())
            ),
            Some((5, PlaintextLimitKind::Record))
        );
        assert_eq!(
            PlaintextLimit {
                kind: PlaintextLimitKind::Record,
                limit: MAX_RECORD_BYTES
            }
            .to_string(),
            "a record decompresses to more than 536870912 bytes without a newline (MAX_RECORD_BYTES)"
        );
    }

    #[test]
    fn frames_record_no_content_size() {
        let f = frame("x\n");
        assert_eq!(f[4], 0x04, "descriptor: checksum only, like the reference");
    }
}
