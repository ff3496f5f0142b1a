//! `cargo fuzz run jsonl_line`: see `conformance::fuzz_targets::jsonl_line`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::jsonl_line(data));
