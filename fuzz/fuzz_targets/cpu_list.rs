//! Fuzz target `cpu_list`: feeds libFuzzer's bytes to [`cpumgr_fuzz::cpu_list`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::cpu_list(data));
