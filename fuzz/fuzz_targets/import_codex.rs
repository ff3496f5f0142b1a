//! `cargo fuzz run import_codex`: see `conformance::fuzz_targets::import_codex`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::import_codex(data));
