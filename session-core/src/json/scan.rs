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

/// How many bytes at the start of a string run are searched one by one before
/// [`string_special`] hands the rest to `memchr`: most strings of a log are short (delta texts
/// of a few bytes), and a byte loop finds their end before `memchr`'s set-up would.
const SHORT_RUN: usize = 16;

/// The index of the first byte at or after `from` that ends a plain run inside a JSON string:
/// `"`, `\` or a control character; `bytes.len()` when there is none.
#[inline]
pub(crate) fn string_special(bytes: &[u8], from: usize) -> usize {
    let Some(rest) = bytes.get(from..) else {
        return bytes.len();
    };
    let head = rest.get(..SHORT_RUN).unwrap_or(rest);
    if let Some(i) = head
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
    {
        return from + i;
    }
    let Some(tail) = rest.get(SHORT_RUN..) else {
        return bytes.len();
    };
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
}
