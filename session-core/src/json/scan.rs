//! Word-at-a-time byte searches for the parser's hot loops.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `w` that is zero (exact for the lowest such byte).
#[inline]
fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(ONES) & !w & HIGHS
}

/// The high bit of every byte of `w` below `n` (`n <= 128`; exact for the lowest such byte).
#[inline]
fn bytes_below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGHS
}

/// The index of the first byte at or after `from` that ends a plain run inside a JSON string:
/// `"`, `\` or a control character; `bytes.len()` when there is none.
#[inline]
pub(crate) fn string_special(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(word) = bytes.get(i..i + 8) {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(word);
        let w = u64::from_le_bytes(raw);
        let hits = zero_bytes(w ^ (ONES * u64::from(b'"')))
            | zero_bytes(w ^ (ONES * u64::from(b'\\')))
            | bytes_below(w, 0x20);
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    bytes.len()
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
