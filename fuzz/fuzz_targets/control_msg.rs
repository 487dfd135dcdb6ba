//! Fuzz target `control_msg`: feeds libFuzzer's bytes to [`cpumgr_fuzz::control_msg`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::control_msg(data));
