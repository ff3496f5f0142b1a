//! Bad input never panics: arbitrary JSON as append data, surface metadata, seeds and headers
//! either succeeds or fails with a typed error whose message is one of the reference's texts.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proptest::prelude::*;
use session_core::FixedClock;
use session_core::json::Value;
use session_surface::{Draft, Session};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i32..40).prop_map(Value::from),
        prop_oneof![
            Just("-0"),
            Just("1.5"),
            Just("9007199254740993"),
            Just("1e400"),
            Just("0.5")
        ]
        .prop_map(|t| Value::parse(t).unwrap()),
        prop_oneof![
            Just("append"),
            Just("replace"),
            Just("user"),
            Just("assistant"),
            Just("tool"),
            Just("model"),
            Just("tool-result"),
            Just("text"),
            Just("x"),
            Just(""),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop_oneof![
            Just("op"),
            Just("start"),
            Just("end"),
            Just("id"),
            Just("role"),
            Just("source"),
            Just("kind"),
            Just("content"),
            Just("message"),
            Just("callId"),
            Just("toolCallId"),
            Just("type"),
            Just("turn"),
            Just("step"),
            Just("provider"),
            Just("model"),
            Just("header"),
            Just("config"),
            Just("reason"),
            Just("seq"),
            Just("time"),
            Just("data"),
            Just("surfaceOp"),
            Just("sourceEventSeqs"),
            Just("ignorable"),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::array),
            prop::collection::vec((keys, inner), 0..6).prop_map(Value::object),
        ]
    })
}

/// Well-formed payloads for the three surface types, so that the surface checks are reached.
fn arb_data() -> impl Strategy<Value = Value> {
    prop_oneof![
        arb_json(),
        Just(Value::parse(
            r#"{"id":"u","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hi"}]}"#
        )
        .unwrap()),
        Just(Value::parse(
            r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[]}}"#
        )
        .unwrap()),
        Just(Value::parse(
            r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[]}]}}"#
        )
        .unwrap()),
    ]
}

fn arb_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("user/message"),
        Just("assistant/message"),
        Just("tool/result"),
        Just("turn/start"),
        Just("request/header"),
        Just("request/header-delta"),
        Just("session/end-seed"),
        Just("plugin/thing"),
        Just("turn/end"),
        Just("text-chunks"),
        Just("mode/set"),
        Just("steering/message"),
    ]
    .prop_map(str::to_owned)
}

/// The reference's message forms (session-core.md §2, §3.2, §1.6, and the port's decisions).
const KNOWN: &[&str] = &[
    "carries non-JSON-serializable data",
    "carries non-JSON-serializable surface metadata",
    "uses unsupported legacy request/header-delta format",
    "uses unsupported legacy request/header reason \"fallback\"",
    "lacks an identified message",
    "message must have role",
    "message has invalid source",
    "message has invalid content",
    "message must have model source",
    "message must have tool source",
    "message must contain one tool-result block",
    "message has mismatched tool call ids",
    "lacks provider/model",
    "has an invalid reasoningEffort",
    "has invalid adapterDefaults",
    "is not contiguous; expected",
    "is not surface-eligible and cannot carry surfaceOp",
    "is not surface-eligible and cannot carry sourceEventSeqs",
    "is surface-eligible and requires a surfaceOp marker",
    "carries an invalid surfaceOp",
    "carries an invalid replace surfaceOp",
    "not found in surface",
    "is after end seq",
    "must be an array when present",
    "must not be empty except on assistant/message",
    "must densely contain non-negative safe integers",
    "must not contain duplicates",
    "must reference earlier events",
    "must include every shadowed surface node",
    "must rewrite exactly one current node",
    "must target a current tool/result",
    "may change only content",
    "has an invalid event envelope",
    "is not losslessly JSON-serializable",
    "seed must be contiguous from 0",
    "session header",
    // The reader's rules, applied on append (`session_core::rules`).
    "unknown to this harness and not marked ignorable",
    "contains malformed pre-react-loop",
    "which readers rewrite; append the current shape",
    "a reserved packed-row storage tag",
    "contains unsupported legacy mode/set event",
];

fn known(message: &str) -> bool {
    KNOWN.iter().any(|k| message.contains(k))
}

fn clock() -> session_core::SharedClock {
    Arc::new(FixedClock::new(1_000))
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    ProptestConfig::with_cases(cases)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_appends_fail_only_with_reference_messages(
        steps in prop::collection::vec(
            (
                arb_type(),
                arb_data(),
                prop::option::of(arb_json()),
                prop::option::of(arb_json()),
                any::<bool>(),
            ),
            1..12,
        )
    ) {
        let mut s = Session::create("s", None, None, clock()).unwrap();
        for (ty, data, op, sources, ignorable) in steps {
            let before = s.seq();
            let mut draft = Draft::new(ty, data);
            draft.ignorable = ignorable;
            draft.surface_op = op;
            draft.source_event_seqs = sources;
            match s.append(draft) {
                Ok(e) => prop_assert_eq!(e.seq(), before),
                Err(e) => {
                    prop_assert!(known(&e.to_string()), "unexpected message: {}", e);
                    prop_assert_eq!(s.seq(), before, "a failed append changed the log");
                }
            }
        }
    }

    #[test]
    fn arbitrary_seeds_fail_only_with_reference_messages(
        seed in prop::collection::vec(arb_json(), 0..6),
        header in prop::option::of(arb_json()),
        restore in any::<bool>(),
    ) {
        let outcome = if restore {
            let header = header.unwrap_or_else(|| {
                Value::parse(r#"{"version":0,"id":"s","createdAt":1}"#).unwrap()
            });
            Session::from_restore("s", seed, &header, clock())
        } else {
            Session::create("s", Some(seed), header, clock())
        };
        if let Err(e) = outcome {
            prop_assert!(known(&e.to_string()), "unexpected message: {}", e);
        }
    }
}
