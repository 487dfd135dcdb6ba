//! Fuzz target `launch_workload`: feeds libFuzzer's bytes to [`cpumgr_fuzz::launch_workload`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::launch_workload(data));
