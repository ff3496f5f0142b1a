//! Byte searches for the parser's hot loops.

/// The width of the blocks [`first_control`] tests at once.
const BLOCK: usize = 32;

/// The index of the first control character (below `0x20`) of `run`.
///
/// `memchr` searches for up to three given bytes, not a range, so the range is tested here: a
/// block at a time with a branch-free fold the compiler vectorizes, then located exactly in the
/// block that holds one. A JSON string holds none, so the common case is one pass without hits.
#[inline]
// `|` and not `||`: a short-circuit would branch per byte and stop the vectorization.
#[allow(clippy::needless_bitwise_bool)]
fn first_control(run: &[u8]) -> Option<usize> {
    let mut blocks = run.chunks_exact(BLOCK);
    let mut base = 0;
    for block in &mut blocks {
        if block.iter().fold(false, |any, &b| any | (b < 0x20)) {
            return block.iter().position(|&b| b < 0x20).map(|p| base + p);
        }
        base += BLOCK;
    }
    blocks
        .remainder()
        .iter()
        .position(|&b| b < 0x20)
        .map(|p| base + p)
}

/// How many bytes at the start of a string run are searched a word at a time before
/// [`string_special`] hands the rest to `memchr`: most strings of a log are short (delta texts
/// of a few bytes), and a word test finds their end before `memchr`'s set-up would.
const SHORT_RUN: usize = 16;

/// Whether `b` ends a plain run inside a JSON string.
#[inline]
fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// The index of the first byte of `word` (the first in its low byte) that ends a plain run
/// ([`is_special`]); 8 when none does.
///
/// Each test flags a byte by its high bit (`x - 0x01…` borrows out of a byte that is zero, and
/// `x - 0x20…` out of one below `0x20`): a borrow can flag a byte above a flagged one by
/// mistake, never one below, so the lowest flag is exact.
#[inline]
fn first_special_in_word(word: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    ((quote | backslash | control).trailing_zeros() / 8) as usize
}

/// The index of the first byte at or after `from` that ends a plain run inside a JSON string:
/// `"`, `\` or a control character; `bytes.len()` when there is none.
#[inline]
pub(crate) fn string_special(bytes: &[u8], from: usize) -> usize {
    let Some(rest) = bytes.get(from..) else {
        return bytes.len();
    };
    let mut i = 0;
    while i < SHORT_RUN {
        let Some(word) = rest.get(i..).and_then(<[u8]>::first_chunk::<8>) else {
            // Fewer than eight bytes left.
            let left = &rest[i..];
            return from
                + i
                + left
                    .iter()
                    .position(|&b| is_special(b))
                    .unwrap_or(left.len());
        };
        let k = first_special_in_word(u64::from_le_bytes(*word));
        if k < 8 {
            return from + i + k;
        }
        i += 8;
    }
    let tail = &rest[SHORT_RUN..];
    let end = memchr::memchr2(b'"', b'\\', tail).unwrap_or(tail.len());
    from + SHORT_RUN + first_control(&tail[..end]).unwrap_or(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_special_byte() {
        for text in [
            "",
            "abc",
            "abcdefgh\"",
            "abcdefghijklmnop\\q",
            "\u{1}",
            "héllo wörld, this is a long plain run \u{1f}",
            "0123456\"89",
            "\u{7f}\u{80}\u{ff}ÿ\"",
            // Past a block of `first_control`: a control byte in the second block, before
            // the quote; a quote in the third block, before a control byte.
            "0123456789abcdef0123456789abcdef0123\u{2}456789\"",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef01\"\u{3}",
            // Around the end of the byte-by-byte head.
            "0123456789abcde\"",
            "0123456789abcdef\"",
            "0123456789abcdef0\\",
            "0123456789abcdef",
            "0123456789abcdef\u{1}",
        ] {
            let bytes = text.as_bytes();
            for from in 0..=bytes.len() {
                let want = (from..bytes.len())
                    .find(|&i| matches!(bytes[i], b'"' | b'\\' | 0..=0x1f))
                    .unwrap_or(bytes.len());
                assert_eq!(string_special(bytes, from), want, "{text:?} from {from}");
            }
        }
    }

    #[test]
    fn every_byte_value_at_every_place_of_the_word_tests() {
        let want = |bytes: &[u8], from: usize| {
            (from..bytes.len())
                .find(|&i| matches!(bytes[i], b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(bytes.len())
        };
        for len in [7, 8, 9, 15, 16, 17, 24, 40] {
            for at in 0..len {
                for v in 0..=255u8 {
                    // `v` alone, and `v` before a later quote (whose borrow cannot reach it).
                    for later in [None, Some(len - 1)] {
                        let mut bytes = vec![b'a'; len];
                        if let Some(l) = later.filter(|&l| l > at) {
                            bytes[l] = b'"';
                        }
                        bytes[at] = v;
                        for from in 0..4.min(len) {
                            assert_eq!(
                                string_special(&bytes, from),
                                want(&bytes, from),
                                "{bytes:?} from {from}"
                            );
                        }
                    }
                }
            }
        }
    }
}
