//! Fuzz target `topo_sysfs`: feeds libFuzzer's bytes to [`cpumgr_fuzz::topo_sysfs`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::topo_sysfs(data));
