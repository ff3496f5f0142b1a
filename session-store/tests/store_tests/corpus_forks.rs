//! Golden corpus: every `logs/*/forks.json` case, replayed through `SessionStore::fork` on a
//! parent made live the way resume does it (prepare with seed source persistence, enter,
//! announce), with a fresh store per case and the corpus's frozen clock.
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_core::json::Value;
use session_core::{FixedClock, SharedClock};
use session_store::{ForkSource, PrepareOptions, SeedSource, SessionStore, SharedSession};

const CLOCK: i64 = 1_767_225_600_000;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Value::parse(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

fn array<'a>(v: &'a Value, what: &str) -> &'a [Value] {
    v.as_array()
        .unwrap_or_else(|| panic!("{what} is not an array"))
        .as_slice()
}

fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or_else(|| panic!("missing key {key}"))
}

fn u64_of(v: &Value, key: &str) -> u64 {
    get(v, key)
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count"))
}

/// A live parent in a fresh store, built as the corpus generator built it.
fn live_parent(id: &str, expected: &Value) -> (SessionStore, SharedSession) {
    let clock: SharedClock = Arc::new(FixedClock::new(CLOCK));
    let store = SessionStore::new(clock);
    let parent = store
        .prepare(
            Some(id),
            PrepareOptions {
                seed: Some(array(get(expected, "events"), "events").to_vec()),
                meta: Some(get(expected, "header").clone()),
                seed_source: SeedSource::Persistence,
                ..PrepareOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("parent {id}: {e}"));
    store.enter(&parent).unwrap();
    store.announce(&parent).unwrap();
    (store, parent)
}

fn event_lines(events: impl IntoIterator<Item = String>) -> Vec<String> {
    events.into_iter().collect()
}

fn check_case(dir: &str, id: &str, expected: &Value, forks: &Value, case: &Value) {
    let name = get(case, "name").as_str().unwrap_or("?");
    let ctx = format!("{dir} / {name}");
    let (store, parent) = live_parent(id, expected);
    let appended = array(
        get(get(forks, "parent"), "eventsAppendedByConstruction"),
        "eventsAppendedByConstruction",
    );
    assert_eq!(
        parent.seq(),
        u64_of(get(forks, "parent"), "eventCount"),
        "{ctx}: parent event count"
    );
    let tail: Vec<String> = parent
        .events()
        .suffix(parent.events().len() - appended.len())
        .iter()
        .map(session_core::Event::to_json)
        .collect();
    let want: Vec<String> = appended.iter().map(Value::to_json).collect();
    assert_eq!(tail, want, "{ctx}: events appended by construction");

    let boundary = get(case, "boundary");
    let boundary = (!boundary.is_null()).then_some(boundary);
    let child_id = get(case, "childSessionId");
    let child_id = (!child_id.is_null()).then(|| {
        child_id
            .as_str()
            .unwrap_or_else(|| panic!("{ctx}: child id"))
    });
    let result = get(case, "result");
    let outcome = store.fork(ForkSource::Session(&parent), boundary, child_id);
    if get(result, "ok").as_bool() != Some(true) {
        let error = get(result, "error");
        let err = match outcome {
            Ok(child) => panic!("{ctx}: expected an error, got child {}", child.id()),
            Err(e) => e,
        };
        let fork = err
            .as_fork()
            .unwrap_or_else(|| panic!("{ctx}: not a fork error: {err}"));
        assert_eq!(
            Some(fork.name()),
            get(error, "name").as_str(),
            "{ctx}: name"
        );
        assert_eq!(
            Some(fork.code().as_str()),
            get(error, "code").as_str(),
            "{ctx}: code"
        );
        assert_eq!(
            Some(err.to_string().as_str()),
            get(error, "message").as_str(),
            "{ctx}: message"
        );
        return;
    }
    let child = outcome.unwrap_or_else(|e| panic!("{ctx}: unexpected error {e}"));
    assert_eq!(Some(&*child.id()), get(result, "id").as_str(), "{ctx}: id");
    assert!(store.is_live(&child), "{ctx}: child is live");
    let header = child.header();
    assert_eq!(
        header.to_value().to_json(),
        get(result, "header").to_json(),
        "{ctx}: header"
    );
    assert_eq!(
        child.first_live_seq(),
        u64_of(result, "firstLiveSeq"),
        "{ctx}: firstLiveSeq"
    );
    assert_eq!(child.seq(), u64_of(result, "seq"), "{ctx}: seq");
    let events = child.events();
    assert_eq!(
        events.len() as u64,
        u64_of(result, "eventCount"),
        "{ctx}: eventCount"
    );
    assert_eq!(
        event_lines(events.iter().map(session_core::Event::to_json)),
        event_lines(
            array(get(result, "events"), "events")
                .iter()
                .map(Value::to_json)
        ),
        "{ctx}: events"
    );
    // The corpus measures how many leading child events equal the parent's (as JSON text):
    // the inherited prefix, plus the child's end-seed marker when it happens to coincide with
    // the parent's own marker at that seq (same frozen clock).
    let parent_events = parent.events();
    let common = events
        .iter()
        .zip(parent_events.iter())
        .take_while(|(c, p)| c.to_json() == p.to_json())
        .count();
    assert_eq!(
        common as u64,
        u64_of(result, "parentPrefixLength"),
        "{ctx}: parentPrefixLength"
    );
    assert!(
        header.seed_length.is_some_and(|n| n as usize <= common),
        "{ctx}: the inherited prefix is shared"
    );
    let nodes: Vec<u64> = array(get(result, "surfaceNodes"), "surfaceNodes")
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(child.surface_nodes().to_vec(), nodes, "{ctx}: surfaceNodes");
    assert_eq!(
        child.replace_generation(),
        u64_of(result, "replaceGeneration"),
        "{ctx}: replaceGeneration"
    );
    assert_eq!(
        child.derive_messages().len() as u64,
        u64_of(result, "derivedMessageCount"),
        "{ctx}: derivedMessageCount"
    );
    let closers = get(result, "interruptedTurnClosers");
    assert_eq!(
        get(closers, "ok").as_bool(),
        Some(true),
        "{ctx}: closers ok"
    );
    let got = session_repair::interrupted_turn_closers(events.iter());
    assert_eq!(
        event_lines(got.iter().map(session_core::Event::to_json)),
        event_lines(
            array(get(closers, "value"), "closers")
                .iter()
                .map(Value::to_json)
        ),
        "{ctx}: interruptedTurnClosers"
    );
    // The child shares nothing mutable with the parent: the parent is unchanged.
    assert_eq!(
        parent.seq(),
        u64_of(get(forks, "parent"), "eventCount"),
        "{ctx}: parent"
    );
}

#[test]
// session-core §6.2 against the golden corpus (logs/*/forks.json)
fn corpus_fork_cases_match_the_reference() {
    let Some(corpus) = conformance::corpus::Corpus::require() else {
        return;
    };
    let dirs: Vec<PathBuf> = corpus
        .index
        .logs
        .iter()
        .filter(|l| l.fork_cases > 0)
        .map(|l| corpus.dir.join("logs").join(&l.name))
        .collect();
    assert!(!dirs.is_empty(), "the corpus index lists fork cases");
    let mut cases = 0usize;
    let mut ok_cases = 0usize;
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let expected = read_json(&dir.join("expected.json"));
        let forks = read_json(&dir.join("forks.json"));
        let id = get(get(&forks, "parent"), "sessionId")
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            get(&expected, "sessionId").as_str(),
            Some(id.as_str()),
            "{name}: session id"
        );
        for case in array(get(&forks, "cases"), "cases") {
            check_case(&name, &id, &expected, &forks, case);
            cases += 1;
            if get(get(case, "result"), "ok").as_bool() == Some(true) {
                ok_cases += 1;
            }
        }
    }
    assert!(
        ok_cases > 0 && ok_cases < cases,
        "both outcomes are exercised"
    );
    eprintln!(
        "{} logs, {cases} fork cases ({ok_cases} children)",
        dirs.len()
    );
}
