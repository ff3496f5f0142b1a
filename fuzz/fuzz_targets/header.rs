//! `cargo fuzz run header`: see `conformance::fuzz_targets::header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::header(data));
