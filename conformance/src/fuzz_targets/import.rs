//! The importer targets: arbitrary bytes as a Codex rollout or a Claude Code transcript,
//! through `session_import::import_reader`.

use std::io::Cursor;
use std::path::Path;

use session_check::{StoredLogChecks, check_stored_log};
use session_import::{Format, ImportErrorKind, ImportOptions, import_reader};
use session_persist::Compression;

/// The name the fuzzed bytes are imported under.
const NAME: &str = "fuzz.jsonl";

/// `cargo fuzz run import_codex`: the bytes imported as a Codex rollout. An import that fails
/// is a typed error naming the file; every session it gives passes every stored-log check,
/// strict; every cut line is named by a line and byte offset inside the bytes.
pub fn import_codex(data: &[u8]) {
    import(Format::Codex, data);
}

/// `cargo fuzz run import_claude_code`: the bytes imported as a Claude Code transcript, with
/// the checks of [`import_codex`].
pub fn import_claude_code(data: &[u8]) {
    import(Format::ClaudeCode, data);
}

/// `data` is imported in `format`. An import that fails is a typed error naming the file (no
/// I/O error can come from bytes; a file with no record is `Empty`). Every session an import
/// gives passes every stored-log check, strict (the turn/step invariant included), and every
/// line it cut is named by a line number and a byte offset that lie inside `data`.
fn import(format: Format, data: &[u8]) {
    let name = Path::new(NAME);
    let imported = match import_reader(
        format,
        Cursor::new(data.to_vec()),
        name,
        &ImportOptions::default(),
    ) {
        Ok(imported) => imported,
        Err(e) => {
            assert_eq!(e.file(), name, "the error names another file: {e}");
            assert_ne!(
                e.kind(),
                ImportErrorKind::Io,
                "an I/O error from bytes: {e}"
            );
            let _ = e.to_string();
            return;
        }
    };
    assert!(!imported.is_empty(), "an import gave no session");
    let lines = data.split(|&b| b == b'\n').count() as u64;
    for one in &imported {
        for cut in &one.report.cut {
            let (Some(line), Some(offset)) = (cut.error.line(), cut.error.offset()) else {
                panic!("a cut line is not located: {}", cut.error);
            };
            assert!(
                (1..=lines).contains(&line),
                "a cut line's number {line} is outside 1..={lines}"
            );
            assert!(
                (offset as usize) < data.len(),
                "a cut line's offset {offset} is past the input ({} bytes)",
                data.len()
            );
        }
        let session = &one.session;
        let events = session.events();
        for (check, outcome) in check_stored_log(
            session.id(),
            &events,
            session.header().to_value(),
            events.len(),
            StoredLogChecks {
                compression: Compression::None,
                strict: true,
            },
        ) {
            if let Err(v) = outcome {
                panic!("imported session {}: {check}: {v}", session.id());
            }
        }
    }
}
