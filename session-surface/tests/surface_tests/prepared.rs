//! `PreparedDraft` / `Session::append_prepared`: the same events and the same errors as
//! `Session::append`, with the draft's JSON checked once.

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use crate::common::{clock, session, user, v};
use session_surface::{Draft, PreparedDraft, Session};

#[test]
// session-core §2.2 steps 1–4 and 6–9
fn prepared_drafts_append_like_drafts() {
    let chunk = Draft::new(
        "assistant/chunk",
        v(r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"t"}}"#),
    );
    let message = Draft::new("user/message", user("u1", "hi")).append_op();
    let mut a = session();
    let mut b = session();
    let prepared = [
        PreparedDraft::new(chunk.clone()).unwrap(),
        PreparedDraft::new(message.clone()).unwrap(),
    ];
    assert_eq!(prepared[0].event_type(), "assistant/chunk");
    for _ in 0..3 {
        for (draft, prepared) in [&chunk, &message].into_iter().zip(&prepared) {
            let x = a.append(draft.clone()).unwrap();
            let y = b.append_prepared(prepared).unwrap();
            assert_eq!(x.to_json(), y.to_json());
        }
    }
    assert_eq!(a.events(), b.events());
    assert_eq!(a.surface_nodes(), b.surface_nodes());
    assert_eq!(a.derive_messages(), b.derive_messages());
}

#[test]
// session-core §2.2 step 2 (JSON rules) and the session-dependent checks
fn prepared_drafts_fail_like_drafts() {
    // A draft-only problem fails when the draft is prepared, with the append error.
    let bad = Draft::new("x/y", v(r#"{"deep":{"x":-0.0}}"#));
    let expected = session().append(bad.clone()).unwrap_err().to_string();
    assert_eq!(PreparedDraft::new(bad).unwrap_err().to_string(), expected);
    // A session-dependent problem fails on each append and changes nothing.
    let replace = PreparedDraft::new(
        Draft::new("user/message", user("u2", "x"))
            .replace_op(5, 6)
            .sources(&[5, 6]),
    )
    .unwrap();
    let mut s: Session = Session::create("s", None, None, clock()).unwrap();
    let expected = session()
        .append(
            Draft::new("user/message", user("u2", "x"))
                .replace_op(5, 6)
                .sources(&[5, 6]),
        )
        .unwrap_err()
        .to_string();
    assert_eq!(
        s.append_prepared(&replace).unwrap_err().to_string(),
        expected
    );
    assert_eq!(s.seq(), 0);
}
