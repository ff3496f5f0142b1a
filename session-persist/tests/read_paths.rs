//! The read paths (`inspect`, `load`, `read_from`, `list`) agree with the reference on logs
//! written by hand: header metadata rebuilt from the known fields, lenient listing, non-object
//! lines, stray flat files.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{TempDir, ev, meta};
use session_core::{Event, FixedClock};
use session_persist::jsonl::to_header_line;
use session_persist::{Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions};
use session_store::SessionStore;

fn service(root: &Path) -> Persistence {
    let backend =
        JsonlBackend::open(JsonlConfig::new(root).compression(Compression::None)).unwrap();
    let store = SessionStore::new(Arc::new(FixedClock::new(0)));
    Persistence::new(Arc::new(backend), store, PersistenceOptions::default()).unwrap()
}

/// A closed turn `n` of four events from seq `first` (no message, so it is valid as stored).
fn turn(n: u64, first: u64) -> Vec<Event> {
    let t = format!("{{\"turn\":{n}}}");
    let s = format!("{{\"turn\":{n},\"step\":1}}");
    vec![
        ev("turn/start", first, &t),
        ev("step/start", first + 1, &s),
        ev("step/end", first + 2, &s),
        ev(
            "turn/end",
            first + 3,
            &format!("{{\"turn\":{n},\"reason\":{{\"kind\":\"completed\"}}}}"),
        ),
    ]
}

fn lines(events: &[Event]) -> String {
    events.iter().fold(String::new(), |mut out, e| {
        out.push_str(&e.to_json());
        out.push('\n');
        out
    })
}

/// Plants a plain log for session `id` (cwd `/w`) whose header line is `header` and whose body
/// is `body`; returns its path.
fn plant(root: &Path, id: &str, header: &str, body: &str) -> PathBuf {
    let path = root.join("--w--").join(id).join("session.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("{header}\n{body}")).unwrap();
    path
}

/// The header line of `meta("s")` with `extra` spliced in before its closing brace.
fn header_with(extra: &str) -> String {
    let line = to_header_line(&meta("s"));
    format!("{},{extra}}}", &line[..line.len() - 1])
}

// Item: session metadata is rebuilt from the known header fields on every read path; on
// `read_from` the known fields are not type-checked and stay as stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_metadata_is_rebuilt_from_the_known_fields() {
    let tmp = TempDir::new("rp-header");
    let root = tmp.root();
    let body = lines(&turn(1, 0));

    plant(&root, "s", &header_with(r#""future":true"#), &body);
    let p = service(&root);
    let plain = r#"{"version":0,"id":"s","createdAt":1000,"cwd":"/w","delegationDepth":0}"#;
    let inspected = p.inspect("s", None).await.unwrap();
    assert_eq!(inspected.meta.to_value().to_json(), plain);
    let read = p.read_from("s", 0, None).await.unwrap();
    assert_eq!(read.meta.to_value().to_json(), plain);
    assert_eq!(read.events.len(), 4);
    let listed = p.list(None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].to_value().to_json(), plain);
    let loaded = p.load("s").await.unwrap();
    assert_eq!(loaded.meta.to_value().to_json(), plain);
    p.dispose().await.unwrap();

    // A seedLength written as a string: kept as stored by `read_from`, refused by `inspect`.
    let tmp = TempDir::new("rp-header-seed");
    let root = tmp.root();
    let header = to_header_line(&meta("s")).replace(
        r#","delegationDepth""#,
        r#","seedLength":"3","delegationDepth""#,
    );
    plant(&root, "s", &header, &body);
    let p = service(&root);
    let read = p.read_from("s", 0, None).await.unwrap();
    assert_eq!(
        read.meta.to_value().to_json(),
        r#"{"version":0,"id":"s","createdAt":1000,"cwd":"/w","seedLength":"3","delegationDepth":0}"#
    );
    assert_eq!(read.meta.seed_length, None);
    assert_eq!(
        p.inspect("s", None).await.unwrap_err().to_string(),
        "stored session \"s\" failed validation: Error: session header seedLength must be a \
         non-negative safe integer"
    );
    p.dispose().await.unwrap();
}

// Item: a stray flat-file log, directly in the root or in a project directory, refuses every
// operation on the root with an error naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_flat_file_log_refuses_every_operation_on_the_root() {
    let body = lines(&turn(1, 0));
    for stray in ["other.jsonl", "--w--/other.jsonl", "--p--/x.jsonl.zstd"] {
        let tmp = TempDir::new("rp-flat");
        let root = tmp.root();
        plant(&root, "s", &to_header_line(&meta("s")), &body);
        let path = root.join(stray);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{}\n").unwrap();
        let want = format!(
            "session artifact \"{}\" uses the unsupported flat-file layout; use a separate root \
             or move it into a project/session directory before loading",
            path.display()
        );
        let p = service(&root);
        assert_eq!(p.inspect("s", None).await.unwrap_err().to_string(), want);
        assert_eq!(p.load("s").await.unwrap_err().to_string(), want);
        assert_eq!(
            p.read_from("s", 0, None).await.unwrap_err().to_string(),
            want
        );
        assert_eq!(p.list(None).await.unwrap_err().to_string(), want);
        assert_eq!(p.list_entries(None).await.unwrap_err().to_string(), want);
        assert_eq!(
            p.append("s", &turn(2, 4)).await.unwrap_err().to_string(),
            want
        );
        assert_eq!(
            p.inspect("absent", None).await.unwrap_err().to_string(),
            want
        );
        let _ = p.dispose().await;
        // Nothing was written.
        let stored = std::fs::read_to_string(root.join("--w--/s/session.jsonl")).unwrap();
        assert_eq!(stored.lines().count(), 5, "{stray}");
    }
}

// Item: listing is lenient about header versions and never fails because one session is
// newer, older or damaged; each unreadable session is an entry with its location and error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reports_damaged_sessions_and_lists_the_rest() {
    let tmp = TempDir::new("rp-list");
    let root = tmp.root();
    let body = lines(&turn(1, 0));
    plant(&root, "good", &to_header_line(&meta("good")), &body);
    for (id, version) in [("newer", "1"), ("older", "-1")] {
        let header = to_header_line(&meta(id)).replacen(
            "\"version\":0",
            &format!("\"version\":{version}"),
            1,
        );
        plant(&root, id, &header, &body);
    }
    let garbage = plant(&root, "garbage", "{not json", &body);
    let not_header = plant(&root, "event", r#"{"type":"turn/start","seq":0}"#, &body);
    let p = service(&root);

    let mut ids: Vec<String> = p
        .list(None)
        .await
        .unwrap()
        .iter()
        .map(|h| h.to_value().to_json())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            r#"{"version":-1,"id":"older","createdAt":1000,"cwd":"/w","delegationDepth":0}"#,
            r#"{"version":0,"id":"good","createdAt":1000,"cwd":"/w","delegationDepth":0}"#,
            r#"{"version":1,"id":"newer","createdAt":1000,"cwd":"/w","delegationDepth":0}"#,
        ]
    );
    // Opening the newer one still refuses.
    assert_eq!(
        p.inspect("newer", None).await.unwrap_err().name(),
        "SessionFormatUnsupportedError"
    );

    let entries = p.list_entries(None).await.unwrap();
    assert_eq!(entries.len(), 5);
    let mut errors: Vec<(PathBuf, String)> = entries
        .into_iter()
        .filter_map(|e| match e.header {
            Ok(_) => None,
            Err(err) => Some((e.location.unwrap().path, err.to_string())),
        })
        .collect();
    errors.sort();
    let mut want = vec![
        (
            garbage,
            "corrupt session log: header line is not valid JSON".to_owned(),
        ),
        (
            not_header,
            "corrupt session log: first line is not a session header".to_owned(),
        ),
    ];
    want.sort();
    assert_eq!(errors, want);
    p.dispose().await.unwrap();
}

/// `{type, seq, time: 0, data}` as a stored line.
fn line(ty: &str, seq: u64, data: &str) -> String {
    format!(r#"{{"type":"{ty}","seq":{seq},"time":0,"data":{data}}}"#)
}

// Item: `read_from` returns the stored events without the session validation of `inspect`
// and `load`: records whose envelope breaks the rules come back as stored, and so does every
// record after them; `inspect` and `load` refuse the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_from_returns_records_with_invalid_envelopes_as_stored() {
    let chunk = r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#;
    let bad_records = [
        format!(r#"{{"type":"assistant/chunk","seq":2,"time":0.5,"data":{chunk}}}"#),
        r#"{"type":"assistant/chunk","seq":2,"data":{}}"#.to_owned(),
        format!(r#"{{"type":"assistant/chunk","seq":2,"time":0,"data":{chunk},"note":1}}"#),
        r#"{"type":"assistant/chunk","seq":2,"time":0}"#.to_owned(),
        format!(
            r#"{{"type":"assistant/chunk","seq":2,"time":0,"data":{chunk},"ignorable":false}}"#
        ),
    ];
    for bad in bad_records {
        let tmp = TempDir::new("rp-verbatim");
        let root = tmp.root();
        let body = [
            line("turn/start", 0, r#"{"turn":1}"#),
            line("step/start", 1, r#"{"turn":1,"step":1}"#),
            bad.clone(),
            line("assistant/chunk", 3, chunk),
            line("step/end", 4, r#"{"turn":1,"step":1}"#),
            line("turn/end", 5, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        ];
        let text = body.iter().fold(String::new(), |mut out, l| {
            out.push_str(l);
            out.push('\n');
            out
        });
        plant(&root, "s", &to_header_line(&meta("s")), &text);
        let p = service(&root);
        let read = p.read_from("s", 0, None).await.unwrap();
        let got: Vec<String> = read.events.iter().map(Event::to_json).collect();
        assert_eq!(got, body, "{bad}");
        assert!(read.events[2].is_verbatim());
        assert!(!read.events[3].is_verbatim());
        // A suffix read starts at the requested seq, the invalid record included.
        let suffix = p.read_from("s", 2, None).await.unwrap();
        assert_eq!(suffix.events.len(), 4);
        assert_eq!(suffix.events[0].to_json(), bad);
        // What read_from returns can never be appended.
        assert_eq!(
            p.append("t", &read.events).await.unwrap_err().to_string(),
            "event at seq 2 is a stored record with an invalid event envelope and cannot be \
             appended"
        );
        for err in [
            p.inspect("s", None).await.unwrap_err(),
            p.load("s").await.unwrap_err(),
        ] {
            assert_eq!(
                err.to_string(),
                "stored session \"s\" failed validation: Error: seed event at index 2 has an \
                 invalid event envelope",
                "{bad}"
            );
        }
        p.dispose().await.unwrap();
    }
}

// Item: a record without a string `type` is an unknown type (`String(type)`), refused on every
// read path before its envelope is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_type_is_an_unknown_type_on_every_read_path() {
    let tmp = TempDir::new("rp-untyped");
    let root = tmp.root();
    let mut body = lines(&turn(1, 0));
    body.push_str(r#"{"seq":4,"time":0,"data":{}}"#);
    body.push('\n');
    let path = plant(&root, "s", &to_header_line(&meta("s")), &body);
    let p = service(&root);
    let want = format!(
        "session \"s\" contains event type \"undefined\" (seq 4) unknown to this harness and not \
         marked ignorable; refusing to interpret the log — it was likely written by a newer \
         harness (raw log: {})",
        path.display()
    );
    for err in [
        p.inspect("s", None).await.unwrap_err(),
        p.load("s").await.unwrap_err(),
        p.read_from("s", 0, None).await.unwrap_err(),
    ] {
        assert_eq!(err.name(), "SessionFormatUnsupportedError");
        assert_eq!(err.to_string(), want);
    }
    p.dispose().await.unwrap();
}

// Item: the read-time upgrade refuses, with a typed error naming the seq, an event whose data
// it must read but which has none (the reference fails with a TypeError there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_refuses_events_without_data_it_must_read() {
    for (record, ty) in [
        (r#"{"type":"turn/start","seq":4,"time":0}"#, "turn/start"),
        (
            r#"{"type":"request/header","seq":4,"time":0,"data":null}"#,
            "request/header",
        ),
        (
            r#"{"type":"user/message","seq":4,"time":0}"#,
            "user/message",
        ),
    ] {
        let tmp = TempDir::new("rp-nodata");
        let root = tmp.root();
        let mut body = lines(&turn(1, 0));
        body.push_str(record);
        body.push('\n');
        plant(&root, "s", &to_header_line(&meta("s")), &body);
        let p = service(&root);
        let want = format!(
            "session \"s\" stores {ty} at seq 4 without a data object, which the read-time \
             upgrade must read"
        );
        assert_eq!(
            p.read_from("s", 0, None).await.unwrap_err().to_string(),
            want
        );
        let err = p.inspect("s", None).await.unwrap_err().to_string();
        assert!(err.ends_with(&want), "{err}");
        p.dispose().await.unwrap();
    }
}

// Item: a line that is valid JSON but not an object is an unparsable line: corruption before
// a later turn/end, the start of the torn tail after the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_object_lines_follow_the_unparsable_line_rules() {
    for raw in ["null", "42", "[]"] {
        let tmp = TempDir::new("rp-nonobject");
        let root = tmp.root();
        let closed = lines(&turn(1, 0));
        let body = format!("{closed}{raw}\n{}", lines(&turn(2, 4)));
        plant(&root, "s", &to_header_line(&meta("s")), &body);
        let p = service(&root);
        assert_eq!(
            p.inspect("s", None).await.unwrap_err().to_string(),
            "corrupt session log: unparsable committed event at line 5",
            "{raw}"
        );
        p.dispose().await.unwrap();

        let tmp = TempDir::new("rp-nonobject-tail");
        let root = tmp.root();
        let open_turn = lines(&turn(2, 4)[..2]);
        let body = format!("{closed}{open_turn}{raw}\n{{garbage\n");
        let path = plant(&root, "s", &to_header_line(&meta("s")), &body);
        let p = service(&root);
        assert_eq!(p.read_from("s", 0, None).await.unwrap().events.len(), 6);
        let loaded = p.load("s").await.unwrap();
        // Cut back to the open turn, then closed by repair.
        assert!(loaded.events.len() > 6, "{raw}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&format!("\n{raw}\n")),
            "{raw}: the tail was cut"
        );
        p.dispose().await.unwrap();
    }
}

// Item (a deliberate divergence, docs/format.md): numbers read from disk keep their spelling
// on every read path, where the reference canonicalises them through doubles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_numbers_keep_their_spelling_on_every_read_path() {
    let spellings = [
        "1E2",
        "1.0",
        "1e21",
        "-0",
        "5e-7",
        "123456789012345678901234567890",
        "1e400",
        "9007199254740993",
        "0.30000000000000004",
    ];
    for n in spellings {
        let tmp = TempDir::new("rp-numbers");
        let root = tmp.root();
        let title = format!(r#"{{"type":"session/title","seq":4,"time":0,"data":{{"n":{n}}}}}"#);
        let body = format!("{}{title}\n", lines(&turn(1, 0)));
        plant(&root, "s", &to_header_line(&meta("s")), &body);
        let p = service(&root);
        let read = p.read_from("s", 4, None).await.unwrap();
        assert_eq!(read.events[0].to_json(), title);
        let inspected = p.inspect("s", None).await.unwrap();
        assert_eq!(inspected.events.get(4).unwrap().to_json(), title, "{n}");
        let loaded = p.load("s").await.unwrap();
        assert_eq!(loaded.events.get(4).unwrap().to_json(), title, "{n}");
        p.dispose().await.unwrap();
    }
}
