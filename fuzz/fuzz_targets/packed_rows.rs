//! `cargo fuzz run packed_rows`: see `conformance::fuzz_targets::packed_rows`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::packed_rows(data));
