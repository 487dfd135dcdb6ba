//! A Go program under `cpumgr run`, unmodified: Go (1.25 and later) re-reads its CPU affinity
//! while it runs and sets GOMAXPROCS to it, so pinning it to its allocation is all it takes for
//! its scheduler to follow. Needs Go 1.25 or later on `PATH`; elsewhere the test is ignored.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;

/// Prints GOMAXPROCS every 50 ms for a minute.
const PROGRAM: &str = r#"package main

import (
	"fmt"
	"runtime"
	"time"
)

func main() {
	for i := 0; i < 1200; i++ {
		fmt.Println(runtime.GOMAXPROCS(0))
		time.Sleep(50 * time.Millisecond)
	}
}
"#;

#[test]
#[cfg_attr(not(has_go), ignore = "needs Go 1.25 or later on PATH")]
fn a_go_programs_gomaxprocs_follows_its_allocation() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.go"), PROGRAM).unwrap();
    // A module of Go 1.25: the GODEBUG defaults of its version follow the affinity
    // (`updatemaxprocs=1`); a GOPATH build gets older defaults.
    std::fs::write(tmp.path().join("go.mod"), "module procs\n\ngo 1.25\n").unwrap();
    let bin = tmp.path().join("procs");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(tmp.path())
        .env("GOCACHE", tmp.path().join("cache"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("go starts");
    assert!(built.status.success(), "go build failed: {}", String::from_utf8_lossy(&built.stderr));
    let mut d = Daemon::start("equipartition");
    let mut child = d.cpumgr(&["run", "--name", "go", "--"]).arg(&bin).stdout(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line.trim().parse::<u32>().unwrap_or(0)).is_err() {
                break;
            }
        }
    });
    d.runs.push(child);
    let wait_procs = |n: u32, what: &str| {
        let end = std::time::Instant::now() + DEADLINE;
        loop {
            match rx.recv_timeout(Duration::from_millis(500)) {
                Ok(p) if p == n => return,
                _ if std::time::Instant::now() >= end => panic!("timed out waiting for {what}"),
                _ => {}
            }
        }
    };
    wait_procs(2, "GOMAXPROCS 2 alone on two CPUs");
    let busy = d.run("busy", BUSY);
    wait_procs(1, "GOMAXPROCS 1 on its one CPU beside a busy program");
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(busy), nix::sys::signal::SIGKILL).unwrap();
    wait_procs(2, "GOMAXPROCS 2 when both CPUs come back");
}
