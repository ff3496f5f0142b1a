//! `cargo fuzz run seed`: see `conformance::fuzz_targets::seed`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::seed(data));
