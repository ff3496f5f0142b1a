//! The session restored while its log is read (`Backend::load_stored_into`, the coordinator's
//! restore sink) against the restore after the read: over logs that take the fast path
//! (closed and interrupted turns, compactions, torn tails) and logs that leave it (migrated
//! legacy shapes, retired shapes, unknown types, restore errors, invalid envelopes, seq gaps),
//! `inspect_detailed` gives the same events, header, surface, messages, transcript, closers
//! and torn tail, or the same error.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use common::{TempDir, meta};
use session_core::json::Value;
use session_core::{Event, FixedClock, SessionHeader};
use session_persist::jsonl::to_header_line;
use session_persist::{
    Backend, Compression, DetailedInspection, JsonlBackend, JsonlConfig, ListedSession, Location,
    Persistence, PersistenceOptions, RawArtifact, Result, Revision, SharedEventSink, StoredPrefix,
    TornMarker,
};
use session_store::SessionStore;
use session_surface::{Draft, Session};

/// A JSONL backend that never hands events to a sink: the coordinator restores after the read.
struct AfterRead(JsonlBackend);

#[async_trait]
impl Backend for AfterRead {
    fn name(&self) -> &str {
        self.0.name()
    }
    async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>> {
        self.0.load_stored(id).await
    }
    async fn load_stored_into(
        &self,
        id: &str,
        _sink: SharedEventSink,
    ) -> Result<Option<StoredPrefix>> {
        self.0.load_stored(id).await
    }
    async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        self.0.read_stored_revision(id).await
    }
    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        self.0.append_batch(meta, events, is_materialized).await
    }
    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> Result<()> {
        self.0.commit_repair(meta, torn, closers).await
    }
    async fn list(&self) -> Result<Vec<SessionHeader>> {
        self.0.list().await
    }
    async fn list_entries(&self) -> Result<Vec<ListedSession>> {
        self.0.list_entries().await
    }
    async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        self.0.list_snapshots().await
    }
    fn locate(&self, meta: &SessionHeader) -> Option<Location> {
        self.0.locate(meta)
    }
    fn supports_raw_artifacts(&self) -> bool {
        self.0.supports_raw_artifacts()
    }
    async fn read_raw(&self, id: &str) -> Result<Option<RawArtifact>> {
        self.0.read_raw(id).await
    }
    async fn acquire(&self, meta: &SessionHeader, stored: Option<&Revision>) -> Result<()> {
        self.0.acquire(meta, stored).await
    }
    async fn release(&self, id: &str) -> Result<()> {
        self.0.release(id).await
    }
    async fn close(&self) -> Result<()> {
        self.0.close().await
    }
}

fn service(root: &Path, after_read: bool) -> Persistence {
    let backend =
        JsonlBackend::open(JsonlConfig::new(root).compression(Compression::None)).unwrap();
    let backend: Arc<dyn Backend> = if after_read {
        Arc::new(AfterRead(backend))
    } else {
        Arc::new(backend)
    };
    let store = SessionStore::new(Arc::new(FixedClock::new(7)));
    Persistence::new(backend, store, PersistenceOptions::default()).unwrap()
}

/// Everything an inspection shows, as text.
fn describe(outcome: &Result<DetailedInspection>) -> String {
    match outcome {
        Err(e) => format!("error ({:?}): {e}", e.kind()),
        Ok(d) => {
            let events: Vec<String> = d.inspection.events.iter().map(Event::to_json).collect();
            let messages: Vec<String> = d.messages.iter().map(Value::to_json).collect();
            format!(
                "meta: {}\nstored: {}\ntorn: {:?}\nsurface: {:?}\nmessages: {messages:?}\ntranscript: {}\nevents:\n{}",
                d.inspection.meta.to_value().to_json(),
                d.stored,
                d.torn,
                d.surface.to_vec(),
                d.transcript.len(),
                events.join("\n")
            )
        }
    }
}

/// Inspects the log `body` (after the header of `meta("s")`) both ways and checks they agree;
/// returns the description.
fn both_ways(tag: &str, body: &str) -> String {
    let rt = common::rt();
    let mut seen = Vec::new();
    for after_read in [false, true] {
        let tmp = TempDir::new(tag);
        let root = tmp.root();
        let path = root.join("--w--").join("s").join("session.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{}\n{body}", to_header_line(&meta("s")))).unwrap();
        let (text, transcript) = rt.block_on(async {
            let p = service(&root, after_read);
            let outcome = p.inspect_detailed("s", None).await;
            let transcript = outcome.as_ref().ok().map(|d| d.transcript.clone());
            let text = common::rootless(&describe(&outcome), &root);
            p.dispose().await.unwrap();
            (text, transcript)
        });
        seen.push((text, transcript));
    }
    let (during, after) = (&seen[0], &seen[1]);
    assert_eq!(during.0, after.0, "{tag}");
    assert!(during.1 == after.1, "{tag}: the transcripts differ");
    seen.swap_remove(0).0
}

/// The stored lines of a session built through `Session::append` from `drafts` (without the
/// end-seed marker a restore adds).
fn lines(drafts: Vec<Draft>) -> String {
    let mut session = Session::create("s", None, None, Arc::new(FixedClock::new(5))).unwrap();
    for draft in drafts {
        session.append(draft).unwrap();
    }
    session.events().iter().fold(String::new(), |mut out, e| {
        out.push_str(&e.to_json());
        out.push('\n');
        out
    })
}

fn value(text: &str) -> Value {
    Value::parse(text).unwrap()
}

fn message(id: &str, text: &str) -> Value {
    value(&format!(
        r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
    ))
}

fn turn_drafts(n: u64, closed: bool) -> Vec<Draft> {
    let t = value(&format!("{{\"turn\":{n}}}"));
    let s = value(&format!("{{\"turn\":{n},\"step\":1}}"));
    let mut out = vec![
        Draft::new("turn/start", t),
        Draft::new("step/start", s.clone()),
        Draft::new("user/message", message(&format!("m{n}"), "hello")).append_op(),
    ];
    for i in 0..5 {
        out.push(Draft::new(
            "assistant/chunk",
            value(&format!(
                r#"{{"turn":{n},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t{i}"}}}}"#
            )),
        ));
    }
    if closed {
        out.push(Draft::new("step/end", s));
        out.push(Draft::new(
            "turn/end",
            value(&format!(
                "{{\"turn\":{n},\"reason\":{{\"kind\":\"completed\"}}}}"
            )),
        ));
    }
    out
}

#[test]
fn the_restore_during_the_read_matches_the_restore_after_it() {
    // Closed turns, then a compaction replacing the first message with a summary.
    let mut drafts = turn_drafts(1, true);
    drafts.extend(turn_drafts(2, true));
    drafts.push(
        Draft::new("user/message", message("sum", "(compacted)"))
            .replace_op(2, 2)
            .sources(&[2]),
    );
    let compacted = lines(drafts);
    let text = both_ways("rdr-compacted", &compacted);
    assert!(text.contains("(compacted)"), "{text}");

    // An interrupted turn: closers are added in memory.
    let mut drafts = turn_drafts(1, true);
    drafts.extend(turn_drafts(2, false));
    let open = lines(drafts);
    let text = both_ways("rdr-open", &open);
    assert!(text.contains("interrupted"), "{text}");

    // A torn tail (a fragment without a newline).
    let text = both_ways("rdr-torn", &format!("{open}{{\"type\":\"turn/st"));
    assert!(text.contains("torn: Some"), "{text}");

    // A pre-identity user message, migrated on read (the whole-log path).
    let legacy = compacted.replacen(r#"{"id":"m1","role":"user","content""#, r#"{"content""#, 1);
    assert_ne!(legacy, compacted);
    let text = both_ways("rdr-legacy", &legacy);
    assert!(text.starts_with("meta"), "{text}");

    // Refused logs: a retired shape, an unknown type, a replace of nothing, an invalid
    // envelope, a seq gap before a turn/end, a malformed message.
    let first_turn = lines(turn_drafts(1, true));
    let n = first_turn.lines().count();
    let refused = [
        format!("{first_turn}{{\"type\":\"mode/set\",\"seq\":{n},\"time\":0,\"data\":{{}}}}\n"),
        format!("{first_turn}{{\"type\":\"x/unknown\",\"seq\":{n},\"time\":0,\"data\":{{}}}}\n"),
        format!(
            "{first_turn}{{\"type\":\"user/message\",\"seq\":{n},\"time\":0,\"data\":{},\"surfaceOp\":{{\"op\":\"replace\",\"start\":90,\"end\":95}},\"sourceEventSeqs\":[90]}}\n",
            message("bad", "x").to_json()
        ),
        format!(
            "{first_turn}{{\"type\":\"turn/start\",\"seq\":{n},\"time\":0,\"data\":{{\"turn\":2}},\"extra\":1}}\n"
        ),
        format!(
            "{first_turn}{{\"type\":\"turn/start\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":2}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":2,\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
            n + 1,
            n + 2
        ),
        format!(
            "{first_turn}{{\"type\":\"user/message\",\"seq\":{n},\"time\":0,\"data\":{{\"id\":7}}}}\n"
        ),
    ];
    for (i, body) in refused.iter().enumerate() {
        let text = both_ways(&format!("rdr-refused-{i}"), body);
        assert!(text.starts_with("error"), "case {i}: {text}");
    }
}
