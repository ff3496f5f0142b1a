//! `sessionctl import` end to end over every sample: into JSONL (zstd and raw) and `SQLite`
//! stores (`PostgreSQL` in `postgres_store.rs`), then `verify --strict`, and the same model view read back from every backend.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use crate::common::{Temp, run};
use conformance::import_samples as samples;
use session_import::Format;

fn sample_files(format: Format) -> Option<Vec<PathBuf>> {
    let dir = samples::require()?;
    Some(
        samples::files(&dir, format)
            .into_iter()
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
            .collect(),
    )
}

/// Imports every sample of `format` into `store`; returns each session's id and its view.
pub(crate) fn import_all(store: &[&str], format: Format) -> Option<Vec<(String, String)>> {
    let files = sample_files(format)?;
    let mut args: Vec<String> = store.iter().map(|s| (*s).to_owned()).collect();
    args.extend(["import".into(), format.as_str().into()]);
    args.extend(files.iter().map(|p| p.display().to_string()));
    args.push("--json".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let doc = run(&argv).ok().json();
    assert_eq!(doc["schema"], "sessionctl.import/1");
    let sessions = doc["sessions"].as_array().unwrap();
    assert!(
        sessions.len() >= files.len() / 2,
        "{} sessions",
        sessions.len()
    );
    let mut out = Vec::new();
    for s in sessions {
        let id = s["id"].as_str().unwrap().to_owned();
        for key in ["mapped", "ignorable", "closed", "refused", "cut", "tokens"] {
            assert!(!s[key].is_null(), "{id}: {key}");
        }
        assert_eq!(s["refused"].as_array().unwrap().len(), 0, "{id}");
        let mut m: Vec<&str> = store.to_vec();
        m.extend(["messages", &id, "--json"]);
        let view = run(&m).ok().stdout;
        out.push((id, view));
    }
    Some(out)
}

#[test]
fn every_sample_imports_verifies_and_reads_the_same_from_every_local_backend() {
    for format in [Format::Codex, Format::ClaudeCode] {
        let zstd = Temp::new("import-zstd");
        let root = zstd.path().join("root");
        let root_s = root.display().to_string();
        let Some(a) = import_all(&["--root", &root_s], format) else {
            return;
        };
        let verify = run(&["verify", &root_s, "--strict"]).ok();
        assert!(verify.stdout.contains(" 0 failed"), "{}", verify.stdout);

        let raw = Temp::new("import-raw");
        let raw_root = raw.path().join("root").display().to_string();
        let b = import_all(&["--root", &raw_root, "--compression", "none"], format).unwrap();
        let verify = run(&["verify", &raw_root, "--strict"]).ok();
        assert!(verify.stdout.contains(" 0 failed"), "{}", verify.stdout);

        let db = Temp::new("import-sqlite");
        let spec = format!("sqlite:{}", db.path().join("s.db").display());
        let c = import_all(&["--store", &spec], format).unwrap();
        assert_eq!(
            a, b,
            "{format:?}: zstd and raw JSONL read back the same views"
        );
        assert_eq!(
            a, c,
            "{format:?}: JSONL and SQLite read back the same views"
        );
    }
}

#[test]
fn human_report_names_mapped_ignorable_closed_refused_and_cut() {
    let Some(dir) = samples::require() else {
        return;
    };
    let t = Temp::new("import-human");
    let root = t.path().join("root").display().to_string();
    let file = dir.join("codex/crispierry__codex-log-viewer/fixtures/codex/sample-session.jsonl");
    let out = run(&[
        "--root",
        &root,
        "import",
        "codex",
        file.to_str().unwrap(),
        "--id",
        "mine",
    ])
    .ok();
    for word in [
        "imported mine",
        "mapped",
        "kept",
        "as ignorable",
        "closed",
        "refused 0",
        "cut 1 line(s)",
        "sample-session.jsonl:10 (byte ",
    ] {
        assert!(out.stdout.contains(word), "{word}: {}", out.stdout);
    }
    // The same id again is refused, naming it.
    let again = run(&[
        "--root",
        &root,
        "import",
        "codex",
        file.to_str().unwrap(),
        "--id",
        "mine",
    ]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("\"mine\" already exists"),
        "{}",
        again.stderr
    );
}

#[test]
fn an_empty_file_and_a_bad_format_fail_with_their_codes() {
    let t = Temp::new("import-bad");
    let empty = t.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let root = t.path().join("root").display().to_string();
    let r = run(&[
        "--root",
        &root,
        "import",
        "claude-code",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("empty.jsonl"), "{}", r.stderr);
    let r = run(&["--root", &root, "import", "gemini", empty.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}
