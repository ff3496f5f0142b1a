//! The reference's `sql-resource-boundary.spec.ts` (persistence §7.12): SQL lives in one place
//! as fixed text.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::Path;

const KEYWORDS: [&str; 9] = [
    "\"SELECT ",
    "\"INSERT ",
    "\"UPDATE ",
    "\"DELETE ",
    "\"CREATE ",
    "\"PRAGMA ",
    "\"BEGIN",
    "\"COMMIT",
    "\"ROLLBACK",
];

fn sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    assert!(out.len() >= 8);
    out
}

// persistence §7.12 sql-resource-boundary #1: no SQL literals or ad-hoc query sources outside
// the SQL module.
#[test]
fn sql_literals_live_only_in_the_sql_module() {
    for (name, text) in sources() {
        if name == "sql.rs" {
            continue;
        }
        for keyword in KEYWORDS {
            assert!(!text.contains(keyword), "{name} holds SQL ({keyword})");
        }
        for call in [
            ".execute(\"",
            ".query_row(\"",
            ".prepare(\"",
            ".execute_batch(\"",
            "&format!(\"PRAGMA",
        ] {
            assert!(!text.contains(call), "{name} runs ad-hoc SQL ({call})");
        }
    }
}

// persistence §7.12 sql-resource-boundary #2: the SQL text has no interpolation.
#[test]
fn sql_text_has_no_interpolation() {
    let (_, sql) = sources().into_iter().find(|(n, _)| n == "sql.rs").unwrap();
    assert!(sql.contains("\"SELECT "));
    for forbidden in ["format!", "concat!", "${", "{}", "{0", "{id", "+ &"] {
        assert!(!sql.contains(forbidden), "sql.rs uses {forbidden}");
    }
}
