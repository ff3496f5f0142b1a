//! The reference's `compression.spec.ts` (persistence §7.11) and
//! `compression-unprofitable.spec.ts` (§7.12) cases: the physical row codec.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use crate::common::*;
use session_core::chunk_rows::MAX_PACKED_DATA_BYTES;
use session_core::json::{MAX_SAFE_INTEGER, Value};
use session_core::{Event, EventParts, KeyOrder};
use session_persist::Backend;
use session_persist_sqlite::codec::{
    Decoded, bind_event, decode_data, decode_row, decode_serialized_chunk_row,
    decode_source_event_seqs, decode_storage_record, encode_data, encode_data_with,
    encode_source_event_seqs, pack_batch, scan_rows,
};
use session_persist_sqlite::schema::{EventRow, RowData};

fn round_trip(events: &[Event]) -> Vec<EventRow> {
    let rows = pack_batch(events).unwrap();
    let decoded: Vec<Event> = rows.iter().flat_map(|r| decode_row(r).unwrap()).collect();
    assert_eq!(decoded, events);
    rows
}

fn kinds(rows: &[EventRow]) -> Vec<(&str, Option<i64>)> {
    rows.iter().map(|r| (r.ty.as_str(), r.ignorable)).collect()
}

fn long_text(seq: u64, bytes: usize) -> Event {
    text(seq, 1_000 + seq as i64, 0, &"x".repeat(bytes))
}

fn data_len(row: &EventRow) -> usize {
    decode_data(&row.data, usize::MAX).unwrap().len()
}

// persistence §7.11 #1: a 100-member run becomes one text-chunks row and round-trips.
#[test]
fn hundred_member_run_is_one_row() {
    let events: Vec<Event> = (0..100).map(|i| text(i, 50 + i as i64, 0, "y")).collect();
    let rows = round_trip(&events);
    assert_eq!(kinds(&rows), [("text-chunks", Some(0))]);
    assert_eq!(rows[0].seq, 0);
    assert_eq!(rows[0].time, 50);
    assert!(rows[0].source_event_seqs.is_none() && rows[0].surface_op.is_none());
}

// persistence §7.11 #2: partitioning by member count and by data size.
#[test]
fn runs_are_partitioned_by_count_and_size() {
    let events: Vec<Event> = (0..1027).map(|i| text(i, 1, 0, "z")).collect();
    let rows = round_trip(&events);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].seq, rows[1].seq), (0, 1024));

    let events: Vec<Event> = (0..4).map(|i| long_text(i, 300_000)).collect();
    let rows = round_trip(&events);
    assert_eq!(
        kinds(&rows),
        [("text-chunks", Some(0)), ("assistant/chunk", None)]
    );
    assert!(rows.iter().all(|r| data_len(r) <= MAX_PACKED_DATA_BYTES));

    let events: Vec<Event> = (0..3).map(|i| long_text(i, 400_000)).collect();
    let rows = round_trip(&events);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.ignorable.is_none()));

    let events: Vec<Event> = (0..10).map(|i| long_text(i, 150_000)).collect();
    let rows = round_trip(&events);
    assert!(rows.len() > 1);
    assert!(rows.iter().all(|r| data_len(r) <= MAX_PACKED_DATA_BYTES));
}

// persistence §7.11 #3: every kind packs and the optional tool-call name is kept.
#[test]
fn all_kinds_pack() {
    let mut events: Vec<Event> = (0..3).map(|i| reasoning(i, 5, 1, "r")).collect();
    events.extend((3..6).map(|i| tool(i, 5, 2, "call-1", Some("bash"), "{")));
    events.extend((6..9).map(|i| tool(i, 5, 3, "call-2", None, "}")));
    let rows = round_trip(&events);
    assert_eq!(
        kinds(&rows),
        [
            ("reasoning-chunks", Some(0)),
            ("tool-call-chunks", Some(0)),
            ("tool-call-chunks", Some(0)),
        ]
    );
    let named = decode_data(&rows[1].data, usize::MAX).unwrap().into_owned();
    assert_eq!(
        named,
        r#"{"turn":1,"step":1,"index":2,"dt":[0,0],"id":"call-1","name":"bash","args":["{","{","{"]}"#
    );
    assert!(
        !decode_data(&rows[2].data, usize::MAX)
            .unwrap()
            .contains("name")
    );
}

fn chunk_with(seq: u64, time: i64, data: &str) -> Event {
    ev("assistant/chunk", seq, time, data)
}

// persistence §7.11 #4: off-format deltas stay scalar, and incompatible runs split.
// (A negative seq or a fractional time cannot be represented by an `Event` at all.)
#[test]
fn off_format_deltas_stay_scalar_and_runs_split() {
    let ok = r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#;
    let off_format = [
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a","extra":1}}"#,
        r#"{"turn":"1","step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":5}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":7,"argumentsDelta":"x"}}"#,
        r#"{"turn":1,"step":1,"chunk":{"type":"usage","index":0,"text":"a"}}"#,
        r#"{"turn":1,"step":1,"extra":true,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#,
    ];
    for bad in off_format {
        let events = [
            chunk_with(0, 1, ok),
            chunk_with(1, 1, bad),
            chunk_with(2, 1, ok),
            chunk_with(3, 1, ok),
        ];
        let rows = round_trip(&events);
        assert!(rows.iter().all(|r| r.ignorable.is_none()), "{bad}");
    }
    let mut extra_key = text(0, 1, 0, "a");
    extra_key = Event::from_parts(
        EventParts {
            ty: extra_key.event_type_arc().clone(),
            seq: 0,
            time: 1,
            data: extra_key.data().clone(),
            surface_op: Some(Value::from("append")),
            source_event_seqs: None,
            ignorable: false,
        },
        KeyOrder::APPEND,
    );
    let rows = round_trip(&[extra_key, text(1, 1, 0, "b"), text(2, 1, 0, "c")]);
    assert!(rows.iter().all(|r| r.ignorable.is_none()));

    let max = MAX_SAFE_INTEGER;
    let splits: Vec<(&str, Vec<Event>)> = vec![
        (
            "gap",
            vec![
                text(0, 1, 0, "a"),
                text(1, 1, 0, "b"),
                text(3, 1, 0, "c"),
                text(4, 1, 0, "d"),
            ],
        ),
        (
            "step",
            vec![
                text(0, 1, 0, "a"),
                text(1, 1, 0, "b"),
                chunk_with(
                    2,
                    1,
                    r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"c"}}"#,
                ),
            ],
        ),
        (
            "block",
            vec![text(0, 1, 0, "a"), text(1, 1, 0, "b"), text(2, 1, 1, "c")],
        ),
        (
            "unsafe time difference",
            vec![
                text(0, -max, 0, "a"),
                text(1, max, 0, "b"),
                text(2, max, 0, "c"),
            ],
        ),
        (
            "mixed name",
            vec![
                tool(0, 1, 0, "c", Some("n"), "a"),
                tool(1, 1, 0, "c", None, "b"),
                tool(2, 1, 0, "c", Some("n"), "c"),
            ],
        ),
    ];
    for (label, events) in splits {
        let rows = round_trip(&events);
        assert!(rows.iter().all(|r| r.ignorable.is_none()), "{label}");
    }
}

fn record(text: &str) -> Value {
    Value::parse(text).unwrap()
}

// persistence §7.11 #5: malformed packed data is refused with `malformed <tag> storage row`
// (19 cases).
#[test]
fn malformed_packed_rows_are_refused() {
    let texts = |n: usize| {
        let members: Vec<String> = (0..n).map(|_| "\"a\"".to_owned()).collect();
        let dt: Vec<&str> = (1..n).map(|_| "0").collect();
        (members.join(","), dt.join(","))
    };
    let (m1025, d1025) = texts(1025);
    let big = "x".repeat(MAX_PACKED_DATA_BYTES);
    let cases: Vec<(String, &str)> = vec![
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"extra":1,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#.into(), "invalid envelope fields"),
        (r#"{"type":"text-chunks","seq0":-1,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#.into(), "seq0 must be non-negative"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0.5,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#.into(), "time0 must be a safe integer"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":7}"#.into(), "data must be an object"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"args":["a","b","c"]}}"#.into(), "invalid text data fields"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":"1","step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#.into(), "turn/step/index must be numbers"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":"abc"}}"#.into(), "texts must contain 3..1024 strings"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}"#.into(), "texts must contain 3..1024 strings"),
        (format!(r#"{{"type":"text-chunks","seq0":0,"time0":0,"data":{{"turn":1,"step":1,"index":0,"dt":[{d1025}],"texts":[{m1025}]}}}}"#), "texts must contain 3..1024 strings"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a",2,"c"]}}"#.into(), "texts must contain 3..1024 strings"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0.5],"texts":["a","b","c"]}}"#.into(), "dt must be an array of safe integers"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":{},"texts":["a","b","c"]}}"#.into(), "dt must be an array of safe integers"),
        (r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b","c"]}}"#.into(), "dt length must match the member count"),
        (format!(r#"{{"type":"text-chunks","seq0":0,"time0":0,"data":{{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","{big}"]}}}}"#), "data exceeds 1048576 UTF-8 bytes"),
        (r#"{"type":"text-chunks","seq0":9007199254740990,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#.into(), "member seqs exceed safe integers"),
        (r#"{"type":"reasoning-chunks","seq0":0,"time0":9007199254740990,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#.into(), "member times exceed safe integers"),
        (r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"args":["a","b","c"]}}"#.into(), "invalid tool-call data fields"),
        (r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"id":5,"dt":[0,0],"args":["a","b","c"]}}"#.into(), "id and optional name must be strings"),
        (r#"{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"id":"c","name":5,"dt":[0,0],"args":["a","b","c"]}}"#.into(), "id and optional name must be strings"),
    ];
    assert_eq!(cases.len(), 19);
    for (text, why) in cases {
        let value = record(&text);
        let tag = value.get("type").unwrap().as_str().unwrap().to_owned();
        let e = decode_storage_record(&value).unwrap_err().to_string();
        assert_eq!(e, format!("malformed {tag} storage row: {why}"));
    }
    // The physical decoder refuses the same data.
    let e = decode_serialized_chunk_row(
        "text-chunks",
        0,
        0,
        r#"{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}"#,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "malformed text-chunks storage row: texts must contain 3..1024 strings"
    );
}

// persistence §7.11 #6: a schema-17 row fixture decodes (dt [2, −1] gives 90, 92, 91); other
// records pass through.
#[test]
fn schema_17_fixture_decodes() {
    let fixture = record(
        r#"{"type":"text-chunks","seq0":4,"time0":90,"data":{"turn":2,"step":3,"index":1,"dt":[2,-1],"texts":["a","b","c"]}}"#,
    );
    let Decoded::Expanded(events) = decode_storage_record(&fixture).unwrap() else {
        panic!("not expanded");
    };
    let times: Vec<i64> = events.iter().map(Event::time).collect();
    assert_eq!(times, [90, 92, 91]);
    assert_eq!(
        events[2].to_json(),
        r#"{"type":"assistant/chunk","seq":6,"time":91,"data":{"turn":2,"step":3,"chunk":{"type":"text-delta","index":1,"text":"c"}}}"#
    );
    let scalar = record(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    assert!(
        matches!(decode_storage_record(&scalar).unwrap(), Decoded::Passthrough(v) if v == scalar)
    );
    assert!(matches!(
        decode_storage_record(&Value::from(3u8)).unwrap(),
        Decoded::Passthrough(_)
    ));
}

fn packed_row() -> EventRow {
    pack_batch(&[text(0, 1, 0, "a"), text(1, 1, 0, "b"), text(2, 1, 0, "c")])
        .unwrap()
        .remove(0)
}

// persistence §7.11 #7: a packed row with surface columns is refused.
#[test]
fn packed_rows_have_no_surface_columns() {
    let mut row = packed_row();
    row.surface_op = Some("\"append\"".into());
    assert_eq!(
        decode_row(&row).unwrap_err().to_string(),
        "malformed text-chunks storage row: packed surface fields must be null"
    );
    let mut row = packed_row();
    row.source_event_seqs = Some(vec![1]);
    assert_eq!(
        decode_row(&row).unwrap_err().to_string(),
        "malformed text-chunks storage row: packed surface fields must be null"
    );
}

// persistence §7.11 #8: a scalar type with the packed discriminator is refused.
#[test]
fn packed_discriminator_needs_a_tag() {
    let mut row = bind_event(&turn_start(0, 1)).unwrap();
    row.ignorable = Some(0);
    assert_eq!(
        decode_row(&row).unwrap_err().to_string(),
        "malformed turn/start storage row: packed discriminator requires a chunk tag"
    );
}

// persistence §7.11 #9, §7.12 differential #1: an ignorable logical event named after each tag
// stays a scalar row with ignorable = 1 (3 cases).
#[tokio::test]
async fn ignorable_tag_named_events_stay_scalar() {
    let backend = memory();
    let m = meta("s");
    let events: Vec<Event> = ["text-chunks", "reasoning-chunks", "tool-call-chunks"]
        .iter()
        .enumerate()
        .map(|(i, tag)| {
            with_ignorable(&ev(
                tag,
                i as u64,
                1,
                r#"{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}"#,
            ))
        })
        .collect();
    for e in &events {
        let row = bind_event(e).unwrap();
        assert_eq!(row.ignorable, Some(1));
        assert_eq!(decode_row(&row).unwrap(), std::slice::from_ref(e));
    }
    backend.append_batch(&m, &events, false).await.unwrap();
    let rows: Vec<(String, Option<i64>)> = backend
        .with_connection(|c| {
            let mut s = c
                .prepare("SELECT type, ignorable FROM events ORDER BY seq")
                .unwrap();
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.1 == Some(1)));
    assert_eq!(
        backend.load_stored("s").await.unwrap().unwrap().events,
        events
    );
}

// persistence §7.11 #10: large data is a BLOB, 2,000 source seqs make a varint blob smaller than
// their JSON, small data stays TEXT.
#[test]
fn large_values_are_compressed() {
    let large = ev(
        "tool/result",
        0,
        1,
        &format!(r#"{{"output":"{}"}}"#, "line\\n".repeat(2_000)),
    );
    let row = bind_event(&large).unwrap();
    assert!(matches!(row.data, RowData::Blob(_)));
    assert_eq!(decode_row(&row).unwrap(), [large]);
    let seqs: Vec<Value> = (0..2_000u64)
        .map(|i| session_core::event::seq_value(i * 3))
        .collect();
    let seqs = Value::array(seqs);
    let blob = encode_source_event_seqs(&seqs).unwrap();
    assert!(blob.len() < seqs.to_json().len());
    let small = turn_start(0, 1);
    assert!(matches!(bind_event(&small).unwrap().data, RowData::Text(_)));
    // The threshold: 4,095 bytes stay TEXT, 4,096 compressible bytes become a BLOB.
    assert!(matches!(
        encode_data("a".repeat(4_095)).unwrap(),
        RowData::Text(_)
    ));
    assert!(matches!(
        encode_data("a".repeat(4_096)).unwrap(),
        RowData::Blob(_)
    ));
}

// persistence §7.11 #11: empty, descending and maximum-safe provenance round-trips.
#[test]
fn provenance_round_trips() {
    let max = MAX_SAFE_INTEGER as u64;
    for seqs in [vec![], vec![9, 4, 0, 7], vec![max, 0, max], vec![0, max]] {
        let value = Value::array(seqs.iter().map(|&s| session_core::event::seq_value(s)));
        let blob = encode_source_event_seqs(&value).unwrap();
        assert_eq!(decode_source_event_seqs(&blob).unwrap(), seqs);
        let e = Event::appended(
            "assistant/message",
            5,
            1,
            Value::empty_object(),
            Some(value),
            Some(Value::from("append")),
        );
        let row = bind_event(&e).unwrap();
        assert_eq!(row.source_event_seqs.as_deref(), Some(&blob[..]));
        assert_eq!(row.surface_op.as_deref(), Some("\"append\""));
        assert_eq!(decode_row(&row).unwrap(), [e]);
    }
    // An empty array is an empty, non-NULL blob.
    assert_eq!(
        encode_source_event_seqs(&Value::array([])).unwrap(),
        Vec::<u8>::new()
    );
    assert_eq!(
        encode_source_event_seqs(&Value::parse("[1,0]").unwrap()).unwrap(),
        [1, 1]
    );
}

// persistence §7.11 #12: provenance −1 or 0.5 is refused (2 cases).
#[test]
fn provenance_must_be_non_negative_safe_integers() {
    for bad in ["[-1]", "[0.5]"] {
        let e = encode_source_event_seqs(&Value::parse(bad).unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sourceEventSeqs must contain non-negative safe integers"
        );
        assert_eq!(e.name(), "TypeError");
    }
}

// persistence §7.11 #13: malformed stored values: non-zstd blob data, and varints that are
// truncated, non-canonical, out of range or too long.
#[test]
fn malformed_stored_values_are_refused() {
    let mut row = bind_event(&turn_start(0, 1)).unwrap();
    row.data = RowData::Blob(b"not zstd".to_vec());
    assert!(decode_row(&row).is_err());
    let prefix = "malformed source_event_seqs storage value: ";
    let cases: [(&[u8], &str); 6] = [
        (&[0x80], "truncated varint"),
        (&[0x01, 0x80, 0x80], "truncated varint"),
        (&[0x80, 0x00], "non-canonical varint"),
        (
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10],
            "varint is out of range",
        ),
        (
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            "varint is out of range",
        ),
        (&[0x00, 0x01], "decoded seq is out of range"),
    ];
    for (bytes, why) in cases {
        assert_eq!(
            decode_source_event_seqs(bytes).unwrap_err().to_string(),
            format!("{prefix}{why}"),
            "{bytes:?}"
        );
    }
    // 2^53 as the first value, and a delta past 2(2^53 − 1), are out of range.
    let mut first = Vec::new();
    let mut v: u64 = 1 << 53;
    while v >= 0x80 {
        first.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    first.push(v as u8);
    assert_eq!(
        decode_source_event_seqs(&first).unwrap_err().to_string(),
        format!("{prefix}varint is out of range")
    );
}

// persistence §7.11 #14: oversized TEXT data of a packed row is refused before parsing.
#[test]
fn oversized_text_is_refused_before_parse() {
    let mut row = packed_row();
    row.data = RowData::Text("{".repeat(MAX_PACKED_DATA_BYTES + 1));
    assert_eq!(
        decode_row(&row).unwrap_err().to_string(),
        "malformed text-chunks storage row: data exceeds 1048576 UTF-8 bytes"
    );
}

// persistence §7.11 #15: decompression of a packed row is bounded.
#[test]
fn decompression_is_bounded() {
    let mut row = packed_row();
    let bomb = zstd::bulk::compress(&vec![b' '; 2 * MAX_PACKED_DATA_BYTES], 3).unwrap();
    row.data = RowData::Blob(bomb);
    let e = decode_row(&row).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cannot create a Buffer larger than 1048576 bytes"
    );
    assert!(e.to_string().contains("Buffer larger than"));
    // Invalid UTF-8 inside a compressed value is refused (fatal decoding).
    let mut row = bind_event(&turn_start(0, 1)).unwrap();
    row.data = RowData::Blob(zstd::bulk::compress(&[0xff, 0xfe], 3).unwrap());
    assert_eq!(
        decode_row(&row).unwrap_err().to_string(),
        "The encoded data was not valid for encoding utf-8"
    );
}

fn scalar(seq: u64, ty: &str) -> EventRow {
    bind_event(&ev(ty, seq, 1, r#"{"turn":1}"#)).unwrap()
}

// persistence §7.11 #16: scanRows with a gap after or before the last turn/end, and a
// malformed packed row before a turn/end.
#[test]
fn scan_rows_distinguishes_tail_from_committed_damage() {
    let rows = [scalar(0, "turn/start"), scalar(1, "x/y"), scalar(3, "x/y")];
    let scan = scan_rows(&rows, 0).unwrap();
    assert_eq!(scan.torn_from, Some(3));
    assert_eq!(scan.preserved.len(), 2);
    let rows = [
        scalar(0, "turn/start"),
        scalar(2, "x/y"),
        scalar(3, "turn/end"),
    ];
    assert_eq!(
        scan_rows(&rows, 0).unwrap_err().to_string(),
        "corrupt session log: invalid committed physical row at seq 2"
    );
    let mut bad = packed_row();
    bad.data = RowData::Text("{}".into());
    let rows = [bad, scalar(3, "turn/end")];
    assert_eq!(
        scan_rows(&rows, 0).unwrap_err().to_string(),
        "corrupt session log: invalid committed physical row at seq 0"
    );
    // A turn/end inside a packed row's own damage does not count: it cannot be decoded.
    let scan = scan_rows(&[scalar(0, "turn/end"), scalar(1, "turn/start")], 0).unwrap();
    assert!(scan.torn_from.is_none());
}

// persistence §7.11 #17: a malformed packed tail is one removable physical row.
#[test]
fn malformed_packed_tail_is_one_removable_row() {
    let mut bad = packed_row();
    bad.data = RowData::Text(r#"{"turn":1}"#.into());
    let scan = scan_rows(&[bad], 0).unwrap();
    assert_eq!(scan.torn_from, Some(0));
    assert!(scan.preserved.is_empty());
}

// persistence §7.12 compression-unprofitable #1: when the zstd frame is not smaller, large
// data stays TEXT.
#[test]
fn unprofitable_compression_keeps_text() {
    let text = "q".repeat(8_192);
    let same = encode_data_with(text.clone(), |b| Ok(vec![0; b.len()])).unwrap();
    assert_eq!(same, RowData::Text(text.clone()));
    let larger = encode_data_with(text.clone(), |b| Ok(vec![0; b.len() + 1])).unwrap();
    assert_eq!(larger, RowData::Text(text.clone()));
    let smaller = encode_data_with(text, |b| Ok(vec![0; b.len() - 1])).unwrap();
    assert!(matches!(smaller, RowData::Blob(_)));
    // Below the threshold the compressor is never asked.
    let below = encode_data_with("a".repeat(100), |_| panic!("compressed")).unwrap();
    assert!(matches!(below, RowData::Text(_)));
}

// persistence §8.1 (documented refusal): a stored lone surrogate is refused, never treated as a
// torn row.
#[test]
fn lone_surrogates_are_refused_not_truncated() {
    let mut row = bind_event(&turn_start(0, 1)).unwrap();
    row.data = RowData::Text(r#"{"t":"\ud800"}"#.into());
    let e = scan_rows(&[row], 0).unwrap_err();
    assert!(e.to_string().contains("lone UTF-16 surrogate"), "{e}");
}
