//! `cargo fuzz run zstd_frames`: see `conformance::fuzz_targets::zstd_frames`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| conformance::fuzz_targets::zstd_frames(data));
