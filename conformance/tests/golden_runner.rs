//! The golden runner on small synthetic corpora built from real corpus pieces: each way a corpus
//! and the port can disagree must show as a failure, and a listed divergence only as itself.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers unwrap

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use conformance::corpus::{self, Check, Group, Options, Report};
use serde_json::Value;

/// A temporary synthetic corpus, removed on drop.
struct Synthetic {
    dir: PathBuf,
}

impl Drop for Synthetic {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

impl Synthetic {
    /// A corpus holding the named logs and negative cases of the real corpus, with an
    /// `index.json` listing exactly them. `None` when the real corpus is absent and
    /// `SESSION_CORPUS_OPTIONAL=1` allows skipping.
    fn new(logs: &[&str], negative: &[&str]) -> Option<Synthetic> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let real = corpus::require()?;
        let dir = std::env::temp_dir().join(format!(
            "golden-synthetic-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut index = read_json(&real.join("index.json"));
        let keep = |list: &mut Value, key: &str, names: &[&str]| {
            let kept: Vec<Value> = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| names.contains(&e[key].as_str().unwrap()))
                .cloned()
                .collect();
            assert_eq!(kept.len(), names.len(), "all of {names:?} are in the index");
            *list = Value::Array(kept);
        };
        keep(&mut index["logs"], "name", logs);
        keep(&mut index["negative"], "case", negative);
        index.as_object_mut().unwrap().remove("counts");
        for name in logs {
            copy_tree(&real.join("logs").join(name), &dir.join("logs").join(name));
        }
        for case in negative {
            copy_tree(
                &real.join("negative").join(case),
                &dir.join("negative").join(case),
            );
        }
        std::fs::create_dir_all(&dir).unwrap();
        write_json(&dir.join("index.json"), &index);
        Some(Synthetic { dir })
    }

    fn run(&self, options: &Options) -> Report {
        corpus::run(&self.dir, options).unwrap()
    }

    fn negative(&self, case: &str) -> PathBuf {
        self.dir.join("negative").join(case)
    }

    fn edit_expected(&self, case: &str, edit: impl FnOnce(&mut Value)) {
        let path = self.negative(case).join("expected.json");
        let mut doc = read_json(&path);
        edit(&mut doc);
        write_json(&path, &doc);
    }
}

fn failed(report: &Report) -> Vec<String> {
    report
        .failures
        .iter()
        .map(|f| format!("{} [{}]", f.case, f.check))
        .collect()
}

/// The failures of `after` that `before` (the same corpus before an edit) did not have: what
/// the edit alone caused, whatever the port gets wrong in these cases at the time.
fn added(before: &Report, after: &Report) -> Vec<String> {
    let before = failed(before);
    failed(after)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect()
}

/// The failure of `check` in `report`.
fn failure<'a>(report: &'a Report, check: &str) -> &'a corpus::Failure {
    report
        .failures
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no failure of {check}: {:?}", failed(report)))
}

const NEGATIVE: Check = Check::Negative;

/// The pieces used below pass unchanged (so the other tests' baselines are clean in practice;
/// they compare with a baseline anyway).
#[test]
fn an_unchanged_synthetic_corpus_passes() {
    let Some(c) = Synthetic::new(
        &["acp.subagent-published-run-failure__session.1"],
        &["garbage-line-before-turn-end", "garbage-line-in-open-tail"],
    ) else {
        return;
    };
    let report = c.run(&Options::default());
    assert!(report.failures.is_empty(), "{:?}", failed(&report));
    assert!(report.divergences.is_empty());
    assert!(report.passed > 50, "{}", report.summary());
    for group in [Group::Index, Group::Session, Group::Negative] {
        assert!(report.groups[&group].passed > 0, "{group:?} ran");
    }
    assert!(
        report
            .summary()
            .ends_with(" passed, 0 failed, 0 known divergences")
    );
}

#[test]
fn a_case_listed_in_the_index_but_missing_fails() {
    let Some(c) = Synthetic::new(&[], &["garbage-line-before-turn-end", "not-found"]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    std::fs::remove_dir_all(c.negative("not-found")).unwrap();
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        ["negative/not-found [index.present]"]
    );
    assert_eq!(failure(&report, "index.present").group, Group::Index);

    // A missing log and a missing crash variant fail the same way.
    let name = "acp.error-finish__session";
    let other = "acp.subagent-published-run-failure__session.1";
    let Some(c) = Synthetic::new(&[name, other], &[]) else {
        return;
    };
    let before = c.run(&Options::only(&[]));
    let crash = c.dir.join("logs").join(name).join("crash-01");
    assert!(crash.is_dir(), "the log has crash variants");
    std::fs::remove_dir_all(&crash).unwrap();
    std::fs::remove_dir_all(c.dir.join("logs").join(other)).unwrap();
    let report = c.run(&Options::only(&[]));
    assert_eq!(
        added(&before, &report),
        [
            format!("logs/{name}/crash-01 [index.present]"),
            format!("logs/{other} [index.present]"),
        ]
    );
}

#[test]
fn a_case_on_disk_but_not_in_the_index_fails() {
    let case = "garbage-line-before-turn-end";
    let Some(c) = Synthetic::new(&[], &[case]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    copy_tree(&c.negative(case), &c.negative("garbage-line-copy"));
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        ["negative/garbage-line-copy [index.listed]"]
    );

    // A file under a root that expected.json does not list is extra too.
    std::fs::remove_dir_all(c.negative("garbage-line-copy")).unwrap();
    let stray = c.negative(case).join("root/notes.txt");
    std::fs::write(&stray, "not a session\n").unwrap();
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert!(
        added(&before, &report).contains(&format!("negative/{case} [index.present]")),
        "{:?}",
        failed(&report)
    );
    assert!(
        failure(&report, "index.present")
            .detail
            .contains("root/notes.txt is not listed")
    );
}

#[test]
fn a_changed_file_under_a_negative_root_fails() {
    // The reference's load repaired this log; with after-load/ removed, the corpus says every
    // file stays unchanged, and our repair must then show as a failure of the file check.
    let case = "garbage-line-in-open-tail";
    let check = format!("negative/{case} [results.load.files]");
    let Some(c) = Synthetic::new(&[], &[case]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    assert!(
        !failed(&before).contains(&check),
        "our repair leaves the reference's bytes"
    );
    std::fs::remove_dir_all(c.negative(case).join("after-load")).unwrap();
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(added(&before, &report), std::slice::from_ref(&check));

    // A repaired file that differs by one byte from after-load/ fails the same check.
    let Some(c) = Synthetic::new(&[], &[case]) else {
        return;
    };
    let after = c
        .negative(case)
        .join("after-load/--fixture-cwd--/e128dda9-ed11-4868-8266-0ef90d03c3d6/session.jsonl");
    let mut bytes = std::fs::read(&after).unwrap();
    let last = bytes.len() - 3;
    bytes[last] = b'X';
    std::fs::write(&after, bytes).unwrap();
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(added(&before, &report), [check]);
}

#[test]
fn a_wrong_error_name_fails() {
    let case = "garbage-line-before-turn-end";
    let Some(c) = Synthetic::new(&[], &[case]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    c.edit_expected(case, |doc| {
        doc["results"]["load"]["error"]["name"] = Value::from("RangeError");
    });
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        [format!("negative/{case} [results.load]")]
    );
    let detail = &failure(&report, "results.load").detail;
    assert!(detail.contains("RangeError"), "{detail}");

    // So do a wrong cause and a wrong code.
    let case = "assistant-message-empty-provider";
    let Some(c) = Synthetic::new(&[], &[case]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    c.edit_expected(case, |doc| {
        doc["results"]["inspect"]["error"]["cause"]["message"] = Value::from("another cause");
        doc["results"]["load"]["error"]["code"] = Value::from("E_SOMETHING");
    });
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        [
            format!("negative/{case} [results.inspect]"),
            format!("negative/{case} [results.load]")
        ]
    );
}

#[test]
fn a_listed_divergence_counts_apart_and_an_unlisted_one_fails() {
    let listed = "number-exponent-upper-in-data";
    // The null line reads as the sibling case with an array line reads in the reference.
    let Some(c) = Synthetic::new(
        &[],
        &[listed, "null-line-in-open-tail", "array-line-in-open-tail"],
    ) else {
        return;
    };
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert!(report.failures.is_empty(), "{:?}", failed(&report));
    // inspect, load, readFrom of the number case; those and load's files of the null line.
    assert_eq!(report.divergences.len(), 7, "{}", report.summary());
    assert_eq!(report.groups[&Group::Negative].diverged, 7);
    assert!(
        report
            .summary()
            .ends_with(", 0 failed, 7 known divergences")
    );

    // The same difference in a case the list does not name is a failure.
    let Some(c) = Synthetic::new(&[], &[listed]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(before.divergences.len(), 3, "{}", before.summary());
    copy_tree(&c.negative(listed), &c.negative("number-exponent-copy"));
    let mut index = read_json(&c.dir.join("index.json"));
    index["negative"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"case": "number-exponent-copy"}));
    write_json(&c.dir.join("index.json"), &index);
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        [
            "negative/number-exponent-copy [results.inspect]",
            "negative/number-exponent-copy [results.load]",
            "negative/number-exponent-copy [results.readFrom]",
        ]
    );
    assert_eq!(report.divergences.len(), 3);

    // A listed case whose difference is not the listed one is a failure.
    std::fs::remove_dir_all(c.negative("number-exponent-copy")).unwrap();
    write_json(&c.dir.join("index.json"), &{
        let mut index = index;
        index["negative"].as_array_mut().unwrap().pop();
        index
    });
    let path = c.negative(listed).join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"n\":100}"));
    std::fs::write(&path, text.replace("\"n\":100}", "\"n\":101}")).unwrap();
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        [
            format!("negative/{listed} [results.inspect]"),
            format!("negative/{listed} [results.load]"),
            format!("negative/{listed} [results.readFrom]"),
        ]
    );
    assert!(report.divergences.is_empty());

    // Without the sibling case it must read like, the null line's difference is unexplained.
    let Some(c) = Synthetic::new(&[], &["null-line-in-open-tail"]) else {
        return;
    };
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(failed(&report).len(), 4, "{:?}", failed(&report));
    assert!(report.divergences.is_empty());
}

#[test]
fn an_expected_lone_surrogate_fails_its_check_only() {
    let case = "garbage-line-before-turn-end";
    let Some(c) = Synthetic::new(&[], &[case]) else {
        return;
    };
    let before = c.run(&Options::only(&[NEGATIVE]));
    let path = c.negative(case).join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let needle = "\"message\":\"corrupt session log: unparsable committed event at line 34\"";
    let pos = text.find(needle).expect("the inspect error");
    let mut edited = text.clone();
    edited.replace_range(
        pos..pos + needle.len(),
        "\"message\":\"corrupt session log: \\ud800 at line 34\"",
    );
    std::fs::write(&path, edited).unwrap();
    let report = c.run(&Options::only(&[NEGATIVE]));
    assert_eq!(
        added(&before, &report),
        [format!("negative/{case} [results.inspect]")]
    );
    let detail = &failure(&report, "results.inspect").detail;
    assert!(detail.contains("lone UTF-16 surrogate \\ud800"), "{detail}");
    assert!(report.passed > 0);
}

#[test]
fn golden_ends_with_the_three_counts_and_fails_on_a_failure() {
    let case = "garbage-line-before-turn-end";
    let Some(c) = Synthetic::new(&[], &[case, "number-exponent-upper-in-data"]) else {
        return;
    };
    let golden = env!("CARGO_BIN_EXE_golden");
    let out = std::process::Command::new(golden)
        .arg(&c.dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let last = stdout.lines().last().unwrap();
    let counts: Vec<&str> = last.split(", ").collect();
    assert_eq!(counts.len(), 3, "{last}");
    assert!(counts[0].ends_with(" passed"), "{last}");
    assert_eq!(counts[1], "0 failed", "{last}");
    assert_eq!(counts[2], "3 known divergences", "{last}");
    assert!(
        stdout.contains("\nnegative: "),
        "per-group counts: {stdout}"
    );

    c.edit_expected(case, |doc| {
        doc["results"]["inspect"]["error"]["name"] = Value::from("RangeError");
    });
    let out = std::process::Command::new(golden)
        .arg(&c.dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .ends_with(", 1 failed, 3 known divergences"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("FAIL negative/{case} [results.inspect]")),
        "{stdout}"
    );
}
