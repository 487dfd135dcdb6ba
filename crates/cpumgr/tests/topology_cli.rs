//! `cpumgr topology` and `cpumgr decide` through the binary: every topology source, and bad input
//! that must exit with code 2 and name the file, line and field.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cpumgr-core/tests/fixtures")
}

fn cpumgr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpumgr")).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn prints_a_sysfs_tree_like_its_golden() {
    let root = fixtures().join("sysfs/server-2s");
    let o = cpumgr(&["topology", "--topology", root.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let golden = std::fs::read_to_string(fixtures().join("server-2s.golden")).unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), golden);
    // The same tree through CPUMGR_SYSFS_ROOT, as `host`.
    let o = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .args(["topology", "--json"])
        .env("CPUMGR_SYSFS_ROOT", &root)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"], "2 packages, 2 NUMA nodes, 2 L3, 16 cores, 32 CPUs");
    assert_eq!(v["levels"]["Core"], 16);
    assert_eq!(v["tree"]["type"], "Machine");
    assert_eq!(v["tree"]["children"][1]["cpus"], "8-15,24-31");
}

#[test]
fn reads_xml_synthetic_and_flat_specs() {
    let xml = fixtures().join("two-packages.xml");
    let o = cpumgr(&["topology", "--topology", xml.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        std::fs::read_to_string(fixtures().join("two-packages.xml.golden")).unwrap()
    );
    let o = cpumgr(&["topology", "--json", "--topology", "package:2 numa:2 core:8 pu:2"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], "0-63");
    let o = cpumgr(&["topology", "--json", "--topology", "6"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], "0-5");
}

#[test]
fn bad_topologies_exit_2_naming_where() {
    let o = cpumgr(&["topology", "--topology", "package:2 cores:4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("token 2") && stderr(&o).contains("cores"), "{}", stderr(&o));

    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("bad.xml");
    std::fs::write(
        &xml,
        "<topology>\n<object type=\"Machine\">\n<object type=\"PU\" os_index=\"x\"/>\n</object></topology>",
    )
    .unwrap();
    let o = cpumgr(&["topology", "--topology", xml.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.xml:3:") && stderr(&o).contains("os_index"), "{}", stderr(&o));

    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("devices/system/cpu/cpu0/topology")).unwrap();
    std::fs::write(sys.join("devices/system/cpu/online"), "0\n").unwrap();
    std::fs::write(sys.join("devices/system/cpu/cpu0/topology/core_id"), "zero\n").unwrap();
    let o = cpumgr(&["topology", "--topology", sys.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cpu0/topology/core_id") && stderr(&o).contains("zero"), "{}", stderr(&o));
}

#[test]
fn bad_programs_files_exit_2_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[[program]]\nname = \"a\"\nrequest = 2\n\n[[program]]\nname = \"b\"\nrequest = \"many\"\n", ":7:", "request"),
        ("[[program]]\nname = \"a\"\nrequest = 2\nmin = 3\n", ":1:", "`min`"),
        ("[[program]]\nname = \"a\"\nrequest = 2\nkind = \"rigid\"\n", ":1:", "`procs`"),
        ("[[program]]\nname = \"a\"\nrequest = 2\nweight = -1.0\n", ":1:", "`weight`"),
    ];
    for (k, (text, line, field)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("p{k}.toml"));
        std::fs::write(&f, text).unwrap();
        let o = cpumgr(&["decide", "--topology", "4", "--policy", "equipartition", "--programs", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "case {k}");
        let e = stderr(&o);
        assert!(e.contains(&format!("p{k}.toml{line}")) && e.contains(field), "case {k}: {e}");
    }
    let o = cpumgr(&["decide", "--topology", "4", "--policy", "pdpa:base=0", "--programs", "/nonexistent.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_bad_policy_parameter_exits_2_naming_the_key_and_range() {
    let programs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/programs.toml");
    let o = cpumgr(&["decide", "--topology", "4", "--policy", "pdpa:base=0", "--programs", programs.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("base") && e.contains("1..=4096"), "{e}");
    let o = cpumgr(&["decide", "--topology", "4", "--policy", "pdpa:bass=4", "--programs", programs.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("bass") && e.contains("base, step, min_eff, tests"), "{e}");
}

#[test]
fn a_bad_cpu_list_exits_2_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("cpumgr.sock");
    // The daemon checks its settings before it starts anything; a list that parsed by mistake
    // would start a manager, so the child is killed rather than waited on forever.
    let mut child = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .args(["daemon", "--cpus", "3-1", "--socket", socket.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("--cpus 3-1") && e.contains("backwards"), "{e}");
}

#[test]
fn policies_lists_every_policy_with_parameters_and_defaults() {
    let o = cpumgr(&["policies", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let listed = v["policies"].as_array().unwrap();
    let names: Vec<&str> = listed.iter().map(|p| p["name"].as_str().unwrap()).collect();
    let catalog: Vec<&str> = cpumgr_core::policies::CATALOG.iter().map(|i| i.name).collect();
    assert_eq!(names, catalog);
    for (p, info) in listed.iter().zip(cpumgr_core::policies::CATALOG) {
        assert!(p["paper"].is_string() && p["summary"].is_string(), "{p}");
        let params = p["params"].as_array().unwrap();
        assert_eq!(params.len(), info.params.len(), "{}", info.name);
        for (q, spec) in params.iter().zip(info.params) {
            assert_eq!(q["key"], spec.key);
            assert!(!q["default"].is_null() && q["help"].is_string(), "{}: {q}", info.name);
        }
    }
    let pdpa = listed.iter().find(|p| p["name"] == "pdpa").unwrap();
    let base = pdpa["params"].as_array().unwrap().iter().find(|q| q["key"] == "base").unwrap();
    assert_eq!((base["default"].as_i64(), base["min"].as_i64(), base["max"].as_i64()), (Some(4), Some(1), Some(4096)));

    let o = cpumgr(&["policies"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for info in cpumgr_core::policies::CATALOG {
        assert!(
            text.lines().any(|l| l.starts_with(info.name) && l.contains(info.paper)),
            "{} missing:\n{text}",
            info.name
        );
    }
    assert!(text.contains("base=4") && text.contains("min_eff=0.7") && text.contains("1..=4096"), "{text}");
}

#[test]
fn decide_prints_the_documented_json() {
    let programs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/programs.toml");
    let o = cpumgr(&[
        "decide",
        "--topology",
        "8",
        "--policy",
        "equipartition:redistribute=true",
        "--quanta",
        "2",
        "--json",
        "--programs",
        programs.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["policy"], "equipartition");
    assert_eq!(v["cpus"], 8);
    let q = &v["quanta"][1];
    assert_eq!(q["quantum"], 1);
    let counts: Vec<u64> = q["programs"].as_array().unwrap().iter().map(|p| p["count"].as_u64().unwrap()).collect();
    assert_eq!(counts, vec![2, 2, 4], "the rigid 4-process job runs whole; the rest is shared");
    assert!(q["programs"].as_array().unwrap().iter().all(|p| p["running"] == true && p["cpus"].is_string()));
}

/// A reader that closes the pipe early (`cpumgr policies | head -1`) ends the command quietly,
/// by SIGPIPE as any Unix filter, never with a panic message.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    for args in [&["policies"][..], &["topology", "--topology", "package:64 core:64 pu:2"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
        assert!(out.status.success() || out.status.signal() == Some(libc::SIGPIPE), "{args:?}: {:?}", out.status);
    }
}

/// Every policy of the catalog decides on the shipped example, the `os` baseline included (its
/// counts are thread counts on every CPU, which the placer is not asked to fit).
#[test]
fn every_policy_decides_on_the_example_programs() {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/programs.toml");
    let list = cpumgr(&["policies", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let names: Vec<String> = v
        .as_array()
        .or_else(|| v["policies"].as_array())
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.iter().any(|n| n == "os"), "{names:?}");
    for name in &names {
        let o = cpumgr(&[
            "decide",
            "--programs",
            example.to_str().unwrap(),
            "--policy",
            name,
            "--topology",
            "8",
            "--quanta",
            "3",
        ]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
}
