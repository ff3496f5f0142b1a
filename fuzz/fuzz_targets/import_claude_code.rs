//! `cargo fuzz run import_claude_code`: see `conformance::fuzz_targets::import_claude_code`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::import_claude_code(data));
