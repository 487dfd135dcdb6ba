//! Fuzz target `topo_synthetic`: feeds libFuzzer's bytes to [`cpumgr_fuzz::topo_synthetic`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::topo_synthetic(data));
