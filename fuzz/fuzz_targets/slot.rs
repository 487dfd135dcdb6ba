//! Fuzz target `slot`: feeds libFuzzer's bytes to [`cpumgr_fuzz::slot`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::slot(data));
