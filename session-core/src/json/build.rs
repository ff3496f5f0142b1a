//! Terse constructors for JSON documents built in code (reports, API responses), so that every
//! crate that writes such documents spells them the same way.
//!
//! ```
//! use session_core::json::build::{num, obj, opt_str};
//!
//! let doc = obj([("seq", num(7)), ("title", opt_str(None::<&str>))]);
//! assert_eq!(doc.to_json(), r#"{"seq":7,"title":null}"#);
//! ```

use super::{Number, Value};
use crate::event::seq_value;

/// An object with keys in the given order.
pub fn obj<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    Value::object(entries)
}

/// A non-negative integer (above 2^53 it is written as JavaScript would write the float).
pub fn num(n: u64) -> Value {
    seq_value(n)
}

/// A signed integer (times may be negative in hostile logs).
pub fn int(n: i64) -> Value {
    float(n as f64)
}

/// A float (non-finite values become `null`, as `JSON.stringify` writes them).
pub fn float(n: f64) -> Value {
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// An optional non-negative integer (`null` when absent).
pub fn opt_num(n: Option<u64>) -> Value {
    n.map_or(Value::Null, num)
}

/// An optional string (`null` when absent).
pub fn opt_str(s: Option<impl Into<Value>>) -> Value {
    s.map_or(Value::Null, Into::into)
}

/// An array of seqs.
pub fn seqs(items: &[u64]) -> Value {
    Value::array(items.iter().copied().map(num))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_write_what_json_stringify_writes() {
        let doc = obj([
            ("n", num(3)),
            ("big", num(1 << 60)),
            ("neg", int(-5)),
            ("nan", float(f64::NAN)),
            ("none", opt_num(None)),
            ("some", opt_num(Some(2))),
            ("s", opt_str(Some("x"))),
            ("seqs", seqs(&[1, 2])),
        ]);
        assert_eq!(
            doc.to_json(),
            r#"{"n":3,"big":1152921504606847000,"neg":-5,"nan":null,"none":null,"some":2,"s":"x","seqs":[1,2]}"#
        );
    }
}
