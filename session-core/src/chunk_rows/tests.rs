use proptest::prelude::*;

use super::*;
use crate::event::{EventParts, KeyOrder};

const MAX: i64 = MAX_SAFE_INTEGER;

fn text_chunk(kind: &str, index: u32, text: &str) -> Value {
    Value::object([
        ("type", Value::from(kind)),
        ("index", Value::from(index)),
        ("text", Value::from(text)),
    ])
}

fn tool_chunk(index: u32, id: &str, name: Option<&str>, args: &str) -> Value {
    let mut entries = vec![
        ("type", Value::from("tool-call-delta")),
        ("index", Value::from(index)),
        ("id", Value::from(id)),
    ];
    if let Some(name) = name {
        entries.push(("name", Value::from(name)));
    }
    entries.push(("argumentsDelta", Value::from(args)));
    Value::object(entries)
}

fn chunk_event(seq: u64, time: i64, turn: u32, step: u32, chunk: Value) -> Event {
    let data = Value::object([
        ("turn", Value::from(turn)),
        ("step", Value::from(step)),
        ("chunk", chunk),
    ]);
    Event::appended(CHUNK_EVENT_TYPE, seq, time, data, None, None)
}

fn text(seq: u64, time: i64, t: &str) -> Event {
    chunk_event(seq, time, 1, 1, text_chunk("text-delta", 0, t))
}

fn parse_event(line: &str) -> Event {
    Event::parse(line).unwrap()
}

fn batch_lines(events: &[Event]) -> Vec<String> {
    let mut text = String::new();
    write_batch_lines(events, true, &mut text);
    if events.is_empty() {
        assert!(text.is_empty());
        return Vec::new();
    }
    text.split('\n').map(str::to_owned).collect()
}

fn decode_lines(lines: &[String]) -> Vec<Event> {
    let mut out = Vec::new();
    for line in lines {
        match decode_storage_record(Value::parse(line).unwrap()).unwrap() {
            Decoded::Passthrough(v) => out.push(Event::from_value(&v).unwrap()),
            Decoded::Expanded(members) => out.extend(members),
        }
    }
    out
}

/// Packs, serializes, parses and decodes `events`; asserts the result is identical, byte for
/// byte, and returns the written lines.
fn assert_round_trip(events: &[Event]) -> Vec<String> {
    let lines = batch_lines(events);
    let back = decode_lines(&lines);
    assert_eq!(back.len(), events.len(), "{lines:?}");
    for (a, b) in back.iter().zip(events) {
        assert_eq!(a, b);
        assert_eq!(a.to_json(), b.to_json());
    }
    lines
}

fn verbatim(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

fn decode_err(row: &str) -> String {
    decode_storage_record(Value::parse(row).unwrap())
        .unwrap_err()
        .to_string()
}

#[test]
fn row_tags() {
    for tag in ROW_TAGS {
        assert!(is_row_tag(tag));
        assert_eq!(RowTag::from_name(tag).unwrap().as_str(), tag);
    }
    assert!(!is_row_tag("assistant/chunk"));
    assert!(!is_row_tag("text-chunk"));
    assert_eq!(MIN_RUN, 3);
}

// session-core §8.11 #184
#[test]
fn five_text_deltas_become_one_row() {
    let events: Vec<Event> = (0..5)
        .map(|k| text(k, 1000 + 10 * k as i64, &format!("t{k}")))
        .collect();
    let records = pack_chunk_runs(&events);
    assert_eq!(records.len(), 1);
    let StorageRecord::Row(row) = &records[0] else {
        panic!("expected a row");
    };
    assert_eq!(row.tag(), RowTag::TextChunks);
    assert_eq!((row.seq0(), row.time0(), row.member_count()), (0, 1000, 5));
    assert_eq!(row.last_seq(), 4);
    let lines = assert_round_trip(&events);
    assert_eq!(
        lines,
        [
            r#"{"type":"text-chunks","seq0":0,"time0":1000,"data":{"turn":1,"step":1,"index":0,"dt":[10,10,10,10],"texts":["t0","t1","t2","t3","t4"]}}"#
        ]
    );
    assert_eq!(row.to_value().to_json(), lines[0]);
    assert_eq!(records[0].event_count(), 5);
    assert_eq!(records[0].first_seq(), 0);
}

// session-core §8.11 #185
#[test]
fn reasoning_and_tool_runs_get_their_own_tags() {
    let mut events = Vec::new();
    for k in 0..3 {
        events.push(chunk_event(
            k,
            5,
            2,
            3,
            text_chunk("reasoning-delta", 0, &format!("r{k}")),
        ));
    }
    for k in 3..6 {
        events.push(chunk_event(
            k,
            7,
            2,
            3,
            tool_chunk(1, "call_1", Some("bash"), &format!("a{k}")),
        ));
    }
    let lines = assert_round_trip(&events);
    assert_eq!(
        lines,
        [
            r#"{"type":"reasoning-chunks","seq0":0,"time0":5,"data":{"turn":2,"step":3,"index":0,"dt":[0,0],"texts":["r0","r1","r2"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":3,"time0":7,"data":{"turn":2,"step":3,"index":1,"dt":[0,0],"id":"call_1","name":"bash","args":["a3","a4","a5"]}}"#,
        ]
    );
    assert_eq!(
        decode_lines(&lines[1..])[0].to_json(),
        r#"{"type":"assistant/chunk","seq":3,"time":7,"data":{"turn":2,"step":3,"chunk":{"type":"tool-call-delta","index":1,"id":"call_1","name":"bash","argumentsDelta":"a3"}}}"#
    );
}

// session-core §8.11 #186
#[test]
fn tool_run_without_name_has_no_name_key() {
    let events: Vec<Event> = (0..3)
        .map(|k| chunk_event(k, 0, 1, 1, tool_chunk(0, "c", None, "x")))
        .collect();
    let lines = assert_round_trip(&events);
    assert_eq!(
        lines,
        [
            r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"id":"c","args":["x","x","x"]}}"#
        ]
    );
    for e in decode_lines(&lines) {
        let chunk = e.data().get("chunk").unwrap().as_object().unwrap();
        assert!(!chunk.contains_key("name"));
        assert_eq!(
            chunk.keys().collect::<Vec<_>>(),
            ["type", "index", "id", "argumentsDelta"]
        );
    }
}

// session-core §8.11 #187
#[test]
fn run_of_two_is_written_unchanged() {
    let events = [text(0, 0, "a"), text(1, 0, "b")];
    assert_eq!(assert_round_trip(&events), verbatim(&events));
    assert_eq!(assert_round_trip(&events[..1]), verbatim(&events[..1]));
    assert!(assert_round_trip(&[]).is_empty());
}

// session-core §8.11 #188
#[test]
fn block_boundaries_and_step_end_stay_around_a_row() {
    let start = chunk_event(
        0,
        0,
        1,
        1,
        Value::parse(r#"{"type":"block-start","index":0,"blockType":"text"}"#).unwrap(),
    );
    let end = chunk_event(
        4,
        0,
        1,
        1,
        Value::parse(r#"{"type":"block-end","index":0}"#).unwrap(),
    );
    let step_end =
        parse_event(r#"{"type":"step/end","seq":5,"time":0,"data":{"turn":1,"step":1}}"#);
    let events = [
        start.clone(),
        text(1, 0, "a"),
        text(2, 0, "b"),
        text(3, 0, "c"),
        end.clone(),
        step_end.clone(),
    ];
    let lines = assert_round_trip(&events);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0], start.to_json());
    assert!(lines[1].starts_with(r#"{"type":"text-chunks","seq0":1,"#));
    assert_eq!(lines[2], end.to_json());
    assert_eq!(lines[3], step_end.to_json());
}

// session-core §8.11 #189
#[test]
fn breaks_split_runs_into_unchanged_pieces() {
    let t =
        |seq, step, index, kind: &str| chunk_event(seq, 0, 1, step, text_chunk(kind, index, "x"));
    let cases: [(&str, Vec<Event>); 4] = [
        (
            "seq gap",
            vec![
                t(0, 1, 0, "text-delta"),
                t(1, 1, 0, "text-delta"),
                t(3, 1, 0, "text-delta"),
                t(4, 1, 0, "text-delta"),
            ],
        ),
        (
            "kind switch",
            vec![
                t(0, 1, 0, "text-delta"),
                t(1, 1, 0, "text-delta"),
                t(2, 1, 0, "reasoning-delta"),
                t(3, 1, 0, "reasoning-delta"),
            ],
        ),
        (
            "block-index switch",
            vec![
                t(0, 1, 0, "text-delta"),
                t(1, 1, 0, "text-delta"),
                t(2, 1, 1, "text-delta"),
                t(3, 1, 1, "text-delta"),
            ],
        ),
        (
            "step switch",
            vec![
                t(0, 1, 0, "text-delta"),
                t(1, 1, 0, "text-delta"),
                t(2, 2, 0, "text-delta"),
                t(3, 2, 0, "text-delta"),
            ],
        ),
    ];
    for (name, events) in &cases {
        assert_eq!(&assert_round_trip(events), &verbatim(events), "{name}");
    }
    // A turn switch breaks the run too.
    let events = [
        chunk_event(0, 0, 1, 1, text_chunk("text-delta", 0, "x")),
        chunk_event(1, 0, 1, 1, text_chunk("text-delta", 0, "x")),
        chunk_event(2, 0, 2, 1, text_chunk("text-delta", 0, "x")),
    ];
    assert_eq!(assert_round_trip(&events), verbatim(&events));
    // Control: with three on each side of the break, each side packs.
    let events: Vec<Event> = (0..6)
        .map(|k| t(k, 1, u32::from(k >= 3), "text-delta"))
        .collect();
    let lines = assert_round_trip(&events);
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(r#"{"type":"text-chunks""#))
    );
}

// session-core §8.11 #190
#[test]
fn tool_call_id_or_name_presence_change_breaks_the_run() {
    let c =
        |seq, id: &str, name: Option<&str>| chunk_event(seq, 0, 1, 1, tool_chunk(0, id, name, "{"));
    for events in [
        vec![
            c(0, "a", None),
            c(1, "a", None),
            c(2, "b", None),
            c(3, "b", None),
        ],
        vec![
            c(0, "a", Some("n")),
            c(1, "a", Some("n")),
            c(2, "a", None),
            c(3, "a", None),
        ],
        vec![
            c(0, "a", None),
            c(1, "a", None),
            c(2, "a", Some("n")),
            c(3, "a", Some("n")),
        ],
        vec![
            c(0, "a", Some("n")),
            c(1, "a", Some("n")),
            c(2, "a", Some("m")),
            c(3, "a", Some("m")),
        ],
    ] {
        assert_eq!(assert_round_trip(&events), verbatim(&events));
    }
}

fn with_envelope(
    e: &Event,
    surface_op: Option<&str>,
    sources: Option<&str>,
    ignorable: bool,
) -> Event {
    Event::from_parts(
        EventParts {
            ty: e.event_type_arc().clone(),
            seq: e.seq(),
            time: e.time(),
            data: e.data().clone(),
            surface_op: surface_op.map(|s| Value::parse(s).unwrap()),
            source_event_seqs: sources.map(|s| Value::parse(s).unwrap()),
            ignorable,
        },
        KeyOrder::APPEND,
    )
}

// session-core §8.11 #191
#[test]
fn extra_envelope_key_non_string_text_or_unsafe_time_is_unpackable() {
    let base: Vec<Event> = (0..3).map(|k| text(k, 0, "x")).collect();
    assert!(base.iter().all(is_packable));
    // An extra envelope key (each of the three optional ones), on the middle event.
    for variant in [
        with_envelope(&base[1], Some(r#""append""#), None, false),
        with_envelope(&base[1], None, Some("[0]"), false),
        with_envelope(&base[1], None, None, true),
    ] {
        assert!(!is_packable(&variant));
        let events = [base[0].clone(), variant, base[2].clone()];
        assert_eq!(assert_round_trip(&events), verbatim(&events));
    }
    // A non-string text.
    let events: Vec<Event> = (0..3)
        .map(|k| {
            let chunk = Value::parse(r#"{"type":"text-delta","index":0,"text":5}"#).unwrap();
            chunk_event(k, 0, 1, 1, chunk)
        })
        .collect();
    assert!(!is_packable(&events[0]));
    assert_eq!(assert_round_trip(&events), verbatim(&events));
    // A fractional time cannot even form an event...
    assert!(
        Event::parse(
            r#"{"type":"assistant/chunk","seq":0,"time":1.5,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}}"#
        )
        .is_err()
    );
    // ...and an event built with a time or seq outside the safe range is never packed.
    let unsafe_time = |seq: u64| {
        Event::from_parts(
            EventParts {
                ty: CHUNK_EVENT_TYPE.into(),
                seq,
                time: MAX + 1,
                data: base[0].data().clone(),
                surface_op: None,
                source_event_seqs: None,
                ignorable: false,
            },
            KeyOrder::APPEND,
        )
    };
    assert!(!is_packable(&unsafe_time(0)));
    let events: Vec<Event> = (0..3).map(unsafe_time).collect();
    assert_eq!(
        pack_chunk_runs(&events)
            .iter()
            .filter(|r| matches!(r, StorageRecord::Row(_)))
            .count(),
        0
    );
    let unsafe_seq = Event::from_parts(
        EventParts {
            ty: CHUNK_EVENT_TYPE.into(),
            seq: MAX as u64 + 1,
            time: 0,
            data: base[0].data().clone(),
            surface_op: None,
            source_event_seqs: None,
            ignorable: false,
        },
        KeyOrder::APPEND,
    );
    assert!(!is_packable(&unsafe_seq));
}

// session-core §8.11 #192
#[test]
fn unsafe_time_gap_breaks_the_run() {
    let events = [
        text(0, -MAX, "a"),
        text(1, -MAX + 1, "b"),
        text(2, -MAX + 2, "c"),
        text(3, MAX - 2, "d"),
        text(4, MAX - 1, "e"),
        text(5, MAX, "f"),
    ];
    let lines = assert_round_trip(&events);
    assert_eq!(
        lines,
        [
            r#"{"type":"text-chunks","seq0":0,"time0":-9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#,
            r#"{"type":"text-chunks","seq0":3,"time0":9007199254740989,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["d","e","f"]}}"#,
        ]
    );
    // A gap of exactly 2^53 - 1 is still safe; one more is not.
    let events = [text(0, 0, "a"), text(1, MAX, "b"), text(2, 0, "c")];
    assert_eq!(assert_round_trip(&events).len(), 1);
    let events = [text(0, -1, "a"), text(1, MAX, "b"), text(2, MAX, "c")];
    assert_eq!(assert_round_trip(&events), verbatim(&events));
}

// session-core §8.11 #193
#[test]
fn unaccepted_data_shapes_are_written_unchanged() {
    let shapes = [
        r#""data""#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"},"extra":1}"#,
        r#"{"turn":"1","step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#,
        r#"{"turn":1,"step":"1","chunk":{"type":"text-delta","index":0,"text":"x"}}"#,
        r#"{"turn":1,"step":1,"chunk":"text-delta"}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":"0","text":"x"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x","extra":1}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":7,"argumentsDelta":"x"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c","name":7,"argumentsDelta":"x"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c","argumentsDelta":1}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"argumentsDelta":"x"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"usage","index":0,"text":"x"}}"#,
        r#"{"turn":1,"step":1}"#,
        "null",
        "[1]",
    ];
    for shape in shapes {
        let events: Vec<Event> = (0..3)
            .map(|k| {
                parse_event(&format!(
                    r#"{{"type":"assistant/chunk","seq":{k},"time":0,"data":{shape}}}"#
                ))
            })
            .collect();
        assert!(!is_packable(&events[0]), "{shape}");
        assert_eq!(assert_round_trip(&events), verbatim(&events), "{shape}");
    }
    // Another event type with a delta-shaped payload is not packed either.
    let events: Vec<Event> = (0..3)
        .map(|k| {
            parse_event(&format!(
                r#"{{"type":"assistant/chunks","seq":{k},"time":0,"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"x"}}}}}}"#
            ))
        })
        .collect();
    assert_eq!(assert_round_trip(&events), verbatim(&events));
}

// session-core §8.11 #194
#[test]
fn decode_passes_non_rows_through() {
    let event =
        Value::parse(r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#).unwrap();
    for v in [
        event,
        Value::from("junk"),
        Value::Null,
        Value::parse("[1,2]").unwrap(),
        Value::parse(r#"{"type":5,"seq0":"x"}"#).unwrap(),
        Value::parse(r#"{"type":"text-chunk","seq0":"x"}"#).unwrap(),
    ] {
        match decode_storage_record(v.clone()).unwrap() {
            Decoded::Passthrough(back) => {
                assert_eq!(back, v);
                assert!(back.ptr_eq(&v) || !matches!(v, Value::Object(_) | Value::Array(_)));
            }
            Decoded::Expanded(_) => panic!("expanded {v}"),
        }
        assert!(PackedRow::from_value(&v).unwrap().is_none());
    }
}

// session-core §8.11 #195
#[test]
fn negative_gaps_round_trip() {
    let events = [
        text(0, 1000, "a"),
        text(1, 990, "b"),
        text(2, 995, "c"),
        text(3, 900, "d"),
    ];
    let lines = assert_round_trip(&events);
    assert_eq!(
        lines,
        [
            r#"{"type":"text-chunks","seq0":0,"time0":1000,"data":{"turn":1,"step":1,"index":0,"dt":[-10,5,-95],"texts":["a","b","c","d"]}}"#
        ]
    );
}

const TEXT_ROW: &str = r#"{"type":"text-chunks","seq0":4,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#;
const TOOL_ROW: &str = r#"{"type":"tool-call-chunks","seq0":4,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[1,2],"id":"c","name":"n","args":["a","b","c"]}}"#;

// session-core §8.11 #196
#[test]
fn malformed_rows_are_refused_with_exact_messages() {
    let cases: [(String, &str); 30] = [
        (
            TEXT_ROW.replace(
                r#""data":{"turn":1,"step":2,"index":0,"dt":[1,2],"texts":["a","b","c"]}"#,
                r#""data":"x""#,
            ),
            "malformed text-chunks storage row: data must be an object",
        ),
        (
            TEXT_ROW.replace(
                r#""data":{"turn":1,"step":2,"index":0,"dt":[1,2],"texts":["a","b","c"]}"#,
                r#""data":null"#,
            ),
            "malformed text-chunks storage row: data must be an object",
        ),
        (
            TEXT_ROW.replace(
                r#""data":{"turn":1,"step":2,"index":0,"dt":[1,2],"texts":["a","b","c"]}"#,
                r#""data":[]"#,
            ),
            "malformed text-chunks storage row: data must be exactly {turn, step, index, dt, texts}",
        ),
        (
            TEXT_ROW.replace(r#""seq0":4,"#, r#""seq0":4,"extra":1,"#),
            "malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}",
        ),
        (
            TEXT_ROW.replace(r#""seq0":4,"#, ""),
            "malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}",
        ),
        (
            TEXT_ROW.replace(r#""seq0":4"#, r#""seq0":-1"#),
            "malformed text-chunks storage row: seq0 must be a non-negative safe integer",
        ),
        (
            TEXT_ROW.replace(r#""seq0":4"#, r#""seq0":9007199254740992"#),
            "malformed text-chunks storage row: seq0 must be a non-negative safe integer",
        ),
        (
            TEXT_ROW.replace(r#""time0":100"#, r#""time0":1e400"#),
            "malformed text-chunks storage row: time0 must be a safe integer",
        ),
        (
            TEXT_ROW.replace(r#""time0":100"#, r#""time0":1.5"#),
            "malformed text-chunks storage row: time0 must be a safe integer",
        ),
        (
            TEXT_ROW.replace(r#""time0":100"#, r#""time0":"100""#),
            "malformed text-chunks storage row: time0 must be a safe integer",
        ),
        (
            TEXT_ROW.replace(r#""texts""#, r#""args""#),
            "malformed text-chunks storage row: data must be exactly {turn, step, index, dt, texts}",
        ),
        (
            TOOL_ROW.replace(r#""args""#, r#""texts""#),
            "malformed tool-call-chunks storage row: data must be exactly {turn, step, index, id, name?, dt, args}",
        ),
        (
            TEXT_ROW.replace(r#"["a","b","c"]"#, r#"["a",2,"c"]"#),
            "malformed text-chunks storage row: texts must be a non-empty string array",
        ),
        (
            TOOL_ROW.replace(r#"["a","b","c"]"#, r#"["a","b",null]"#),
            "malformed tool-call-chunks storage row: args must be a non-empty string array",
        ),
        (
            TEXT_ROW.replace(
                r#""dt":[1,2],"texts":["a","b","c"]"#,
                r#""dt":[],"texts":[]"#,
            ),
            "malformed text-chunks storage row: texts must be a non-empty string array",
        ),
        (
            TEXT_ROW.replace(r#""texts":["a","b","c"]"#, r#""texts":"abc""#),
            "malformed text-chunks storage row: texts must be a non-empty string array",
        ),
        (
            TEXT_ROW.replace(r#""dt":[1,2]"#, r#""dt":[1]"#),
            "malformed text-chunks storage row: dt length 1 does not match 3 members",
        ),
        (
            TOOL_ROW.replace(r#""dt":[1,2]"#, r#""dt":[1,2,3]"#),
            "malformed tool-call-chunks storage row: dt length 3 does not match 3 members",
        ),
        (
            TEXT_ROW.replace(r#""dt":[1,2]"#, r#""dt":[1,0.5]"#),
            "malformed text-chunks storage row: dt must be an array of safe integers",
        ),
        (
            TEXT_ROW.replace(r#""dt":[1,2]"#, r#""dt":[1e400,2]"#),
            "malformed text-chunks storage row: dt must be an array of safe integers",
        ),
        (
            TEXT_ROW.replace(r#""dt":[1,2]"#, r#""dt":[1,9007199254740992]"#),
            "malformed text-chunks storage row: dt must be an array of safe integers",
        ),
        (
            TEXT_ROW.replace(r#""dt":[1,2]"#, r#""dt":"12""#),
            "malformed text-chunks storage row: dt must be an array of safe integers",
        ),
        (
            TEXT_ROW.replace(r#""seq0":4"#, r#""seq0":9007199254740990"#),
            "malformed text-chunks storage row: member seqs must stay safe integers",
        ),
        (
            TEXT_ROW.replace(r#""time0":100"#, r#""time0":9007199254740989"#),
            "malformed text-chunks storage row: member times must stay safe integers",
        ),
        (
            TEXT_ROW
                .replace(r#""time0":100,"#, r#""time0":-9007199254740991,"#)
                .replace(r#""dt":[1,2]"#, r#""dt":[-1,2]"#),
            "malformed text-chunks storage row: member times must stay safe integers",
        ),
        (
            TEXT_ROW.replace(r#""turn":1"#, r#""turn":"1""#),
            "malformed text-chunks storage row: turn/step/index must be numbers",
        ),
        (
            TOOL_ROW.replace(r#""index":0"#, r#""index":null"#),
            "malformed tool-call-chunks storage row: turn/step/index must be numbers",
        ),
        (
            TOOL_ROW.replace(r#""id":"c","#, ""),
            "malformed tool-call-chunks storage row: data must be exactly {turn, step, index, id, name?, dt, args}",
        ),
        (
            TOOL_ROW.replace(r#""id":"c""#, r#""id":7"#),
            "malformed tool-call-chunks storage row: id (and name when present) must be strings",
        ),
        (
            TOOL_ROW.replace(r#""name":"n""#, r#""name":null"#),
            "malformed tool-call-chunks storage row: id (and name when present) must be strings",
        ),
    ];
    for (row, message) in &cases {
        assert_ne!(row, TEXT_ROW);
        assert_ne!(row, TOOL_ROW);
        assert_eq!(&decode_err(row), message, "{row}");
    }
    // The unmodified rows decode.
    for row in [TEXT_ROW, TOOL_ROW] {
        let Decoded::Expanded(members) = decode_storage_record(Value::parse(row).unwrap()).unwrap()
        else {
            panic!("not expanded");
        };
        let seqs: Vec<u64> = members.iter().map(Event::seq).collect();
        let times: Vec<i64> = members.iter().map(Event::time).collect();
        assert_eq!(seqs, [4, 5, 6]);
        assert_eq!(times, [100, 101, 103]);
    }
    // The errors are the typed variants.
    assert_eq!(
        decode_storage_record(
            Value::parse(&TEXT_ROW.replace(r#""turn":1"#, r#""turn":"1""#)).unwrap()
        )
        .unwrap_err(),
        Error::MalformedRow {
            tag: "text-chunks".to_owned(),
            why: "turn/step/index must be numbers",
        }
    );
    assert_eq!(
        decode_storage_record(
            Value::parse(&TEXT_ROW.replace(r#""dt":[1,2]"#, r#""dt":[]"#)).unwrap()
        )
        .unwrap_err(),
        Error::MalformedRowArity {
            tag: "text-chunks".to_owned(),
            dt_len: 0,
            members: 3,
        }
    );
}

#[test]
fn validation_runs_in_order() {
    // Each row has two problems; the earlier check is reported.
    let cases = [
        (
            r#"{"type":"text-chunks","seq0":-1,"time0":1.5,"data":1,"x":1}"#,
            "envelope must be exactly {type, seq0, time0, data}",
        ),
        (
            r#"{"type":"text-chunks","seq0":-1,"time0":1.5,"data":1}"#,
            "seq0 must be a non-negative safe integer",
        ),
        (
            r#"{"type":"text-chunks","seq0":0,"time0":1.5,"data":1}"#,
            "time0 must be a safe integer",
        ),
        (
            r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":"x","step":1,"index":0,"id":1,"dt":[],"args":["a"]}}"#,
            "id (and name when present) must be strings",
        ),
        (
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":"x","step":1,"index":0,"dt":[0.5],"texts":[]}}"#,
            "turn/step/index must be numbers",
        ),
        (
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0.5],"texts":[]}}"#,
            "texts must be a non-empty string array",
        ),
        (
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0.5,1],"texts":["a"]}}"#,
            "dt must be an array of safe integers",
        ),
        (
            r#"{"type":"text-chunks","seq0":9007199254740991,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a"]}}"#,
            "dt length 2 does not match 1 members",
        ),
        (
            r#"{"type":"text-chunks","seq0":9007199254740991,"time0":9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]}}"#,
            "member seqs must stay safe integers",
        ),
    ];
    for (row, why) in cases {
        let tag = Value::parse(row)
            .unwrap()
            .get("type")
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            decode_err(row),
            format!("malformed {tag} storage row: {why}"),
            "{row}"
        );
    }
}

#[test]
fn decoding_accepts_any_key_order_and_numbers_as_written() {
    // Readers accept any key order; the turn/step/index values are kept exactly.
    let row = r#"{"data":{"texts":["a","b"],"dt":[-0],"index":1.5,"step":-0,"turn":1.0},"time0":-0,"seq0":0,"type":"reasoning-chunks"}"#;
    let v = Value::parse(row).unwrap();
    let packed = PackedRow::from_value(&v).unwrap().unwrap();
    assert_eq!(packed.tag(), RowTag::ReasoningChunks);
    // The row keeps its data as read.
    assert!(packed.data().ptr_eq(v.get("data").unwrap()));
    let members = packed.expand();
    assert_eq!(
        members[1].to_json(),
        r#"{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1.0,"step":-0,"chunk":{"type":"reasoning-delta","index":1.5,"text":"b"}}}"#
    );
    // Single-member rows decode (the minimum applies to the encoder only).
    let one = r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#;
    let Decoded::Expanded(members) = decode_storage_record(Value::parse(one).unwrap()).unwrap()
    else {
        panic!("not expanded");
    };
    assert_eq!(members.len(), 1);
}

#[test]
fn numbers_with_different_spellings_do_not_share_a_row() {
    let e = |seq: u64, turn: &str| {
        parse_event(&format!(
            r#"{{"type":"assistant/chunk","seq":{seq},"time":0,"data":{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"x"}}}}}}"#
        ))
    };
    let events = [e(0, "1"), e(1, "1.0"), e(2, "1"), e(3, "1")];
    let lines = assert_round_trip(&events);
    assert_eq!(lines.len(), 4);
    let events = [e(0, "1.0"), e(1, "1.0"), e(2, "1.0")];
    let lines = assert_round_trip(&events);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains(r#""turn":1.0"#));
}

#[test]
fn non_canonical_key_order_is_packed_like_the_reference() {
    // The reference tests keys as sets, so it packs such events; the expanded events use the
    // canonical order.
    let events: Vec<Event> = (0..3)
        .map(|k| {
            parse_event(&format!(
                r#"{{"seq":{k},"type":"assistant/chunk","data":{{"chunk":{{"text":"x","index":0,"type":"text-delta"}},"step":1,"turn":1}},"time":0}}"#
            ))
        })
        .collect();
    let lines = batch_lines(&events);
    assert_eq!(
        lines,
        [
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["x","x","x"]}}"#
        ]
    );
    let back = decode_lines(&lines);
    assert_eq!(back[0].to_json(), text(0, 0, "x").to_json());
}

#[test]
fn unpacked_batches_are_written_event_by_event() {
    let events: Vec<Event> = (0..4).map(|k| text(k, 0, "x")).collect();
    let mut out = String::new();
    write_batch_lines(&events, false, &mut out);
    assert_eq!(out, verbatim(&events).join("\n"));
}

// ---- bounded packing (persistence §4.4) ----

fn long_text(seq: u64, len: usize) -> Event {
    text(seq, 0, &"x".repeat(len))
}

fn shape(records: &[StorageRecord]) -> Vec<usize> {
    // 0 marks a scalar record; n > 0 a row of n members.
    records
        .iter()
        .map(|r| match r {
            StorageRecord::Event(_) => 0,
            StorageRecord::Row(row) => row.member_count(),
        })
        .collect()
}

#[test]
fn bounded_packing_examples() {
    let limited = |events: &[Event]| {
        pack_chunk_runs_limited(events, MAX_PACKED_ROW_MEMBERS, MAX_PACKED_DATA_BYTES)
    };
    let events: Vec<Event> = (0..1027).map(|k| text(k, 0, "t")).collect();
    assert_eq!(shape(&limited(&events)), [1024, 3]);
    let events: Vec<Event> = (0..1026).map(|k| text(k, 0, "t")).collect();
    assert_eq!(shape(&limited(&events)), [1024, 0, 0]);
    assert_eq!(shape(&pack_chunk_runs(&events)), [1026]);
    let events: Vec<Event> = (0..4).map(|k| long_text(k, 300_000)).collect();
    assert_eq!(shape(&limited(&events)), [3, 0]);
    let events: Vec<Event> = (0..3).map(|k| long_text(k, 400_000)).collect();
    assert_eq!(shape(&limited(&events)), [0, 0, 0]);
    // The largest fitting prefix wins, then partitioning continues after it.
    let events: Vec<Event> = (0..7).map(|k| long_text(k, 300_000)).collect();
    assert_eq!(shape(&limited(&events)), [3, 3, 0]);
    // A max below the minimum counts as the minimum.
    let events: Vec<Event> = (0..7).map(|k| text(k, 0, "t")).collect();
    assert_eq!(shape(&pack_chunk_runs_limited(&events, 1, 1000)), [3, 3, 0]);
    assert_eq!(shape(&pack_chunk_runs_limited(&events, 5, 1000)), [5, 0, 0]);
}

#[test]
fn bounded_packing_byte_limit_is_inclusive() {
    let events: Vec<Event> = (0..5).map(|k| text(k, k as i64 * 7, "ab\"c")).collect();
    let full = build_row(&events.iter().filter_map(classify).collect::<Vec<_>>());
    let bytes = full.data().to_json().len();
    assert_eq!(shape(&pack_chunk_runs_limited(&events, 1024, bytes)), [5]);
    assert_eq!(
        shape(&pack_chunk_runs_limited(&events, 1024, bytes - 1)),
        [4, 0]
    );
}

fn run_sizes_match(events: &[Event]) {
    let run: Vec<Delta<'_>> = events.iter().filter_map(classify).collect();
    assert_eq!(run.len(), events.len());
    let sizes = RunSizes::new(&run);
    for offset in 0..run.len() {
        for k in 1..=run.len() - offset {
            let row = build_row(&run[offset..offset + k]);
            assert_eq!(
                sizes.size(offset, k),
                row.data().to_json().len(),
                "{offset} {k}"
            );
        }
    }
}

#[test]
fn run_sizes_are_exact() {
    let texts = [
        "",
        "a",
        "\"\\\n\r\t\u{8}\u{c}",
        "\u{1}\u{1f}",
        "é漢🦀",
        "\u{7f}/",
    ];
    let events: Vec<Event> = texts
        .iter()
        .enumerate()
        .map(|(k, t)| text(k as u64, [0, -5, 1_000_000, MAX, -MAX, 3][k] / 2, t))
        .collect();
    run_sizes_match(&events);
    let events: Vec<Event> = texts
        .iter()
        .enumerate()
        .map(|(k, t)| {
            chunk_event(
                k as u64,
                -(k as i64) * 13,
                12,
                345,
                tool_chunk(7, "id\"1", Some("n\u{2028}"), t),
            )
        })
        .collect();
    run_sizes_match(&events);
    assert_eq!(int_len(0), 1);
    assert_eq!(int_len(-9), 2);
    assert_eq!(int_len(MAX), 16);
    assert_eq!(int_len(-MAX), 17);
}

// ---- property tests ----

#[derive(Debug, Clone)]
enum Spec {
    Text {
        kind: u8,
        turn: u8,
        step: u8,
        index: u8,
        text: String,
    },
    Tool {
        index: u8,
        id: u8,
        name: Option<u8>,
        args: String,
    },
    Other {
        shape: u8,
    },
}

#[derive(Debug, Clone)]
enum TimeSpec {
    Near(i64),
    Anywhere(i64),
    /// Close to one end of the safe range, so that consecutive edges can be an unsafe gap.
    Edge(bool, i64),
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        6 => (0u8..2, 1u8..3, 1u8..3, 0u8..2, "(?s).{0,6}").prop_map(|(kind, turn, step, index, text)| Spec::Text { kind, turn, step, index, text }),
        3 => (0u8..2, 0u8..2, proptest::option::of(0u8..2), "(?s).{0,6}").prop_map(|(index, id, name, args)| Spec::Tool { index, id, name, args }),
        1 => (0u8..6).prop_map(|shape| Spec::Other { shape }),
    ]
}

fn time_spec() -> impl Strategy<Value = TimeSpec> {
    prop_oneof![
        8 => (-50i64..50).prop_map(TimeSpec::Near),
        1 => (-MAX..=MAX).prop_map(TimeSpec::Anywhere),
        2 => (proptest::bool::ANY, 0i64..3).prop_map(|(high, off)| TimeSpec::Edge(high, off)),
    ]
}

fn build_batch(first_seq: u64, items: &[(Spec, TimeSpec, bool)]) -> Vec<Event> {
    let mut seq = first_seq;
    let mut time: i64 = 0;
    let mut out = Vec::new();
    for (spec, t, gap) in items {
        if *gap {
            seq += 2;
        }
        time = match t {
            TimeSpec::Near(d) => (time + d).clamp(-MAX, MAX),
            TimeSpec::Anywhere(v) => *v,
            TimeSpec::Edge(high, off) => {
                if *high {
                    MAX - off
                } else {
                    off - MAX
                }
            }
        };
        let event = match spec {
            Spec::Text {
                kind,
                turn,
                step,
                index,
                text,
            } => {
                let kind = if *kind == 0 {
                    "text-delta"
                } else {
                    "reasoning-delta"
                };
                chunk_event(
                    seq,
                    time,
                    (*turn).into(),
                    (*step).into(),
                    text_chunk(kind, (*index).into(), text),
                )
            }
            Spec::Tool {
                index,
                id,
                name,
                args,
            } => {
                let id = format!("call_{id}");
                let name = name.map(|n| format!("tool{n}"));
                chunk_event(
                    seq,
                    time,
                    1,
                    1,
                    tool_chunk((*index).into(), &id, name.as_deref(), args),
                )
            }
            Spec::Other { shape } => {
                let line = match shape {
                    0 => format!(
                        r#"{{"type":"step/end","seq":{seq},"time":{time},"data":{{"turn":1,"step":1}}}}"#
                    ),
                    1 => format!(
                        r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{{"type":"block-start","index":0}}}}}}"#
                    ),
                    2 => format!(
                        r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"x","x":1}}}}}}"#
                    ),
                    3 => format!(
                        r#"{{"type":"user/message","seq":{seq},"time":{time},"data":{{"id":"m","role":"user","content":[]}},"surfaceOp":"append"}}"#
                    ),
                    4 => format!(
                        r#"{{"type":"future/event","seq":{seq},"time":{time},"data":null,"ignorable":true}}"#
                    ),
                    _ => format!(
                        r#"{{"type":"step/start","seq":{seq},"time":{time},"data":{{"turn":1,"step":1}}}}"#
                    ),
                };
                parse_event(&line)
            }
        };
        out.push(event);
        seq += 1;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    // session-core §8.11 #197
    #[test]
    fn pack_serialize_decode_round_trips(
        first_seq in prop_oneof![0u64..10, (MAX as u64 - 1000)..(MAX as u64 - 200)],
        items in proptest::collection::vec((spec(), time_spec(), proptest::bool::weighted(0.05)), 0..40),
    ) {
        let events = build_batch(first_seq, &items);
        let lines = batch_lines(&events);
        let back = decode_lines(&lines);
        prop_assert_eq!(back.len(), events.len());
        for (a, b) in back.iter().zip(&events) {
            prop_assert_eq!(a.to_json(), b.to_json());
            prop_assert_eq!(a, b);
        }
        // Every row holds at least MIN_RUN members, and re-packing its expansion gives it back.
        for record in pack_chunk_runs(&events) {
            if let StorageRecord::Row(row) = record {
                prop_assert!(row.member_count() >= MIN_RUN);
                let again = pack_chunk_runs(&row.expand());
                prop_assert_eq!(again.len(), 1);
                prop_assert_eq!(again[0].to_json(), row.to_json());
            }
        }
    }

    #[test]
    fn bounded_packing_round_trips_within_limits(
        items in proptest::collection::vec((spec(), time_spec(), proptest::bool::weighted(0.02)), 0..40),
        max_members in 0usize..8,
        max_bytes in 40usize..400,
    ) {
        let events = build_batch(0, &items);
        let records = pack_chunk_runs_limited(&events, max_members, max_bytes);
        let mut back = Vec::new();
        for record in &records {
            match decode_storage_record(Value::parse(&record.to_json()).unwrap()).unwrap() {
                Decoded::Passthrough(v) => back.push(Event::from_value(&v).unwrap()),
                Decoded::Expanded(members) => {
                    let StorageRecord::Row(row) = record else {
                        return Err(TestCaseError::fail("an event record expanded"));
                    };
                    prop_assert!(row.member_count() >= MIN_RUN);
                    prop_assert!(row.member_count() <= max_members.max(MIN_RUN));
                    prop_assert!(row.data().to_json().len() <= max_bytes);
                    back.extend(members);
                }
            }
        }
        prop_assert_eq!(back.len(), events.len());
        for (a, b) in back.iter().zip(&events) {
            prop_assert_eq!(a.to_json(), b.to_json());
        }
        // With generous limits, bounded packing equals unbounded packing.
        let unbounded: Vec<String> = pack_chunk_runs(&events).iter().map(StorageRecord::to_json).collect();
        let generous: Vec<String> = pack_chunk_runs_limited(&events, usize::MAX, usize::MAX)
            .iter()
            .map(StorageRecord::to_json)
            .collect();
        prop_assert_eq!(unbounded, generous);
    }
}
