//! Fuzz target `swf`: feeds libFuzzer's bytes to [`cpumgr_fuzz::swf`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::swf(data));
