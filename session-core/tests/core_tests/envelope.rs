//! An invalid event envelope keeps the reference's message (`invalid event envelope`) and says
//! what is wrong with it in its source, an [`EnvelopeProblem`].

use std::error::Error as _;

use session_core::json::parse;
use session_core::{EnvelopeProblem, Error, Event};

#[test]
fn every_envelope_refusal_names_its_problem_as_the_source() {
    for (record, problem) in [
        ("[1]", "the record is not an object"),
        (
            r#"{"type":"a","seq":0,"time":0,"data":{},"extra":1}"#,
            "an envelope key is not one of type, seq, time, data, surfaceOp, sourceEventSeqs, ignorable",
        ),
        (
            r#"{"type":1,"seq":0,"time":0,"data":{}}"#,
            "`type` is not a string",
        ),
        (
            r#"{"type":"a","seq":-1,"time":0,"data":{}}"#,
            "`seq` is not a non-negative safe integer",
        ),
        (
            r#"{"type":"a","seq":0,"time":"x","data":{}}"#,
            "`time` is not a safe integer",
        ),
        (
            r#"{"type":"a","seq":0,"time":0,"data":{},"ignorable":false}"#,
            "`ignorable` is present but not `true`",
        ),
        (
            r#"{"type":"a","seq":0,"time":0}"#,
            "a required key (type, seq, time, data) is missing",
        ),
    ] {
        let err = Event::from_value(&parse(record).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "invalid event envelope", "{record}");
        assert_eq!(
            err,
            Error::InvalidEnvelope {
                problem: EnvelopeProblem(problem)
            },
            "{record}"
        );
        assert_eq!(
            err.source().map(ToString::to_string).as_deref(),
            Some(problem),
            "{record}"
        );
    }
}
