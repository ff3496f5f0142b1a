//! Checks the chunk-row codec and the request folds against the golden corpus written by the
//! reference implementation, found and enumerated by `conformance::corpus`.

use std::path::{Path, PathBuf};

use session_core::Event;
use session_core::chunk_rows::{self, Decoded, StorageRecord};
use session_core::json::Value;
use session_core::request::{RequestContextFold, RequestHeaderFold, fold_request_header};

/// Every log of the corpus, from its index (`None`: absent, and skipping is allowed).
fn corpus_logs() -> Option<Vec<PathBuf>> {
    conformance::corpus::Corpus::require().map(|c| c.logs())
}

/// The body lines (header skipped) of a log and its decoded events.
fn read_log(dir: &Path) -> (String, Vec<Event>) {
    let text = std::fs::read_to_string(dir.join("session.jsonl")).expect("session.jsonl");
    let body = text
        .split_once('\n')
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    let mut events = Vec::new();
    for line in body.split_terminator('\n') {
        let value = Value::parse(line).expect("corpus line parses");
        match chunk_rows::decode_storage_record(value).expect("corpus line decodes") {
            Decoded::Passthrough(v) => events.push(Event::from_value(&v).expect("corpus event")),
            Decoded::Expanded(members) => events.extend(members),
        }
    }
    (body, events)
}

#[test]
fn every_corpus_line_re_encodes_byte_identically() {
    let mut rows = 0;
    let mut lines = 0;
    let Some(logs) = corpus_logs() else { return };
    for dir in logs {
        let (body, _) = read_log(&dir);
        for line in body.split_terminator('\n') {
            lines += 1;
            let rewritten =
                match chunk_rows::decode_storage_record(Value::parse(line).unwrap()).unwrap() {
                    Decoded::Passthrough(v) => Event::from_value(&v).unwrap().to_json(),
                    Decoded::Expanded(members) => {
                        rows += 1;
                        let records = chunk_rows::pack_chunk_runs(&members);
                        assert_eq!(records.len(), 1, "{}: {line}", dir.display());
                        let StorageRecord::Row(row) = &records[0] else {
                            panic!("{}: a row's expansion did not pack: {line}", dir.display());
                        };
                        let mut out = String::new();
                        row.write_json(&mut out);
                        out
                    }
                };
            assert_eq!(rewritten, line, "{}", dir.display());
        }
    }
    assert!(rows > 100 && lines > 1000, "{rows} rows, {lines} lines");
}

#[test]
fn every_corpus_log_body_is_one_packed_batch() {
    // The corpus README: for plain JSONL the batch plan does not change a byte, so writing all
    // events as one packed batch reproduces the file body.
    let Some(logs) = corpus_logs() else { return };
    for dir in logs {
        let (body, events) = read_log(&dir);
        let mut out = String::new();
        chunk_rows::write_batch_lines(&events, true, &mut out);
        out.push('\n');
        assert!(out == body, "{}", dir.display());
    }
}

fn expected_value<'a>(expected: &'a Value, path: &[&str]) -> &'a Value {
    let mut v = expected;
    for key in path {
        v = v.get(key).unwrap_or_else(|| panic!("missing {path:?}"));
    }
    assert_eq!(v.get("ok").and_then(Value::as_bool), Some(true), "{path:?}");
    v.get("value").expect("expected value")
}

#[test]
fn request_folds_match_the_reference() {
    let mut headers = 0;
    let Some(logs) = corpus_logs() else { return };
    for dir in logs {
        let (_, events) = read_log(&dir);
        let expected =
            Value::parse(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
        let folded = fold_request_header(&events, None).unwrap_or_default();
        assert_eq!(
            &folded,
            expected_value(&expected, &["pure", "foldRequestHeader"]),
            "{}",
            dir.display()
        );
        let mut header = RequestHeaderFold::new();
        let mut context = RequestContextFold::new();
        for e in &events {
            header.push(e);
            context.push(e);
        }
        assert_eq!(
            &header.current().cloned().unwrap_or_default(),
            expected_value(&expected, &["session", "requestHeader"]),
            "{}",
            dir.display()
        );
        assert_eq!(
            &context.current().cloned().unwrap_or_default(),
            expected_value(&expected, &["session", "requestContext"]),
            "{}",
            dir.display()
        );
        if header.current().is_some() {
            headers += 1;
        }
    }
    assert!(headers > 50, "{headers} logs with a request header");
}
