//! `session-import` owns importing other harnesses' logs as resumable sessions: Codex CLI
//! rollouts (`.jsonl`, `.jsonl.zst`) and Claude Code transcripts (`.jsonl`, with their
//! sidechain and subagent transcripts as child sessions).
//!
//! Primary items: [`import_file`] (a file in a [`Format`] to [`Imported`] sessions, each with
//! its [`ImportReport`]), [`import_reader`] (the same from plain JSONL bytes, nothing read from
//! disk), [`ImportError`] (kind, file, line, byte offset), one module per
//! format ([`codex`], [`claude_code`]) over a shared mapping core.
//!
//! # Key design decision
//!
//! Every event is a `Draft` appended through `Session::append`, so an imported session obeys
//! every rule a live one does; turns and steps are bracketed so the turn/step invariant holds,
//! and crash honesty is `session-repair`'s: a call without a result gets the closers repair
//! writes (`TOOL_OUTCOME_UNKNOWN` when its `tool/call` was recorded, `TOOL_NOT_STARTED`
//! otherwise), and a turn left open is closed as interrupted. A record that is not mapped is
//! kept as an ignorable `import/record` event carrying the original line; a malformed line is
//! reported (line, byte offset) and cut, and the rest imports. Session and message ids and
//! event times come from the source, so importing a file twice gives identical events.
//!
//! # Example
//!
//! ```
//! use session_import::{Format, ImportOptions, import_file};
//!
//! let dir = std::env::temp_dir().join(format!("session-import-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let file = dir.join("rollout.jsonl");
//! std::fs::write(&file, concat!(
//!     r#"{"timestamp":"2026-01-02T03:04:05.000Z","type":"session_meta","payload":{"id":"t1","cwd":"/w"}}"#, "\n",
//!     r#"{"timestamp":"2026-01-02T03:04:06.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"1"}}"#, "\n",
//!     r#"{"timestamp":"2026-01-02T03:04:07.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#, "\n",
//!     r#"{"timestamp":"2026-01-02T03:04:08.000Z","type":"response_item","payload":{"type":"function_call","name":"ls","arguments":"{}","call_id":"c1"}}"#, "\n",
//! ))?;
//! let imported = import_file(Format::Codex, &file, &ImportOptions::default())?;
//! let session = &imported[0].session;
//! assert_eq!(session.id().as_ref(), "codex-t1");
//! // The call never got its output: repair's closers answer it and close the turn.
//! assert_eq!(imported[0].report.closed_calls["TOOL_OUTCOME_UNKNOWN"], 1);
//! assert_eq!(imported[0].report.closed_turns, 1);
//! assert_eq!(session.derive_messages().len(), 3);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod build;
pub mod claude_code;
pub mod codex;
mod core;
mod error;
mod read;
mod report;

pub use build::RECORD_EVENT;
pub use core::{Format, ImportOptions, Imported, import_file, import_reader};
pub use error::{ImportError, ImportErrorKind};
pub use read::{MAX_LINE_BYTES, MAX_PLAIN_BYTES, MAX_WINDOW_LOG};
pub use report::{CutLine, ImportReport, Refusal, Tokens};
