//! `cargo fuzz run replace`: see `conformance::fuzz_targets::replace`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::replace(data));
