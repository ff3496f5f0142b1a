//! Strategies for JSON payloads and texts.

use proptest::collection::vec;
use proptest::prelude::*;
use session_core::event::int_value;
use session_core::json::{MAX_SAFE_INTEGER, Number, Value};

/// Short texts: plain ASCII most of the time, sometimes any printable character, sometimes the
/// characters `JSON.stringify` escapes or leaves alone on purpose (quotes, backslashes,
/// control characters, U+2028, `/`).
pub fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-zA-Z0-9 ,.]{0,12}",
        2 => "\\PC{0,8}",
        1 => Just("\"quoted\" \\ back/slash".to_owned()),
        1 => Just("tab\tnew\nline\r\u{0}\u{1f}\u{7f}".to_owned()),
        1 => Just("sep\u{2028}\u{2029} 开发 🦀".to_owned()),
    ]
}

/// An object key: a word, an integer-like key (which JavaScript orders first) or any text.
fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z][a-zA-Z]{0,6}",
        1 => "(0|[1-9][0-9]{0,3})",
        1 => "\\PC{0,5}",
    ]
}

/// A number a live append accepts: finite, not `-0`, and not an integer-spelled value outside
/// ±(2^53 − 1).
pub fn arb_number() -> impl Strategy<Value = Value> {
    let float = any::<f64>().prop_filter_map("appendable", |f| {
        Number::from_f64(f)
            .filter(Number::is_appendable)
            .map(Value::Number)
    });
    prop_oneof![
        4 => (-1000i64..1000).prop_map(int_value),
        2 => (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).prop_map(int_value),
        2 => float,
        1 => prop::sample::select(vec![0.1, 0.5, 1e21, 1e-7, 5e-324, 1.797_693_134_862_315_7e308, -2.5])
            .prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
    ]
}

/// Any appendable JSON value, nested up to a few levels.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        arb_number(),
        arb_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::array),
            vec((arb_key(), inner), 0..4).prop_map(object_last_wins),
        ]
    })
}

/// An object from entries where a repeated key keeps its last value.
pub fn object_last_wins(entries: Vec<(String, Value)>) -> Value {
    let mut unique: Vec<(String, Value)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        if let Some(slot) = unique.iter_mut().find(|(key, _)| *key == k) {
            slot.1 = v;
        } else {
            unique.push((k, v));
        }
    }
    Value::object(unique)
}

/// `v` with integer-valued numbers respelled the way other JSON writers spell them (`1.0`,
/// `1e0`, `1E+0`, `1.000`), as a log read from disk may hold them. `picks` chooses the
/// spelling of each number in turn (cycling; 0 keeps JavaScript's). Values are unchanged;
/// only spellings differ.
pub fn respell_numbers(v: &Value, picks: &[u8]) -> Value {
    let mut next = 0usize;
    respell(v, picks, &mut next)
}

fn respell(v: &Value, picks: &[u8], next: &mut usize) -> Value {
    match v {
        Value::Number(n) => {
            let pick = if picks.is_empty() {
                0
            } else {
                picks[*next % picks.len()]
            };
            *next += 1;
            let mut text = String::new();
            n.write(&mut text);
            if text.contains(['.', 'e', 'E']) {
                return v.clone();
            }
            let spelled = match pick % 5 {
                0 => return v.clone(),
                1 => format!("{text}.0"),
                2 => format!("{text}e0"),
                3 => format!("{text}E+0"),
                _ => format!("{text}.000"),
            };
            Value::parse(&spelled).unwrap_or_else(|_| v.clone())
        }
        Value::Array(items) => Value::array(items.iter().map(|i| respell(i, picks, next))),
        Value::Object(o) => Value::object(
            o.iter()
                .map(|(k, i)| (k.to_owned(), respell(i, picks, next)))
                .collect::<Vec<_>>(),
        ),
        other => other.clone(),
    }
}
