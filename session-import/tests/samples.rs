//! Every sample imports, passes every stored-log check (strict: the turn/step invariant too),
//! and imports to the same bytes twice.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use conformance::import_samples as samples;
use session_check::{StoredLogChecks, check_stored_log};
use session_import::{Format, ImportOptions, Imported, import_file};
use session_persist::Compression;

fn all() -> Option<Vec<(Format, std::path::PathBuf)>> {
    let dir = samples::require()?;
    let mut out = Vec::new();
    for f in [Format::Codex, Format::ClaudeCode] {
        for p in samples::files(&dir, f) {
            out.push((f, p));
        }
    }
    Some(out)
}

fn bytes(imported: &[Imported]) -> String {
    let mut out = String::new();
    for i in imported {
        out.push_str(&i.session.header().to_value().to_json());
        out.push('\n');
        for e in &i.session.events() {
            out.push_str(&e.to_json());
            out.push('\n');
        }
    }
    out
}

#[test]
fn every_sample_imports_and_verifies() {
    let Some(files) = all() else { return };
    assert!(files.len() > 60, "{} sample files", files.len());
    let mut failures = Vec::new();
    for (format, path) in &files {
        let imported = match import_file(*format, path, &ImportOptions::default()) {
            Ok(i) => i,
            Err(e) if e.kind() == session_import::ImportErrorKind::Empty => {
                // Only the 0-byte transcript holds nothing.
                assert_eq!(std::fs::metadata(path).unwrap().len(), 0, "{e}");
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        for i in &imported {
            let events = i.session.events();
            // A session without events is never stored.
            if events.is_empty() {
                failures.push(format!(
                    "{} ({}): no events",
                    path.display(),
                    i.session.id()
                ));
            }
            for (name, check) in check_stored_log(
                i.session.id(),
                &events,
                i.session.header().to_value(),
                events.len(),
                StoredLogChecks {
                    compression: Compression::None,
                    strict: true,
                },
            ) {
                if let Err(v) = check {
                    failures.push(format!(
                        "{} ({}): {name}: {v}",
                        path.display(),
                        i.session.id()
                    ));
                }
            }
            if !i.report.refused.is_empty() {
                failures.push(format!(
                    "{}: refused {:?}",
                    path.display(),
                    i.report.refused
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn importing_twice_gives_identical_bytes() {
    let Some(files) = all() else { return };
    for (format, path) in &files {
        let Ok(a) = import_file(*format, path, &ImportOptions::default()) else {
            continue;
        };
        let b = import_file(*format, path, &ImportOptions::default()).unwrap();
        assert_eq!(bytes(&a), bytes(&b), "{}", path.display());
    }
}
