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
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(Compression::None)).unwrap();
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
