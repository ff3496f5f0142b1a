//! Replays every committed fuzz corpus (`fuzz/corpus/<target>/`) through the fuzz target
//! bodies of `conformance::fuzz_targets`, so the corpora run on a stable toolchain without
//! cargo-fuzz. `FUZZ_CORPUS_ROOT=<dir>` replays `<dir>/<target>/` instead (for example a
//! corpus grown by a longer `cargo fuzz run`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use conformance::fuzz_targets::{TARGETS, Target};

fn corpus_root() -> PathBuf {
    std::env::var_os("FUZZ_CORPUS_ROOT").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus"),
        PathBuf::from,
    )
}

/// Runs `target` on every file of its corpus; returns how many inputs ran.
fn replay(name: &str, target: Target) -> usize {
    let dir = corpus_root().join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&data))) {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{}: {why}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {} corpus inputs fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    files.len()
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let target = TARGETS
                .iter()
                .find(|(n, _)| *n == stringify!($name))
                .map(|(_, t)| *t)
                .expect("a listed target");
            let n = replay(stringify!($name), target);
            eprintln!("{}: {n} corpus inputs replayed", stringify!($name));
        }
    )*};
}

corpus_tests!(
    jsonl_line,
    zstd_frames,
    packed_rows,
    header,
    seed,
    replace,
    import_codex,
    import_claude_code,
);

#[test]
fn every_target_has_a_test_and_a_fuzz_binary() {
    let tested = [
        "jsonl_line",
        "zstd_frames",
        "packed_rows",
        "header",
        "seed",
        "replace",
        "import_codex",
        "import_claude_code",
    ];
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/fuzz_targets");
    for (name, _) in TARGETS {
        assert!(tested.contains(&name), "{name} has no corpus test");
        let bin = fuzz.join(format!("{name}.rs"));
        assert!(bin.is_file(), "{} is missing", bin.display());
    }
}
