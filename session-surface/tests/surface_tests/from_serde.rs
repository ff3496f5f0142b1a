//! `Draft::from_serde`: vocabulary payloads and plain serde types become drafts that a
//! session accepts, and read back through `Event::data_as` as they were written.

use std::sync::Arc;

use session_core::FixedClock;
use session_core::json::{SerdeErrorKind, Value};
use session_core::vocab::{
    AssistantMessageData, Bare, ContentBlock, Extra, Message, MessageSource, ModelSource, Role,
    StepEnd, StepStart, ToolCall, ToolCallBlock, ToolResultBlock, ToolResultData, ToolSource,
    TurnEnd, TurnEndReason, TurnStart, Usage,
};
use session_surface::{Draft, Session};

fn model_source() -> MessageSource {
    MessageSource::Model(ModelSource {
        provider: "p".into(),
        model: "m".into(),
        ..Default::default()
    })
}

/// A whole turn built from the vocabulary: every draft is accepted by `append` (message
/// shapes and surface rules included), and the log replays as a seed (the restore checks).
#[test]
fn vocabulary_drafts_validate_and_read_back() -> Result<(), Box<dyn std::error::Error>> {
    let mut session = Session::create("s", None, None, Arc::new(FixedClock::new(7)))?;
    let call = ToolCallBlock {
        id: "c1".into(),
        name: "bash".into(),
        arguments: Value::from("{\"command\":\"ls\"}"),
        ..Default::default()
    };
    let assistant = AssistantMessageData {
        turn: 1,
        step: 1,
        message: Message::new(
            "a1",
            Role::Assistant,
            vec![ContentBlock::text("running"), ContentBlock::ToolCall(call)],
            model_source(),
        ),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 2,
            ..Default::default()
        }),
        ..Default::default()
    };
    let result = ToolResultData {
        turn: 1,
        step: 1,
        message: Message::new(
            "r1",
            Role::User,
            vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: "c1".into(),
                content: vec![ContentBlock::text("a b")],
                is_error: Some(false),
                ..Default::default()
            })],
            MessageSource::Tool(ToolSource {
                call_id: "c1".into(),
                ..Default::default()
            }),
        ),
        ..Default::default()
    };
    let drafts = vec![
        Draft::from_serde(&TurnStart {
            turn: 1,
            ..Default::default()
        })?,
        Draft::from_serde(&Message::user_text("u1", "list files"))?,
        Draft::from_serde(&StepStart {
            turn: 1,
            step: 1,
            ..Default::default()
        })?,
        Draft::from_serde(&assistant)?,
        Draft::from_serde(&ToolCall {
            turn: 1,
            step: 1,
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: "{\"command\":\"ls\"}".into(),
            ..Default::default()
        })?,
        Draft::from_serde(&result)?,
        Draft::from_serde(&StepEnd {
            turn: 1,
            step: 1,
            ..Default::default()
        })?,
        Draft::from_serde(&TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed(Bare::default()),
            ..Default::default()
        })?,
    ];
    for draft in drafts {
        session.append(draft)?;
    }
    let events = session.events();
    assert_eq!(session.derive_messages().len(), 3);
    assert_eq!(
        events.get(1).unwrap().to_json(),
        r#"{"type":"user/message","seq":1,"time":7,"data":{"id":"u1","role":"user","content":[{"type":"text","text":"list files"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#
    );
    assert_eq!(
        events.get(3).unwrap().data_as::<AssistantMessageData>()?,
        assistant
    );
    assert_eq!(events.get(5).unwrap().data_as::<ToolResultData>()?, result);
    // The seed path runs the reference's shape checks on every message.
    let seed: Vec<Value> = events.iter().map(session_core::Event::to_value).collect();
    let replayed = Session::create("s", Some(seed), None, Arc::new(FixedClock::new(7)))?;
    assert_eq!(replayed.derive_messages().len(), 3);
    Ok(())
}

/// A plugin's own serde type: borrowed reads, typed errors naming the seq and the path.
#[test]
fn plain_serde_types_round_trip_and_errors_name_the_place() -> Result<(), Box<dyn std::error::Error>>
{
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Note<'a> {
        title: &'a str,
        tags: Vec<String>,
        weight: f64,
    }
    #[derive(serde::Deserialize, Debug)]
    struct Wrong {
        #[allow(dead_code)]
        tags: Vec<u64>,
    }
    let mut session = Session::create("s", None, None, Arc::new(FixedClock::new(0)))?;
    let note = Note {
        title: "t",
        tags: vec!["a".into()],
        weight: 0.5,
    };
    session.append(Draft::from_serde_as("feedback/record", &note)?)?;
    let event = session.events().get(0).unwrap().clone();
    assert_eq!(
        event.data().to_json(),
        r#"{"title":"t","tags":["a"],"weight":0.5}"#
    );
    assert_eq!(event.data_as::<Note<'_>>()?, note);

    let err = event.data_as::<TurnStart>().unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"event at seq 0 ("feedback/record"): data does not fit: missing field `turn`"#
    );
    let err = event.data_as::<Wrong>().unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"event at seq 0 ("feedback/record"): data does not fit: invalid type: string "a", expected u64 at /tags/0"#
    );
    assert!(std::error::Error::source(&err).is_some());

    // What append refuses, the serializer refuses, naming the field.
    let bad = Note {
        weight: f64::NAN,
        ..note
    };
    let err = Draft::from_serde_as("feedback/record", &bad).unwrap_err();
    assert_eq!(err.kind(), &SerdeErrorKind::NonFinite);
    assert_eq!(err.pointer(), "/weight");
    let big = TurnStart {
        turn: u64::MAX,
        extra: Extra::default(),
    };
    let err = Draft::from_serde(&big).unwrap_err();
    assert_eq!(err.pointer(), "/turn");
    assert!(matches!(err.kind(), SerdeErrorKind::UnsafeInteger(_)));
    Ok(())
}
