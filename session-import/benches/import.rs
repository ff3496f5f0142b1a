//! Import throughput on the largest samples, scaled up: the largest Codex rollout replicated
//! 16 times (one thread, its turns repeated), and the largest Claude Code transcript replicated
//! 4 times with its uuids renamed per copy and each copy's root chained to the previous copy's
//! last record (one branch). Run: `cargo bench -p session-import --bench import`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use conformance::import_samples as samples;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value as J;
use session_import::{Format, ImportOptions, import_file};

fn largest(dir: &Path, format: Format) -> PathBuf {
    samples::files(dir, format)
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .unwrap()
}

fn scaled_codex(src: &Path, copies: usize, out: &Path) -> u64 {
    let text = std::fs::read_to_string(src).unwrap();
    let mut all = String::with_capacity(text.len() * copies);
    for _ in 0..copies {
        all.push_str(&text);
        if !text.ends_with('\n') {
            all.push('\n');
        }
    }
    std::fs::write(out, &all).unwrap();
    all.len() as u64
}

fn scaled_claude(src: &Path, copies: usize, out: &Path) -> u64 {
    let text = std::fs::read_to_string(src).unwrap();
    let records: Vec<J> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // The first root in the file: the branch of the last record leads back to it (across the
    // compaction, whose dangling logical parent continues at the record before).
    let root = records
        .iter()
        .find(|r| {
            r["uuid"].is_string() && r["parentUuid"].is_null() && r["logicalParentUuid"].is_null()
        })
        .and_then(|r| r["uuid"].as_str())
        .unwrap()
        .to_owned();
    let mut all = String::new();
    let mut last: Option<String> = None;
    for k in 0..copies {
        let rename = |v: &J| v.as_str().map(|s| J::String(format!("{k}-{s}")));
        let mut copy_last = None;
        for r in &records {
            let is_root = r["uuid"].as_str() == Some(root.as_str());
            let mut r = r.clone();
            if let Some(o) = r.as_object_mut() {
                for key in ["uuid", "parentUuid", "logicalParentUuid"] {
                    if let Some(v) = o.get(key).and_then(rename) {
                        o.insert(key.into(), v);
                    }
                }
                if let Some(m) = o.get_mut("message").and_then(J::as_object_mut)
                    && let Some(v) = m.get("id").and_then(rename)
                {
                    m.insert("id".into(), v);
                }
                if let Some(v) = o.get("requestId").and_then(rename) {
                    o.insert("requestId".into(), v);
                }
                if is_root && let Some(prev) = &last {
                    o.insert("parentUuid".into(), J::String(prev.clone()));
                }
                let conversational = matches!(
                    o.get("type").and_then(J::as_str),
                    Some("user" | "assistant")
                );
                if conversational && let Some(u) = o.get("uuid").and_then(J::as_str) {
                    copy_last = Some(u.to_owned());
                }
            }
            all.push_str(&r.to_string());
            all.push('\n');
        }
        last = copy_last;
    }
    std::fs::write(out, &all).unwrap();
    all.len() as u64
}

fn bench(c: &mut Criterion) {
    let Some(dir) = samples::require() else {
        return;
    };
    let tmp = std::env::temp_dir().join(format!("session-import-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut g = c.benchmark_group("import");
    g.sample_size(10);
    let codex = tmp.join("codex.jsonl");
    let source = largest(&dir, Format::Codex);
    let bytes = scaled_codex(&source, 16, &codex);
    let one = import_file(Format::Codex, &source, &ImportOptions::default()).unwrap();
    let many = import_file(Format::Codex, &codex, &ImportOptions::default()).unwrap();
    assert_eq!(many.len(), 1, "one thread");
    assert_eq!(many[0].report.tool_calls, 16 * one[0].report.tool_calls);
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("codex_x16", |b| {
        b.iter(|| import_file(Format::Codex, &codex, &ImportOptions::default()).unwrap());
    });
    let claude_dir = tmp.join("claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    let claude = claude_dir.join("scaled.jsonl");
    let source = largest(&dir, Format::ClaudeCode);
    let bytes = scaled_claude(&source, 4, &claude);
    // The copies form one branch: every copy maps, none is kept as off-branch.
    let one = import_file(Format::ClaudeCode, &source, &ImportOptions::default()).unwrap();
    let four = import_file(Format::ClaudeCode, &claude, &ImportOptions::default()).unwrap();
    assert_eq!(four[0].report.tool_calls, 4 * one[0].report.tool_calls);
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("claude_code_x4", |b| {
        b.iter(|| import_file(Format::ClaudeCode, &claude, &ImportOptions::default()).unwrap());
    });
    g.finish();
    std::fs::remove_dir_all(&tmp).unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
