//! JSON numbers with JavaScript semantics and exact text preservation.

use std::fmt;
use std::sync::Arc;

/// The largest safe integer, `Number.MAX_SAFE_INTEGER` (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// A JSON number: an IEEE-754 double, as in JavaScript.
///
/// A number parsed from text whose spelling differs from the JavaScript formatting of its value
/// (`1.0`, `1E5`, `-0`, an integer beyond 2^53) keeps that spelling, so re-serializing a stored
/// log reproduces its bytes exactly. Numbers built in code always use the JavaScript spelling.
#[derive(Clone)]
pub struct Number(Repr);

#[derive(Clone)]
enum Repr {
    Float(f64),
    Text(Arc<(f64, Box<str>)>),
}

impl Number {
    /// A number from a double; `None` for NaN and infinities.
    pub fn from_f64(v: f64) -> Option<Number> {
        v.is_finite().then_some(Number(Repr::Float(v)))
    }

    /// A number from an integer; `None` outside ±(2^53 − 1).
    pub fn from_i64(v: i64) -> Option<Number> {
        (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER)
            .contains(&v)
            .then_some(Number(Repr::Float(v as f64)))
    }

    /// A number from an unsigned integer; `None` above 2^53 − 1.
    pub fn from_u64(v: u64) -> Option<Number> {
        (v <= MAX_SAFE_INTEGER as u64).then_some(Number(Repr::Float(v as f64)))
    }

    /// A number read from JSON text. `text` must be a valid JSON number literal.
    pub(crate) fn from_text(text: &str) -> Number {
        if let Some(v) = canonical_int(text) {
            return Number(Repr::Float(v as f64));
        }
        // Rust's float parsing is correctly rounded, like JavaScript's.
        let v: f64 = text.parse().unwrap_or(f64::NAN);
        if v.is_finite() && !(v == 0.0 && v.is_sign_negative()) {
            let mut canon = String::with_capacity(text.len());
            write_js_number(v, &mut canon);
            if canon == text {
                return Number(Repr::Float(v));
            }
        }
        Number(Repr::Text(Arc::new((v, text.into()))))
    }

    /// The value as a double (infinite for an out-of-range literal read from text).
    pub fn as_f64(&self) -> f64 {
        match &self.0 {
            Repr::Float(v) => *v,
            Repr::Text(t) => t.0,
        }
    }

    /// `Number.isSafeInteger(n)`: the integer value, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        let v = self.as_f64();
        if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE_INTEGER as f64 {
            Some(v as i64)
        } else {
            None
        }
    }

    /// A non-negative safe integer (`Number.isSafeInteger(n) && n >= 0`; `-0` counts as 0).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|v| u64::try_from(v).ok())
    }

    /// Whether the value is finite.
    pub fn is_finite(&self) -> bool {
        self.as_f64().is_finite()
    }

    /// Whether the value is negative zero.
    pub fn is_negative_zero(&self) -> bool {
        let v = self.as_f64();
        v == 0.0 && v.is_sign_negative()
    }

    /// Whether the number keeps a spelling that is not the JavaScript formatting of its value.
    pub fn is_verbatim(&self) -> bool {
        matches!(self.0, Repr::Text(_))
    }

    /// Whether the original spelling is an integer literal (no fraction, no exponent).
    pub fn is_integer_literal(&self) -> bool {
        match &self.0 {
            // JavaScript prints integral values below 1e21 without fraction or exponent.
            Repr::Float(v) => v.fract() == 0.0 && v.abs() < 1e21,
            Repr::Text(t) => !t.1.contains(['.', 'e', 'E']),
        }
    }

    /// Whether a live `append` may accept this number: finite, not `-0`, and not an integer
    /// literal outside the safe range (a JavaScript reader would silently change it).
    pub fn is_appendable(&self) -> bool {
        let v = self.as_f64();
        if !v.is_finite() || self.is_negative_zero() {
            return false;
        }
        // The magnitude first: the literal's form only matters outside the safe range.
        v.abs() <= MAX_SAFE_INTEGER as f64 || !self.is_integer_literal()
    }

    /// The same value in JavaScript spelling (what `JSON.stringify(JSON.parse(text))` gives).
    #[must_use]
    pub fn canonical(&self) -> Number {
        Number(Repr::Float(self.as_f64()))
    }

    /// Appends the serialized form: the original spelling when kept, else JavaScript's.
    pub fn write(&self, out: &mut String) {
        match &self.0 {
            Repr::Float(v) => write_js_number(*v, out),
            Repr::Text(t) => out.push_str(&t.1),
        }
    }
}

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        self.as_f64() == other.as_f64()
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

macro_rules! from_small_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Number {
            fn from(n: $t) -> Number {
                Number(Repr::Float(f64::from(n)))
            }
        }
    )*};
}
from_small_int!(u8, u16, u32, i8, i16, i32);

/// The value of an integer literal of at most 15 digits that JavaScript prints exactly as
/// written: no leading zeros, no fraction or exponent, and not `-0`. Such a value is exact in a
/// double.
fn canonical_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    if digits.is_empty() || digits.len() > 15 || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(d - b'0');
    }
    match (negative, v) {
        (true, 0) => None,
        (true, v) => Some(-v),
        (false, v) => Some(v),
    }
}

/// Appends the decimal form of an integer. `itoa` rather than `Display`: the formatting
/// machinery was about a tenth of `sessionctl seal`'s profile, which writes the JSON text of
/// every event several times.
pub(crate) fn write_int(n: impl itoa::Integer, out: &mut String) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Appends the ECMAScript `Number::toString` form of `v` (shortest round-trip digits, exponent
/// form from 1e21 up and below 1e-6). Non-finite values are written as `null`, as
/// `JSON.stringify` does.
pub fn write_js_number(v: f64, out: &mut String) {
    if !v.is_finite() {
        out.push_str("null");
        return;
    }
    if v == 0.0 {
        out.push('0');
        return;
    }
    // Fast path for integers that print exactly.
    if v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
        write_int(v as i64, out);
        return;
    }
    // Shortest round-trip digits from Rust's `{:e}` (e.g. "1.2345e-7").
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let e: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = e + 1; // decimal point position relative to the digit string
    if v < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let exp = n - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        write_int(exp.abs(), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn js(v: f64) -> String {
        let mut s = String::new();
        write_js_number(v, &mut s);
        s
    }

    #[test]
    fn formats_like_ecmascript() {
        assert_eq!(js(0.0), "0");
        assert_eq!(js(-0.0), "0");
        assert_eq!(js(1.0), "1");
        assert_eq!(js(-1.5), "-1.5");
        assert_eq!(js(1.25), "1.25");
        assert_eq!(js(1e21), "1e+21");
        assert_eq!(js(1e20), "100000000000000000000");
        assert_eq!(js(123_456_789_012_345_680_000.0), "123456789012345680000");
        assert_eq!(js(1e-7), "1e-7");
        assert_eq!(js(1.5e-7), "1.5e-7");
        assert_eq!(js(0.000_001), "0.000001");
        assert_eq!(js(0.1), "0.1");
        assert_eq!(js(4.435_375_000_000_022), "4.435375000000022");
        assert_eq!(js(9_007_199_254_740_993.0), "9007199254740992");
        assert_eq!(js(1.797_693_134_862_315_7e308), "1.7976931348623157e+308");
        assert_eq!(js(5e-324), "5e-324");
        assert_eq!(js(-1e-7), "-1e-7");
        assert_eq!(js(123.456), "123.456");
        assert_eq!(js(f64::NAN), "null");
    }

    #[test]
    fn keeps_non_canonical_spelling() {
        for text in ["1.0", "1E5", "-0", "0.10", "9007199254740993", "1e400"] {
            let n = Number::from_text(text);
            assert!(n.is_verbatim(), "{text}");
            let mut s = String::new();
            n.write(&mut s);
            assert_eq!(s, text);
        }
        for text in [
            "1",
            "-1.5",
            "1e+21",
            "1e-7",
            "0.000001",
            "0",
            "-7",
            "999999999999999",
        ] {
            assert!(!Number::from_text(text).is_verbatim(), "{text}");
        }
    }

    #[test]
    fn integer_fast_path_matches_the_general_rule() {
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
            "-",
            "",
        ] {
            let fast = canonical_int(text);
            let v: f64 = text.parse().unwrap_or(f64::NAN);
            let mut canon = String::new();
            write_js_number(v, &mut canon);
            if let Some(n) = fast {
                assert_eq!(canon, text, "{text}");
                assert_eq!((n as f64).to_bits(), v.to_bits(), "{text}");
            } else {
                assert!(
                    text.trim_start_matches('-').len() > 15
                        || canon != text
                        || text == "-0"
                        || text.is_empty(),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn safe_integer_rules() {
        assert_eq!(Number::from_text("-0").as_u64(), Some(0));
        assert!(Number::from_text("-0").is_negative_zero());
        assert!(!Number::from_text("-0").is_appendable());
        assert!(!Number::from_text("9007199254740993").is_appendable());
        assert!(Number::from_text("1e300").is_appendable());
        assert_eq!(Number::from_text("1.5").as_i64(), None);
        assert_eq!(
            Number::from_text("9007199254740991").as_i64(),
            Some(MAX_SAFE_INTEGER)
        );
        assert_eq!(Number::from_text("9007199254740992").as_i64(), None);
        assert!(Number::from_i64(MAX_SAFE_INTEGER + 1).is_none());
    }
}
