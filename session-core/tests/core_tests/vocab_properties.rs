//! Properties of the typed vocabulary over generated messages: whatever key order, unknown
//! fields, unknown block types or source kinds a message has, reading it and writing it back
//! gives an equal value and the same bytes; a message with a field of the wrong type is a
//! typed error naming that field, never a panic, and anything that reads writes back equal.

use proptest::prelude::*;
use session_core::Event;
use session_core::json::{self, Value};
use session_core::vocab::Message;

/// A JSON leaf, numbers in spellings JavaScript would not write included.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just("null"),
        Just("true"),
        Just("1.0"),
        Just("-0"),
        Just("9007199254740993"),
        Just("1E5"),
        Just("12"),
        Just("\"s\""),
        Just("[1,{\"a\":2.50}]"),
        Just("{}"),
    ]
    .prop_map(|t| Value::parse(t).expect("leaf text parses"))
}

fn text() -> impl Strategy<Value = Value> {
    "[a-z \\n\"\\\\\u{1}é]{0,6}".prop_map(Value::from)
}

/// An object of `named` fields plus up to two unknown ones (index-like keys included), in a
/// random order. (A `&str` is a regex strategy in proptest; these keys are literal.)
fn object(named: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    let extra = prop::collection::vec(
        (prop_oneof![Just("x"), Just("7"), Just("zz")], leaf()),
        0..3,
    );
    (named, extra)
        .prop_flat_map(|(named, extra)| {
            let mut entries: Vec<(String, Value)> = named.into_iter().collect();
            for (k, v) in extra {
                if !entries.iter().any(|(e, _)| e == k) {
                    entries.push((k.to_owned(), v));
                }
            }
            Just(entries).prop_shuffle()
        })
        .prop_map(Value::object)
        .boxed()
}

fn tag(v: &'static str) -> BoxedStrategy<Value> {
    Just(Value::from(v)).boxed()
}

fn block(depth: u32) -> BoxedStrategy<Value> {
    let mut choices = vec![
        object(vec![("type", tag("text")), ("text", text().boxed())]),
        object(vec![("type", tag("reasoning")), ("text", text().boxed())]),
        object(vec![
            ("type", tag("tool-call")),
            ("id", text().boxed()),
            ("name", text().boxed()),
            ("arguments", prop_oneof![text(), leaf()].boxed()),
        ]),
        object(vec![
            ("type", tag("image")),
            (
                "attachment",
                object(vec![
                    ("attachmentId", text().boxed()),
                    ("mediaType", tag("image/png")),
                    ("bytes", (0u32..100_000).prop_map(Value::from).boxed()),
                    ("width", (0u32..4096).prop_map(Value::from).boxed()),
                    ("height", (0u32..4096).prop_map(Value::from).boxed()),
                ]),
            ),
        ]),
        object(vec![
            ("type", tag("x-plugin-block")),
            ("body", leaf().boxed()),
        ]),
    ];
    if depth > 0 {
        choices.push(object(vec![
            ("type", tag("tool-result")),
            ("toolCallId", text().boxed()),
            (
                "content",
                prop::collection::vec(block(depth - 1), 0..3)
                    .prop_map(Value::from)
                    .boxed(),
            ),
            ("isError", any::<bool>().prop_map(Value::from).boxed()),
        ]));
    }
    prop::strategy::Union::new(choices).boxed()
}

fn source() -> BoxedStrategy<Value> {
    prop_oneof![
        object(vec![("kind", tag("user"))]),
        object(vec![
            ("kind", tag("model")),
            ("provider", text().boxed()),
            ("model", text().boxed()),
            ("replayState", leaf().boxed()),
        ]),
        object(vec![("kind", tag("tool")), ("callId", text().boxed())]),
        object(vec![
            ("kind", tag("plugin")),
            ("plugin", text().boxed()),
            ("form", tag("snapshot")),
            (
                "sections",
                prop::collection::vec(
                    object(vec![("name", text().boxed()), ("text", text().boxed())]),
                    0..3,
                )
                .prop_map(Value::from)
                .boxed(),
            ),
        ]),
        object(vec![("kind", tag("goal")), ("goalId", text().boxed())]),
    ]
    .boxed()
}

fn message() -> BoxedStrategy<Value> {
    object(vec![
        ("id", "[a-z0-9-]{1,8}".prop_map(Value::from).boxed()),
        (
            "role",
            prop_oneof![Just("user"), Just("assistant"), Just("system")]
                .prop_map(Value::from)
                .boxed(),
        ),
        (
            "content",
            prop::collection::vec(block(2), 0..4)
                .prop_map(Value::from)
                .boxed(),
        ),
        ("source", source()),
    ])
}

fn check_round_trip(v: &Value, m: &Message) -> Result<(), TestCaseError> {
    let written = m
        .to_value()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&written, v);
    prop_assert_eq!(written.to_json(), v.to_json());
    let via_serde = json::to_value(m).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(via_serde.to_json(), v.to_json());
    Ok(())
}

proptest! {
    #[test]
    fn generated_messages_round_trip_byte_for_byte(v in message()) {
        let m = Message::from_value(&v).map_err(|e| TestCaseError::fail(format!("{e}: {v}")))?;
        check_round_trip(&v, &m)?;
        let event = Event::appended("user/message", 3, 0, v.clone(), None, None);
        let read: Message = event.data_as().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&read, &m);
    }

    #[test]
    fn a_replaced_field_reads_back_equal_or_is_an_error_naming_it(
        v in message(),
        which in 0usize..8,
        replacement in prop_oneof![leaf(), text()],
    ) {
        let obj = v.as_object().unwrap();
        let (key, _) = &obj.entries()[which % obj.len()];
        let mutated = Value::Object(obj.with(key, replacement));
        match Message::from_value(&mutated) {
            Ok(m) => check_round_trip(&mutated, &m)?,
            Err(e) => {
                let named = e.pointer().starts_with(&format!("/{key}"))
                    || e.to_string().contains(&format!("`{key}`"));
                prop_assert!(named, "{} does not name {}", e, key);
                let event = Event::appended("user/message", 9, 0, mutated.clone(), None, None);
                let err = event.data_as::<Message>().unwrap_err().to_string();
                prop_assert!(err.starts_with("event at seq 9 (\"user/message\")"), "{}", err);
            }
        }
    }
}

/// A vocabulary type inside a serde type: the error's path runs from the outer value down to
/// the field, in the structured path as in the text.
#[test]
fn vocabulary_errors_keep_their_path_inside_serde_types() {
    #[derive(serde::Deserialize, Debug)]
    struct Outer {
        #[allow(dead_code)]
        messages: Vec<Message>,
    }
    #[derive(serde::Serialize)]
    struct Holder {
        usage: session_core::vocab::Usage,
    }
    let v = Value::parse(
        r#"{"messages":[{"id":"m","role":"user","content":[],"source":{"kind":"user"}},{"id":"m","role":"user","content":[{"type":"text","text":5}],"source":{"kind":"user"}}]}"#,
    )
    .expect("parses");
    let err = json::from_value::<Outer>(&v).expect_err("text is a number");
    assert_eq!(err.pointer(), "/messages/1/content/0/text");
    assert_eq!(
        err.to_string(),
        "invalid type: number, expected a string at /messages/1/content/0/text"
    );
    let inner = v.get("messages").and_then(|m| m.as_array()).expect("array")[1].clone();
    let event = Event::appended("user/message", 4, 0, inner, None, None);
    let err = event.data_as::<Message>().expect_err("text is a number");
    assert_eq!(
        err.to_string(),
        r#"event at seq 4 ("user/message"): data does not fit: invalid type: number, expected a string at /content/0/text"#
    );
    // Writing: the path of a refused number inside a vocabulary value held by a serde type.
    let usage = session_core::vocab::Usage {
        input_tokens: u64::MAX,
        ..Default::default()
    };
    let err = json::to_value(&Holder { usage }).expect_err("unsafe integer");
    assert_eq!(err.pointer(), "/usage/inputTokens");
}
