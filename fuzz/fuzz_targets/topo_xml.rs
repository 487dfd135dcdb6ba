//! Fuzz target `topo_xml`: feeds libFuzzer's bytes to [`cpumgr_fuzz::topo_xml`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cpumgr_fuzz::topo_xml(data));
