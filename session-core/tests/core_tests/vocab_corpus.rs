//! The typed vocabulary against every log of the golden corpus (`../shared/corpus` beside the
//! workspace): each message and each core event's data reads into its type and writes back
//! to an equal value, key order and bytes included.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use session_core::Event;
use session_core::chunk_rows::{self, Decoded};
use session_core::json::{self, Value};
use session_core::vocab::{
    AssistantChunk, AssistantMessageData, ContentBlock, Message, MessageSource, RequestContext,
    RequestHeaderData, StepEnd, StepStart, StreamChunk, ToolCall, ToolResultData, TurnEnd,
    TurnStart,
};

/// Every `session.jsonl` under `logs/`, crash variants included, and every
/// `after-load.session.jsonl` (a crash variant as the reference's repair left it: closers with
/// `interrupted` turn ends and synthesized tool results).
fn corpus_files() -> Vec<PathBuf> {
    let logs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/logs");
    assert!(
        logs.is_dir(),
        "golden corpus not found at {}: it must sit beside the workspace",
        logs.display()
    );
    let mut files = Vec::new();
    let mut dirs = vec![logs];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("corpus directory is readable") {
            let path = entry.expect("corpus directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .file_name()
                .is_some_and(|n| n == "session.jsonl" || n == "after-load.session.jsonl")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(
        files.len() >= 480,
        "expected the full corpus, found {}",
        files.len()
    );
    files
}

/// The events of one file. Only a crash variant's last line may fail to parse (a torn tail);
/// it is counted in `torn`.
fn events_of(path: &Path, torn: &mut usize) -> Vec<Event> {
    let text = std::fs::read_to_string(path).expect("session.jsonl");
    let lines: Vec<&str> = text.split_terminator('\n').skip(1).collect();
    // A damaged crash variant, not the repaired file beside it.
    let crash = path.file_name().is_some_and(|n| n == "session.jsonl")
        && path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n.to_str().is_some_and(|n| n.starts_with("crash-")));
    let mut events = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let decoded = Value::parse(line)
            .map_err(session_core::Error::from)
            .and_then(chunk_rows::decode_storage_record);
        match decoded {
            Ok(Decoded::Passthrough(v)) => match Event::from_value(&v) {
                Ok(e) => events.push(e),
                Err(e) if crash && i + 1 == lines.len() => {
                    *torn += 1;
                    let _ = e;
                }
                Err(e) => panic!("{}:{}: {e}", path.display(), i + 2),
            },
            Ok(Decoded::Expanded(members)) => events.extend(members),
            Err(_) if crash && i + 1 == lines.len() => *torn += 1,
            Err(e) => panic!("{}:{}: {e}", path.display(), i + 2),
        }
    }
    events
}

/// Reads `event`'s data as `T` two ways (the type's reader and serde through
/// [`Event::data_as`]) and checks that both write back the same value and bytes.
fn round_trip<T>(
    event: &Event,
    read: fn(&Value) -> std::result::Result<T, json::SerdeError>,
    write: fn(&T) -> std::result::Result<Value, json::SerdeError>,
) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let data = event.data();
    let ctx = format!("seq {} {}", event.seq(), event.event_type());
    let typed = read(data).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let written = write(&typed).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    assert_eq!(&written, data, "{ctx}: typed round trip");
    assert_eq!(written.to_json(), data.to_json(), "{ctx}: bytes");
    let via_serde: T = event
        .data_as()
        .unwrap_or_else(|e: session_core::Error| panic!("{e}"));
    assert_eq!(via_serde, typed, "{ctx}: serde read");
    let serialized = json::to_value(&via_serde).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    assert_eq!(serialized.to_json(), data.to_json(), "{ctx}: serde bytes");
    typed
}

/// Checks the typed parts of a corpus message: every block is a known block type with no
/// unnamed fields, so the round trip went through the typed fields, not through `Other`.
fn check_message(m: &Message, ctx: &str, counts: &mut BTreeMap<String, usize>) {
    assert!(!m.id.is_empty(), "{ctx}: id");
    assert!(
        m.extra.is_empty(),
        "{ctx}: message has unnamed fields {:?}",
        m.extra
    );
    for block in &m.content {
        let tag = block.tag().unwrap_or("?").to_owned();
        assert!(
            !matches!(block, ContentBlock::Other(_)),
            "{ctx}: untyped block {tag}"
        );
        if let ContentBlock::ToolResult(r) = block {
            for inner in &r.content {
                assert!(
                    !matches!(inner, ContentBlock::Other(_)),
                    "{ctx}: untyped inner block"
                );
            }
        }
        *counts.entry(format!("block {tag}")).or_default() += 1;
    }
    let source = match &m.source {
        MessageSource::Other(o) => format!(
            "source other:{}",
            o.get("kind").and_then(Value::as_str).unwrap_or("?")
        ),
        s => format!("source {}", s.tag().unwrap_or("?")),
    };
    *counts.entry(source).or_default() += 1;
}

#[test]
fn vocabulary_round_trips_every_corpus_message_and_core_event() {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut messages = 0usize;
    let mut torn = 0usize;
    let files = corpus_files();
    for path in &files {
        for event in events_of(path, &mut torn) {
            let ctx = format!("{} seq {}", path.display(), event.seq());
            match event.event_type() {
                "user/message" => {
                    let m = round_trip(&event, Message::from_value, Message::to_value);
                    check_message(&m, &ctx, &mut counts);
                    // serde_json (preserve_order) writes the same bytes as the reference.
                    assert_eq!(serde_json::to_string(&m).unwrap(), event.data().to_json());
                    messages += 1;
                }
                "assistant/message" => {
                    let d = round_trip(
                        &event,
                        AssistantMessageData::from_value,
                        AssistantMessageData::to_value,
                    );
                    check_message(&d.message, &ctx, &mut counts);
                    assert!(d.extra.is_empty(), "{ctx}: {:?}", d.extra);
                    if let Some(usage) = &d.usage {
                        assert!(usage.extra.is_empty(), "{ctx}: usage {:?}", usage.extra);
                    }
                    messages += 1;
                }
                "tool/result" => {
                    let d =
                        round_trip(&event, ToolResultData::from_value, ToolResultData::to_value);
                    check_message(&d.message, &ctx, &mut counts);
                    assert!(d.extra.is_empty(), "{ctx}: {:?}", d.extra);
                    if let Some(error) = &d.error {
                        *counts
                            .entry(format!("tool error {}", error.code))
                            .or_default() += 1;
                    }
                    messages += 1;
                }
                "turn/start" => {
                    round_trip(&event, TurnStart::from_value, TurnStart::to_value);
                }
                "turn/end" => {
                    let d = round_trip(&event, TurnEnd::from_value, TurnEnd::to_value);
                    *counts
                        .entry(format!("turn/end {}", d.reason.tag().unwrap_or("?")))
                        .or_default() += 1;
                }
                "step/start" => {
                    round_trip(&event, StepStart::from_value, StepStart::to_value);
                }
                "step/end" => {
                    round_trip(&event, StepEnd::from_value, StepEnd::to_value);
                }
                "tool/call" => {
                    round_trip(&event, ToolCall::from_value, ToolCall::to_value);
                }
                "assistant/chunk" => {
                    let d =
                        round_trip(&event, AssistantChunk::from_value, AssistantChunk::to_value);
                    assert!(
                        !matches!(d.chunk, StreamChunk::Other(_)),
                        "{ctx}: untyped chunk"
                    );
                    *counts
                        .entry(format!("chunk {}", d.chunk.tag().unwrap_or("?")))
                        .or_default() += 1;
                }
                "request/header" => {
                    let d = round_trip(
                        &event,
                        RequestHeaderData::from_value,
                        RequestHeaderData::to_value,
                    );
                    assert!(d.header.extra.is_empty() && d.header.config.extra.is_empty());
                }
                "request/context" => {
                    round_trip(&event, RequestContext::from_value, RequestContext::to_value);
                }
                _ => continue,
            }
            *counts.entry(event.event_type().to_owned()).or_default() += 1;
        }
    }
    // Every type of the vocabulary was exercised, with the shapes the corpus holds.
    for key in [
        "user/message",
        "assistant/message",
        "tool/result",
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "tool/call",
        "assistant/chunk",
        "request/header",
        "request/context",
        "block text",
        "block reasoning",
        "block tool-call",
        "block tool-result",
        "block image",
        "source user",
        "source model",
        "source tool",
        "source plugin",
        "turn/end completed",
        "turn/end aborted",
        "turn/end error",
        "turn/end max-tokens",
        "turn/end interrupted",
        "tool error TOOL_NOT_STARTED",
        "tool error TOOL_OUTCOME_UNKNOWN",
        "chunk block-start",
        "chunk text-delta",
        "chunk reasoning-delta",
        "chunk tool-call-delta",
        "chunk block-end",
        "chunk usage",
        "chunk finish",
    ] {
        assert!(
            counts.get(key).copied().unwrap_or(0) > 0,
            "no {key} in the corpus: {counts:?}"
        );
    }
    assert!(messages >= 1828, "{messages} messages");
    assert!(torn < files.len(), "{torn} torn tails");
}
