//! A strict, iterative, lossless JSON parser.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::number::Number;
use super::value::{Array, Object, Value};

/// The deepest nesting [`parse`] accepts. Deeper input is refused with
/// [`ParseErrorKind::TooDeep`] instead of exhausting memory or the stack.
pub const MAX_DEPTH: usize = 100_000;

/// Why JSON text was refused, and at which byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the parsed text.
    pub offset: usize,
    /// What went wrong.
    pub kind: ParseErrorKind,
}

/// The kinds of [`ParseError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The text ended inside a value.
    UnexpectedEnd,
    /// A character that cannot start or continue a value here.
    UnexpectedCharacter(char),
    /// A malformed number literal.
    InvalidNumber,
    /// A malformed escape sequence.
    InvalidEscape,
    /// A raw control character inside a string.
    ControlCharacter,
    /// A `\uD800`-style escape that is not half of a surrogate pair. Such strings cannot be
    /// represented in Rust and are refused (a documented limitation).
    LoneSurrogate,
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Non-whitespace after the value.
    TrailingCharacters,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ParseErrorKind::UnexpectedEnd => write!(f, "unexpected end of JSON input"),
            ParseErrorKind::UnexpectedCharacter(c) => {
                write!(f, "unexpected character {c:?} at byte {}", self.offset)
            }
            ParseErrorKind::InvalidNumber => write!(f, "invalid number at byte {}", self.offset),
            ParseErrorKind::InvalidEscape => {
                write!(f, "invalid escape sequence at byte {}", self.offset)
            }
            ParseErrorKind::ControlCharacter => {
                write!(
                    f,
                    "unescaped control character in string at byte {}",
                    self.offset
                )
            }
            ParseErrorKind::LoneSurrogate => write!(
                f,
                "lone UTF-16 surrogate escape at byte {} (not representable; refused)",
                self.offset
            ),
            ParseErrorKind::TooDeep => write!(
                f,
                "JSON nesting deeper than {MAX_DEPTH} levels at byte {}",
                self.offset
            ),
            ParseErrorKind::TrailingCharacters => {
                write!(
                    f,
                    "unexpected data after JSON value at byte {}",
                    self.offset
                )
            }
        }
    }
}

impl std::error::Error for ParseError {}

enum Frame {
    Array(Vec<Value>),
    Object(Vec<(Arc<str>, Value)>, Arc<str>),
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

/// Parses one JSON value (surrounded by optional JSON whitespace).
///
/// Semantics follow `JSON.parse`, except that nothing is lost: object keys follow the
/// JavaScript order rules (see [`Object`]), and numbers keep their spelling when it differs
/// from the JavaScript formatting of their value.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let v = p.parse_value()?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.err(ParseErrorKind::TrailingCharacters));
    }
    Ok(v)
}

/// Parses the one JSON value that starts at byte `pos` of `text` (no whitespace before it), with
/// the rules of [`parse`]; returns it and the position after it.
pub(crate) fn value_at(text: &str, pos: usize) -> Result<(Value, usize), ParseError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos,
    };
    let v = p.parse_value()?;
    Ok((v, p.pos))
}

/// Reads the JSON string literal that starts at byte `pos` of `text` (a `"`), with the same
/// rules as [`parse`]; returns the decoded string and the position after the closing quote.
pub(crate) fn string_at(text: &str, pos: usize) -> Result<(Cow<'_, str>, usize), ParseError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos,
    };
    if p.peek() != Some(b'"') {
        return Err(p.err(ParseErrorKind::UnexpectedEnd));
    }
    let s = match p.parse_string_raw()? {
        Raw::Slice(s) => Cow::Borrowed(s),
        Raw::Owned(s) => Cow::Owned(s),
    };
    Ok((s, p.pos))
}

impl<'a> Parser<'a> {
    fn err(&self, kind: ParseErrorKind) -> ParseError {
        ParseError {
            offset: self.pos,
            kind,
        }
    }

    fn unexpected(&self) -> ParseError {
        match self.text[self.pos..].chars().next() {
            Some(c) => self.err(ParseErrorKind::UnexpectedCharacter(c)),
            None => self.err(ParseErrorKind::UnexpectedEnd),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn parse_value(&mut self) -> Result<Value, ParseError> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            // Parse one value start; containers push a frame.
            self.skip_ws();
            let mut value = match self.peek() {
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
                Some(b'{') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Value::Object(Object::default())
                    } else {
                        if stack.len() >= MAX_DEPTH {
                            return Err(self.err(ParseErrorKind::TooDeep));
                        }
                        let key = self.parse_key()?;
                        stack.push(Frame::Object(Vec::new(), key));
                        continue;
                    }
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        Value::Array(Array::default())
                    } else {
                        if stack.len() >= MAX_DEPTH {
                            return Err(self.err(ParseErrorKind::TooDeep));
                        }
                        stack.push(Frame::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'"') => Value::String(self.parse_string()?),
                Some(b't') => self.literal("true", Value::Bool(true))?,
                Some(b'f') => self.literal("false", Value::Bool(false))?,
                Some(b'n') => self.literal("null", Value::Null)?,
                Some(b'-' | b'0'..=b'9') => Value::Number(self.parse_number()?),
                Some(_) => return Err(self.unexpected()),
            };
            // Attach the finished value to its parent, closing containers as they end.
            loop {
                let Some(frame) = stack.last_mut() else {
                    return Ok(value);
                };
                self.skip_ws();
                match frame {
                    Frame::Array(items) => {
                        items.push(value);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                break;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                let Some(Frame::Array(items)) = stack.pop() else {
                                    unreachable!("top frame is an array")
                                };
                                value = Value::Array(Array::new(items));
                            }
                            _ => return Err(self.unexpected()),
                        }
                    }
                    Frame::Object(entries, key) => {
                        entries.push((key.clone(), value));
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.parse_key()?;
                                break;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Frame::Object(entries, _)) = stack.pop() else {
                                    unreachable!("top frame is an object")
                                };
                                value = Value::Object(Object::from_entries(entries));
                            }
                            _ => return Err(self.unexpected()),
                        }
                    }
                }
            }
        }
    }

    fn parse_key(&mut self) -> Result<Arc<str>, ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected());
        }
        let key = self.parse_string_raw()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.unexpected());
        }
        self.pos += 1;
        Ok(match key {
            Raw::Slice(s) => super::key(s),
            Raw::Owned(s) => s.into(),
        })
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, ParseError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            // Point at the first differing byte.
            let mut i = 0;
            while self.bytes.get(self.pos + i) == word.as_bytes().get(i) {
                i += 1;
            }
            self.pos += i;
            Err(self.unexpected())
        }
    }

    fn parse_number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        let b = self.bytes;
        let mut i = self.pos;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => {
                self.pos = i;
                return Err(self.err(ParseErrorKind::InvalidNumber));
            }
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !b.get(i).is_some_and(u8::is_ascii_digit) {
                self.pos = i;
                return Err(self.err(ParseErrorKind::InvalidNumber));
            }
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !b.get(i).is_some_and(u8::is_ascii_digit) {
                self.pos = i;
                return Err(self.err(ParseErrorKind::InvalidNumber));
            }
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        self.pos = i;
        Ok(Number::from_text(&self.text[start..i]))
    }

    fn parse_string(&mut self) -> Result<Arc<str>, ParseError> {
        Ok(match self.parse_string_raw()? {
            Raw::Slice(s) => s.into(),
            Raw::Owned(s) => s.into(),
        })
    }

    fn parse_string_raw(&mut self) -> Result<Raw<'a>, ParseError> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        self.pos += 1;
        let start = self.pos;
        let b: &'a [u8] = self.bytes;
        let text: &'a str = self.text;
        // Fast scan for the closing quote without escapes.
        let mut i = super::scan::string_special(b, start);
        match b.get(i) {
            Some(b'"') => {
                self.pos = i + 1;
                return Ok(Raw::Slice(&text[start..i]));
            }
            Some(0x00..=0x1f) => {
                self.pos = i;
                return Err(self.err(ParseErrorKind::ControlCharacter));
            }
            _ => {}
        }
        if i >= b.len() {
            self.pos = i;
            return Err(self.err(ParseErrorKind::UnexpectedEnd));
        }
        let mut out = String::with_capacity(i - start + 16);
        out.push_str(&self.text[start..i]);
        loop {
            let Some(&c) = b.get(i) else {
                self.pos = i;
                return Err(self.err(ParseErrorKind::UnexpectedEnd));
            };
            match c {
                b'"' => {
                    self.pos = i + 1;
                    return Ok(Raw::Owned(out));
                }
                b'\\' => {
                    let esc_at = i;
                    let Some(&e) = b.get(i + 1) else {
                        self.pos = i + 1;
                        return Err(self.err(ParseErrorKind::UnexpectedEnd));
                    };
                    i += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4(i, esc_at)?;
                            i += 4;
                            let ch = if (0xD800..0xDC00).contains(&hi) {
                                // Needs a following low surrogate escape.
                                let lo = if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u')
                                {
                                    Some(self.hex4(i + 2, i)?)
                                } else {
                                    None
                                };
                                match lo {
                                    Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                        i += 6;
                                        let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                        char::from_u32(cp)
                                    }
                                    _ => None,
                                }
                            } else if (0xDC00..0xE000).contains(&hi) {
                                None
                            } else {
                                char::from_u32(hi)
                            };
                            let Some(ch) = ch else {
                                self.pos = esc_at;
                                return Err(self.err(ParseErrorKind::LoneSurrogate));
                            };
                            out.push(ch);
                        }
                        _ => {
                            self.pos = esc_at;
                            return Err(self.err(ParseErrorKind::InvalidEscape));
                        }
                    }
                }
                0x00..=0x1f => {
                    self.pos = i;
                    return Err(self.err(ParseErrorKind::ControlCharacter));
                }
                _ => {
                    // Copy a run of ordinary bytes (always whole UTF-8 sequences).
                    let run_start = i;
                    i = super::scan::string_special(b, i);
                    out.push_str(&self.text[run_start..i]);
                }
            }
        }
    }

    fn hex4(&mut self, at: usize, esc_at: usize) -> Result<u32, ParseError> {
        let Some(digits) = self.bytes.get(at..at + 4) else {
            self.pos = esc_at;
            return Err(self.err(ParseErrorKind::InvalidEscape));
        };
        let mut v = 0u32;
        for &d in digits {
            let Some(x) = (d as char).to_digit(16) else {
                self.pos = esc_at;
                return Err(self.err(ParseErrorKind::InvalidEscape));
            };
            v = v * 16 + x;
        }
        Ok(v)
    }
}

enum Raw<'a> {
    Slice(&'a str),
    Owned(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_compact_text() {
        for text in [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            "[]",
            "{}",
            r#""\u0000\b\f\n\r\t\"\\ \u001f""#,
            "1.0",
            "-0",
            r#"{"x":1e400}"#,
            r#""😀 ü /""#,
        ] {
            assert_eq!(parse(text).unwrap().to_json(), text);
        }
    }

    #[test]
    fn javascript_key_order_and_duplicates() {
        assert_eq!(
            parse(r#"{"b":1,"2":0,"a":2,"1":3}"#).unwrap().to_json(),
            r#"{"1":3,"2":0,"b":1,"a":2}"#
        );
        assert_eq!(
            parse(r#"{"a":1,"b":2,"a":3}"#).unwrap().to_json(),
            r#"{"a":3,"b":2}"#
        );
        // Not canonical indices: stay in insertion order.
        assert_eq!(
            parse(r#"{"b":1,"01":0,"4294967295":1,"4294967294":2}"#)
                .unwrap()
                .to_json(),
            r#"{"4294967294":2,"b":1,"01":0,"4294967295":1}"#
        );
    }

    #[test]
    fn escapes_are_normalized_like_json_stringify() {
        assert_eq!(parse(r#""\/\u0041\u00e9""#).unwrap().to_json(), r#""/Aé""#);
        assert_eq!(parse(r#""\ud83d\ude00""#).unwrap().to_json(), "\"😀\"");
        assert_eq!(parse("\"\u{2028}\"").unwrap().to_json(), "\"\u{2028}\"");
    }

    #[test]
    fn refuses_lone_surrogates_with_offset() {
        let e = parse(r#"{"a":"x\ud800y"}"#).unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::LoneSurrogate);
        assert_eq!(e.offset, 7);
        assert_eq!(
            parse(r#""\udc00""#).unwrap_err().kind,
            ParseErrorKind::LoneSurrogate
        );
        assert_eq!(
            parse(r#""\ud800\u0041""#).unwrap_err().kind,
            ParseErrorKind::LoneSurrogate
        );
    }

    #[test]
    fn refuses_malformed_input() {
        for (text, offset) in [
            ("", 0),
            ("{", 1),
            ("[1,]", 3),
            ("{\"a\" 1}", 5),
            ("01", 1),
            ("1.", 2),
            ("-", 1),
            ("tru", 3),
            ("\"a\nb\"", 2),
            ("[1] x", 4),
            ("{'a':1}", 1),
            ("\"\\x\"", 1),
            ("NaN", 0),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.offset, offset, "{text:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_iterative() {
        let depth = 50_000;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let v = parse(&text).unwrap();
        assert_eq!(v.to_json().len(), text.len());
        assert!(v == v.clone());
        drop(v);
        let obj = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        assert_eq!(parse(&obj).unwrap().to_json(), obj);
        let too_deep = "[".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&too_deep).unwrap_err().kind, ParseErrorKind::TooDeep);
    }
}
