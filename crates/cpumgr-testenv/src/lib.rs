//! What the environment-dependent tests need, probed once by a crate's build script and told to
//! the compiler as cfgs, so that a test the machine cannot run is reported by the test runner as
//! `ignored, needs clang` instead of passing without having run:
//!
//! ```text
//! // build.rs
//! fn main() {
//!     cpumgr_testenv::probe(&[cpumgr_testenv::Need::Clang]);
//! }
//! // a test
//! #[test]
//! #[cfg_attr(not(has_clang), ignore = "needs clang with LLVM libomp (apt-get install clang libomp-dev)")]
//! fn clang_libomp_kernels() { /* ... */ }
//! ```
//!
//! The build script runs again when `PATH` (or another variable a probe reads) changes, when a
//! tool it found changes, and, for a tool it did not find, when a directory of `PATH` changes (a
//! package installed); not on every build. `CPUMGR_TESTENV_REQUIRE` (a comma-separated list of
//! cfg names, or `all`) makes a missing requirement a build error instead: CI sets it for what it
//! installs, so a broken install cannot turn tests into ignored ones unseen.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Something a test needs from the machine it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Effective uid 0 (creating users, writing cgroups): cfg `is_root`.
    Root,
    /// clang that builds and runs an OpenMP program with LLVM libomp (the kernels' `make probe`):
    /// cfg `has_clang`.
    Clang,
    /// An MPI implementation, `mpicc` and `mpiexec`: cfg `has_mpi`.
    Mpi,
    /// Open MPI beside whichever MPI is the default, by Debian's names `mpicc.openmpi` and
    /// `mpirun.openmpi`: cfg `has_openmpi`.
    OpenMpi,
    /// Go 1.25 or later, whose runtime follows the CPU affinity: cfg `has_go`.
    Go,
    /// Headless Chromium (`$CPUMGR_CHROMIUM`, else `chromium` or `google-chrome` on `PATH`): cfg
    /// `has_chromium`.
    Chromium,
    /// A cpuset cgroup hierarchy mounted read-write, whose directory of this process this user
    /// may write (v1; v2 with the controller offered, from the root cgroup): cfg `has_cpusets`.
    /// Tests keep their own check too: permission bits can say yes where the kernel says no.
    Cpusets,
    /// At least three CPUs in this process's affinity: cfg `has_3_cpus`. Tests keep their own
    /// check too: they may run under a narrower affinity (`taskset`) than the build had.
    ThreeCpus,
    /// The shared SWF traces (`shared/data/swf/` beside the workspace): cfg `has_shared_traces`.
    SharedTraces,
    /// Root and a Slurm to start (`munged`, `slurmctld`, `slurmd`, `srun`, `scancel`, `sinfo` on
    /// `PATH` or in `/usr/sbin`, and `slurm/spank.h` to build the plugin): cfg `has_slurm`.
    Slurm,
    /// ninja 1.13 or later, a jobserver client: cfg `has_ninja_jobserver`.
    NinjaJobserver,
    /// make and a C compiler (`make`, `cc` on `PATH`): cfg `has_make`.
    Make,
    /// g++ and oneTBB (`include/oneapi/tbb.h`, `lib/libtbb.so.12`) at `$CPUMGR_TBB_PREFIX`, else
    /// in the workspace's `target/tbbenv` (scripts/test-all installs it there from PyPI): cfg
    /// `has_onetbb`. A `target/tbbenv` made after the build is seen once build.rs or
    /// `CPUMGR_TBB_PREFIX` changes (watching `target/` would rerun the probe at every build).
    OneTbb,
    /// The cgroup v1 freezer and cpuset hierarchies mounted under `/sys/fs/cgroup` (Slurm's
    /// cgroup v1 plugins use them): cfg `has_cgroup_v1`. Tests keep their own check too: a mount
    /// can come or go after the build.
    CgroupV1,
}

impl Need {
    /// Every need, in the order they are documented.
    pub const ALL: [Need; 14] = [
        Need::Root,
        Need::Clang,
        Need::Mpi,
        Need::OpenMpi,
        Need::Go,
        Need::Chromium,
        Need::Cpusets,
        Need::ThreeCpus,
        Need::SharedTraces,
        Need::Slurm,
        Need::NinjaJobserver,
        Need::Make,
        Need::OneTbb,
        Need::CgroupV1,
    ];

    /// The cfg set when the need is met.
    pub fn cfg(self) -> &'static str {
        match self {
            Need::Root => "is_root",
            Need::Clang => "has_clang",
            Need::Mpi => "has_mpi",
            Need::OpenMpi => "has_openmpi",
            Need::Go => "has_go",
            Need::Chromium => "has_chromium",
            Need::Cpusets => "has_cpusets",
            Need::ThreeCpus => "has_3_cpus",
            Need::SharedTraces => "has_shared_traces",
            Need::Slurm => "has_slurm",
            Need::NinjaJobserver => "has_ninja_jobserver",
            Need::Make => "has_make",
            Need::OneTbb => "has_onetbb",
            Need::CgroupV1 => "has_cgroup_v1",
        }
    }

    /// `Ok` when this machine meets the need, else why not; `rerun` collects what the answer
    /// depends on (`cargo::rerun-if-…` lines).
    fn check(self, rerun: &mut Vec<String>) -> Result<(), String> {
        match self {
            Need::Root => {
                rerun.push("rerun-if-env-changed=USER".into());
                match effective_uid() {
                    Some(0) => Ok(()),
                    Some(uid) => Err(format!("runs as uid {uid}, not root")),
                    None => Err("no Uid line in /proc/self/status".into()),
                }
            }
            Need::Clang => {
                let clang = tool("clang", rerun)?;
                let kernels = workspace().join("kernels");
                rerun.push(format!("rerun-if-changed={}", kernels.join("Makefile").display()));
                let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?).join("testenv-clang");
                let made = Command::new("make")
                    .args(["-s", "-C"])
                    .arg(&kernels)
                    .arg(format!("OUT={}", out.display()))
                    .arg(format!("CC={}", clang.display()))
                    .arg("probe")
                    .output()
                    .map_err(|e| format!("cannot run make: {e}"))?;
                if made.status.success() {
                    Ok(())
                } else {
                    Err(format!("clang cannot build OpenMP programs: {}", String::from_utf8_lossy(&made.stderr).trim()))
                }
            }
            Need::Mpi => tools_run(&["mpicc", "mpiexec"], rerun),
            Need::OpenMpi => tools_run(&["mpicc.openmpi", "mpirun.openmpi"], rerun),
            Need::Go => {
                let go = tool("go", rerun)?;
                rerun.push("rerun-if-env-changed=GOTOOLCHAIN".into());
                let out = Command::new(&go).arg("version").env("GOTOOLCHAIN", "local").output();
                let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
                match go_version(&text) {
                    Some(v) if v >= (1, 25) => Ok(()),
                    Some((major, minor)) => {
                        Err(format!("{} is Go {major}.{minor}; 1.25 or later is needed", go.display()))
                    }
                    None => Err(format!("`{} version` printed no version: {text:?}", go.display())),
                }
            }
            Need::Chromium => {
                rerun.push("rerun-if-env-changed=CPUMGR_CHROMIUM".into());
                if let Some(named) = std::env::var_os("CPUMGR_CHROMIUM").filter(|p| !p.is_empty()) {
                    rerun.push(format!("rerun-if-changed={}", Path::new(&named).display()));
                    return if Path::new(&named).is_file() {
                        Ok(())
                    } else {
                        Err(format!("CPUMGR_CHROMIUM={} is no file", Path::new(&named).display()))
                    };
                }
                let names = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
                let mut missing = Vec::new();
                for name in names {
                    match tool(name, &mut missing) {
                        Ok(found) => {
                            rerun.push(format!("rerun-if-changed={}", found.display()));
                            return Ok(());
                        }
                        Err(_) => continue,
                    }
                }
                rerun.extend(missing.into_iter().filter(|l| l.starts_with("rerun-if-changed=")));
                Err(format!("none of {} is on PATH", names.join(", ")))
            }
            Need::Cpusets => cpusets(),
            Need::ThreeCpus => {
                let n = allowed_cpus().ok_or("no Cpus_allowed_list in /proc/self/status")?;
                if n >= 3 {
                    Ok(())
                } else {
                    Err(format!("{n} CPUs in this process's affinity"))
                }
            }
            Need::SharedTraces => {
                let files = ["lublin_256.swf", "hpc2n-first3170.swf"].map(shared_trace);
                // The nearest directory that exists: it changes when the rest appears.
                let watched = files[0].ancestors().skip(1).find(|d| d.is_dir()).unwrap_or(Path::new("/"));
                rerun.push(format!("rerun-if-changed={}", watched.display()));
                match files.iter().find(|f| !f.is_file()) {
                    None => Ok(()),
                    Some(missing) => Err(format!("{} is missing", missing.display())),
                }
            }
            Need::Slurm => {
                Need::Root.check(rerun)?;
                for name in ["munged", "slurmctld", "slurmd", "srun", "scancel", "sinfo"] {
                    if tool(name, rerun).is_err() {
                        let sbin = ["/usr/sbin", "/sbin"].map(|d| Path::new(d).join(name));
                        sbin.iter().find(|p| p.is_file()).ok_or(format!("{name} is not on PATH nor in /usr/sbin"))?;
                    }
                }
                let header = Path::new("/usr/include/slurm/spank.h");
                rerun.push(format!("rerun-if-changed={}", header.parent().and_then(Path::parent).unwrap().display()));
                if header.is_file() {
                    Ok(())
                } else {
                    Err(format!("no {} (libslurm-dev)", header.display()))
                }
            }
            Need::NinjaJobserver => {
                let ninja = tool("ninja", rerun)?;
                let out = Command::new(&ninja).arg("--version").output().map_err(|e| format!("ninja: {e}"))?;
                let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
                let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
                match (parts.next(), parts.next()) {
                    (Some(major), Some(minor)) if major > 1 || minor >= 13 => Ok(()),
                    _ => Err(format!("ninja {v} is older than 1.13 (no jobserver client)")),
                }
            }
            Need::Make => tools_run(&["make", "cc"], rerun),
            Need::OneTbb => {
                tool("g++", rerun)?;
                rerun.push("rerun-if-env-changed=CPUMGR_TBB_PREFIX".into());
                let given = std::env::var_os("CPUMGR_TBB_PREFIX").filter(|p| !p.is_empty()).map(PathBuf::from);
                onetbb_at(&given.unwrap_or_else(|| workspace().join("target/tbbenv")), rerun)
            }
            Need::CgroupV1 => {
                let missing: Vec<&str> = ["freezer", "cpuset"]
                    .into_iter()
                    .filter(|c| !Path::new("/sys/fs/cgroup").join(c).join("tasks").is_file())
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!("no cgroup v1 {} hierarchy under /sys/fs/cgroup", missing.join(", ")))
                }
            }
        }
    }
}

/// `Ok` when the install prefix `prefix` holds oneTBB's header and library. Watches what exists
/// (a missing path watched would rerun the probe at every build): the files, else the prefix, in
/// which an install may be under way.
fn onetbb_at(prefix: &Path, rerun: &mut Vec<String>) -> Result<(), String> {
    let files = [prefix.join("include/oneapi/tbb.h"), prefix.join("lib/libtbb.so.12")];
    let watched: Vec<&Path> = if files.iter().all(|f| f.is_file()) {
        files.iter().map(PathBuf::as_path).collect()
    } else {
        Some(prefix).filter(|p| p.is_dir()).into_iter().collect()
    };
    rerun.extend(watched.iter().map(|p| format!("rerun-if-changed={}", p.display())));
    match files.iter().find(|f| !f.is_file()) {
        None => Ok(()),
        Some(missing) => Err(format!("no oneTBB: {} is missing", missing.display())),
    }
}

/// Whether the cgroup v1 hierarchies of [`Need::CgroupV1`] are mounted now (a test's own check).
pub fn cgroup_v1() -> bool {
    Need::CgroupV1.check(&mut Vec::new()).is_ok()
}

/// Probes `needs` and tells cargo the cfgs of those met (every cfg of [`Need::ALL`] is declared,
/// so that `#[cfg_attr(not(...))]` on any of them is checked), and what to rerun on. Panics,
/// naming the reason, for a need that `CPUMGR_TESTENV_REQUIRE` lists and the machine lacks.
pub fn probe(needs: &[Need]) {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed={REQUIRE}");
    for need in Need::ALL {
        println!("cargo::rustc-check-cfg=cfg({})", need.cfg());
    }
    let required = std::env::var(REQUIRE).unwrap_or_default();
    let required = |n: Need| required.split(',').map(str::trim).any(|r| r == "all" || r == n.cfg());
    let mut rerun = Vec::new();
    for &need in needs {
        match need.check(&mut rerun) {
            Ok(()) => println!("cargo::rustc-cfg={}", need.cfg()),
            Err(why) if required(need) => panic!("{REQUIRE} names {} but {why}", need.cfg()),
            Err(_) => {}
        }
    }
    rerun.sort();
    rerun.dedup();
    for line in rerun {
        println!("cargo::{line}");
    }
}

/// The variable listing the needs whose absence fails the build.
pub const REQUIRE: &str = "CPUMGR_TESTENV_REQUIRE";

/// The shared SWF trace `name`: `shared/data/swf/NAME` beside the workspace, where
/// [`Need::SharedTraces`] looks (tests use it as a dev-dependency).
pub fn shared_trace(name: &str) -> PathBuf {
    workspace().join("../shared/data/swf").join(name)
}

/// The workspace root (this crate is `crates/cpumgr-testenv` in it).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first `name` on `PATH`. Adds what the answer depends on to `rerun`: the file found, or
/// every directory of `PATH` (a directory changes when a package puts a file in it).
fn tool(name: &str, rerun: &mut Vec<String>) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).filter(|d| d.is_absolute() && d.is_dir()).collect();
    match dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
        Some(found) => {
            rerun.push(format!("rerun-if-changed={}", found.display()));
            Ok(found)
        }
        None => {
            rerun.extend(dirs.iter().map(|d| format!("rerun-if-changed={}", d.display())));
            Err(format!("{name} is not on PATH"))
        }
    }
}

/// `Ok` when every tool of `names` is on `PATH` and runs `--version`.
fn tools_run(names: &[&str], rerun: &mut Vec<String>) -> Result<(), String> {
    for name in names {
        runs(&tool(name, rerun)?, &["--version"])?;
    }
    Ok(())
}

/// `Ok` when `tool ARGS` starts and succeeds.
fn runs(tool: &Path, args: &[&str]) -> Result<(), String> {
    match Command::new(tool).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            Err(format!("{} {} failed: {}", tool.display(), args.join(" "), String::from_utf8_lossy(&o.stderr).trim()))
        }
        Err(e) => Err(format!("{} does not start: {e}", tool.display())),
    }
}

/// `(major, minor)` of `go version`'s `go version go1.25.1 linux/amd64`.
fn go_version(text: &str) -> Option<(u32, u32)> {
    let v = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("go").filter(|v| v.starts_with(|c: char| c.is_ascii_digit())))?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A field of `/proc/self/status`.
fn status_field(field: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_string()))
}

/// The effective uid (the second of `Uid:`'s real, effective, saved, filesystem).
fn effective_uid() -> Option<u32> {
    status_field("Uid")?.split_whitespace().nth(1)?.parse().ok()
}

/// How many CPUs `Cpus_allowed_list` (`0-3,8,10-11`) names.
fn allowed_cpus() -> Option<usize> {
    let list = status_field("Cpus_allowed_list")?;
    let mut n = 0;
    for range in list.split(',').filter(|r| !r.is_empty()) {
        n += match range.split_once('-') {
            Some((a, b)) => b.parse::<usize>().ok()?.checked_sub(a.parse().ok()?)? + 1,
            None => 1,
        };
    }
    Some(n)
}

/// Whether a cpuset hierarchy is mounted read-write with this process's directory in it
/// writable by this user (root, or the directory's owner: a delegated subtree).
fn cpusets() -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let uid = effective_uid().ok_or("no Uid line in /proc/self/status")?;
    let mut why = Vec::new();
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS] - FSTYPE SOURCE SUPEROPTIONS
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let (l, r): (Vec<&str>, Vec<&str>) = (left.split(' ').collect(), right.split(' ').collect());
        let (Some(point), Some(options), Some(fstype), Some(super_options)) = (l.get(4), l.get(5), r.first(), r.get(2))
        else {
            continue;
        };
        let v2 = *fstype == "cgroup2";
        if !(v2 || (*fstype == "cgroup" && super_options.split(',').any(|o| o == "cpuset"))) {
            continue;
        }
        if options.split(',').any(|o| o == "ro") {
            why.push(format!("{point} is mounted read-only"));
            continue;
        }
        // /proc/self/cgroup: `0::/path` (v2) or `N:cpuset,...:/path` (v1).
        let own = cgroups.lines().find_map(|c| {
            let mut f = c.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let mine = if v2 { controllers.is_empty() } else { controllers.split(',').any(|c| c == "cpuset") };
            mine.then(|| Path::new(point).join(path.trim_start_matches('/')))
        });
        let Some(own) = own else { continue };
        if v2 {
            let offered = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
            if !offered.split_whitespace().any(|c| c == "cpuset") {
                why.push(format!("{}: the cpuset controller is not offered", own.display()));
                continue;
            }
            // v2 refuses (EBUSY) to enable a controller below a cgroup that holds processes, as
            // this one does (this process); only the root cgroup is exempt.
            if own != Path::new(point) {
                why.push(format!("{}: cgroup v2 enables cpuset below it only if it holds no process", own.display()));
                continue;
            }
        }
        match std::fs::metadata(&own) {
            Ok(m) if uid == 0 || m.uid() == uid => return Ok(()),
            Ok(_) => why.push(format!("{} is not this user's", own.display())),
            Err(e) => why.push(format!("{}: {e}", own.display())),
        }
    }
    if why.is_empty() {
        why.push("no cgroup hierarchy with the cpuset controller is mounted".into());
    }
    Err(why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_versions_are_read_from_go_version() {
        assert_eq!(go_version("go version go1.25.1 linux/amd64\n"), Some((1, 25)));
        assert_eq!(go_version("go version go1.9 linux/amd64"), Some((1, 9)));
        assert_eq!(go_version("go version devel +abc linux/amd64"), None);
    }

    #[test]
    fn every_need_has_its_own_cfg() {
        let mut cfgs: Vec<_> = Need::ALL.iter().map(|n| n.cfg()).collect();
        cfgs.sort();
        cfgs.dedup();
        assert_eq!(cfgs.len(), Need::ALL.len());
    }

    #[test]
    fn a_tool_not_on_path_is_watched_through_the_path_directories() {
        let mut rerun = Vec::new();
        let err = tool("cpumgr-testenv-no-such-tool", &mut rerun).unwrap_err();
        assert!(err.contains("not on PATH"), "{err}");
        assert!(rerun.iter().all(|l| l.starts_with("rerun-if-changed=/")), "{rerun:?}");
        let sh = tool("sh", &mut Vec::new()).expect("sh is on PATH");
        assert!(sh.is_file());
    }

    #[test]
    fn a_onetbb_prefix_needs_its_header_and_library_and_watches_what_exists() {
        let dir = std::env::temp_dir().join(format!("cpumgr-testenv-tbb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut rerun = Vec::new();
        assert!(onetbb_at(&dir, &mut rerun).is_err());
        assert!(rerun.is_empty(), "nothing missing is watched: {rerun:?}");
        std::fs::create_dir_all(dir.join("include/oneapi")).unwrap();
        std::fs::write(dir.join("include/oneapi/tbb.h"), "").unwrap();
        let err = onetbb_at(&dir, &mut rerun).unwrap_err();
        assert!(err.contains("lib/libtbb.so.12"), "{err}");
        assert_eq!(rerun, [format!("rerun-if-changed={}", dir.display())], "the prefix an install is under way in");
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join("lib/libtbb.so.12"), "").unwrap();
        rerun.clear();
        assert_eq!(onetbb_at(&dir, &mut rerun), Ok(()));
        assert_eq!(rerun.len(), 2, "both files: {rerun:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_process_has_at_least_one_cpu() {
        assert!(allowed_cpus().is_some_and(|n| n >= 1));
    }
}
