//! Random UUID v4 generation (the `uuid` crate, from the operating system's random source) and
//! the reference's UUID shape check.

/// A random (version 4, RFC 4122 variant) UUID in lowercase hyphenated form, like Node's
/// `crypto.randomUUID()`.
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
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
