//! Random UUID v4 generation and the reference's UUID shape check.
//!
//! The 16 random bytes come from `/dev/urandom`. Where that device cannot be read, they are
//! derived from the standard library's randomly keyed `RandomState` hasher, mixed with the
//! clock, the process id and a counter; either way no new dependency is needed.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

fn random_bytes() -> [u8; 16] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok()
    {
        return bytes;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes
}

/// A random (version 4, RFC 4122 variant) UUID in lowercase hyphenated form, like Node's
/// `crypto.randomUUID()`.
pub fn random_uuid() -> String {
    let mut b = random_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut out = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(byte & 0x0f)]));
    }
    out
}

/// Whether `s` has the shape the reference accepts as a stored UUID:
/// `xxxxxxxx-xxxx-Vxxx-Nxxx-xxxxxxxxxxxx` in hex of either case, with version `V` in `1..=8`
/// and variant `N` in `[89ab]`.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    for (i, &c) in b.iter().enumerate() {
        let ok = match i {
            8 | 13 | 18 | 23 => c == b'-',
            14 => (b'1'..=b'8').contains(&c),
            19 => matches!(c.to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b'),
            _ => c.is_ascii_hexdigit(),
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_uuids_are_v4_and_distinct() {
        let a = random_uuid();
        let b = random_uuid();
        assert_ne!(a, b);
        for u in [&a, &b] {
            assert!(is_uuid(u), "{u}");
            assert_eq!(&u[14..15], "4");
            assert!(u.bytes().all(|c| !c.is_ascii_uppercase()));
        }
    }

    #[test]
    fn uuid_shape_matches_the_reference_pattern() {
        assert!(is_uuid("00000000-0000-4000-8000-000000000000"));
        assert!(is_uuid("ABCDEF01-2345-1789-B000-00000000000F"));
        for bad in [
            "",
            "not-a-uuid",
            "00000000-0000-0000-8000-000000000000",
            "00000000-0000-9000-8000-000000000000",
            "00000000-0000-4000-c000-000000000000",
            "00000000-0000-4000-8000-00000000000g",
            "00000000_0000-4000-8000-000000000000",
            "00000000-0000-4000-8000-0000000000000",
        ] {
            assert!(!is_uuid(bad), "{bad}");
        }
    }
}
