//! Replays the kept fuzzing corpus (`fuzz/corpus/TARGET/*`) through the fuzz targets' own entry
//! points on stable, so every input that once found new code keeps being checked in CI (fuzzing
//! itself needs nightly; see docs/FUZZING.md). An entry point panics on a bug.

#[path = "../../../fuzz/src/lib.rs"]
mod harness;

use std::path::{Path, PathBuf};

/// A fuzz target's name and the entry point its corpus goes through.
type Target = (&'static str, fn(&[u8]));

/// Each target and the entry point its corpus goes through.
const TARGETS: [Target; 9] = [
    ("control_msg", harness::control_msg),
    ("slot", harness::slot),
    ("launch_workload", harness::launch_workload),
    ("sim_workload", harness::sim_workload),
    ("swf", harness::swf),
    ("topo_synthetic", harness::topo_synthetic),
    ("topo_xml", harness::topo_xml),
    ("topo_sysfs", harness::topo_sysfs),
    ("cpu_list", harness::cpu_list),
];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

#[test]
fn every_kept_corpus_input_parses_without_panicking() {
    let mut replayed = 0;
    for (target, entry) in TARGETS {
        let Ok(dir) = std::fs::read_dir(corpus_dir(target)) else { continue };
        for file in dir {
            let path = file.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| entry(&data));
            assert!(outcome.is_ok(), "fuzz/corpus/{target}/{} panics", path.file_name().unwrap().to_string_lossy());
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} corpus inputs");
}

#[test]
fn every_target_has_a_kept_corpus() {
    for (target, _) in TARGETS {
        let dir = corpus_dir(target);
        let n = std::fs::read_dir(&dir).map_or(0, |d| d.count());
        assert!(n > 0, "{} holds no corpus", dir.display());
    }
}
