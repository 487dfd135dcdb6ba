//! Fuzz target `sim_workload`: feeds libFuzzer's bytes to [`cpumgr_fuzz::sim_workload`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::sim_workload(data));
