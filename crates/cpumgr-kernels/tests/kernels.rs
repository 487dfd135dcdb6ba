//! Builds every kernel with gcc (and with clang + LLVM libomp, a test ignored where they are missing), runs each at one
//! and two threads with test sizes, and checks that the output parses, the per-region log shows
//! the team sizes the runtime was told to use, and the checksum does not depend on them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use cpumgr_kernels::{
    build, compiler_present, find, parse_region_log, parse_summary, BuildError, Size, Summary, KERNELS,
};

/// Kernel runs never overlap: two spinning teams on this 2-CPU machine would squeeze each other
/// (the very effect the manager exists to avoid) and make the tests crawl.
static RUNS: Mutex<()> = Mutex::new(());

fn out_dir(cc: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kernels-{cc}"))
}

/// The command for `name` at test size with `threads` threads, the region log on, passive
/// waiting (a busy machine then slows the barrier-heavy kernels down instead of stalling them;
/// the tests check values, not speed), and no inherited team limits.
fn command(bin: &Path, name: &str, threads: usize) -> Command {
    let kernel = find(name).unwrap_or_else(|| panic!("{name} is in the catalog"));
    let mut cmd = kernel.command(bin, Size::Test, threads);
    cmd.env("CPUMGR_KERNEL_LOG", "1")
        .env("OMP_WAIT_POLICY", "passive")
        .env_remove("OMP_THREAD_LIMIT")
        .env_remove("OMP_DYNAMIC");
    cmd
}

/// Runs a kernel command, one at a time, and returns its output.
fn run(mut cmd: Command) -> Output {
    let _guard = RUNS.lock().unwrap_or_else(|e| e.into_inner());
    cmd.output().expect("kernel binary starts")
}

/// Parses a successful run's result line and checks its region log against it: one log line
/// per region, numbered in order, every team of `team` threads.
fn checked(out: &Output, kernel: &str, team: usize) -> Summary {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{kernel} failed: {}\n{stderr}", out.status);
    let summary = parse_summary(&stdout).unwrap_or_else(|e| panic!("{kernel}: {e}\n{stdout}"));
    assert_eq!(summary.kernel, kernel);
    assert_eq!(summary.threads, team, "{kernel}: largest team");
    assert!(summary.seconds > 0.0, "{kernel}: seconds");
    assert!(summary.checksum.parse::<f64>().is_ok_and(f64::is_finite), "{kernel}: checksum");
    let log = parse_region_log(&stderr).unwrap_or_else(|e| panic!("{kernel}: {e}"));
    assert_eq!(log.len() as u64, summary.regions, "{kernel}: one log line per region");
    for (i, region) in log.iter().enumerate() {
        assert_eq!(region.kernel, kernel);
        assert_eq!(region.index, i as u64, "{kernel}: region order");
        assert_eq!(region.threads, team, "{kernel}: region {i} team");
    }
    summary
}

/// Every kernel at one and two threads: same checksum, teams as asked.
fn every_kernel_agrees_across_team_sizes(bin: &Path) {
    for kernel in KERNELS {
        let one = checked(&run(command(bin, kernel.name, 1)), kernel.name, 1);
        let two = checked(&run(command(bin, kernel.name, 2)), kernel.name, 2);
        assert_eq!(one.checksum, two.checksum, "{}: checksum at 1 and 2 threads", kernel.name);
        assert_eq!(one.regions, two.regions, "{}: region count", kernel.name);
    }
}

/// The kernels with `-rows` (the demo's weak scaling): `-rows n` is the square grid, a taller
/// grid's checksum does not depend on the team either, and fewer than 3 rows is refused.
fn tall_grids_agree_across_team_sizes(bin: &Path) {
    let checksum = |kernel: &str, args: &[&str], threads: usize| {
        let mut cmd = command(bin, kernel, threads);
        cmd.args(args);
        checked(&run(cmd), kernel, threads).checksum
    };
    // ltomcatv's 400 boundary records wrap the whole edge of the 96-row mesh (316 points), so its
    // bottom rows differ from the square mesh's.
    for (kernel, size) in [
        ("stencil", &["-n", "64", "-iters", "200"][..]),
        ("ltomcatv", &["-n", "64", "-outer", "3", "-sweeps", "20", "-io", "400"][..]),
    ] {
        let with = |rows: &'static str| [size, &["-rows", rows][..]].concat();
        let square = checksum(kernel, size, 1);
        assert_eq!(checksum(kernel, &with("64"), 2), square, "{kernel}: -rows n is the square grid");
        let tall = checksum(kernel, &with("96"), 1);
        assert_ne!(tall, square, "{kernel}: -rows 96 is another grid");
        assert_eq!(checksum(kernel, &with("96"), 2), tall, "{kernel}: a tall grid at 1 and 2 threads");
        let mut cmd = command(bin, kernel, 1);
        cmd.args(with("2"));
        let out = run(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{kernel} -rows 2: {stderr}");
        assert!(stderr.contains("-rows must be at least 3"), "{kernel}: {stderr}");
    }
}

/// epd's requests follow the diamond, and OMP_THREAD_LIMIT caps the teams, not the requests.
fn epd_requests_follow_the_diamond(bin: &Path) {
    let mut checksums = Vec::new();
    for limit in [1, 2] {
        let mut cmd = command(bin, "epd", 4);
        cmd.args(["-max", "4", "-n", "200000", "-cycles", "2"]);
        cmd.env("OMP_THREAD_LIMIT", limit.to_string());
        let out = run(cmd);
        assert!(out.status.success(), "epd: {}", String::from_utf8_lossy(&out.stderr));
        let log = parse_region_log(&String::from_utf8_lossy(&out.stderr)).unwrap();
        let requests: Vec<usize> = log.iter().map(|r| r.request).collect();
        assert_eq!(requests, [2, 4, 4, 2, 2, 4, 4, 2]);
        for r in &log {
            assert_eq!(r.threads, r.request.min(limit), "team of region {}", r.index);
        }
        let summary = parse_summary(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!(summary.extra["phases"], "8");
        checksums.push(summary.checksum);
    }
    assert_eq!(checksums[0], checksums[1]);
}

/// The diamond for odd and tiny peaks: 2, 4, ... below MAX, MAX twice, back down.
fn epd_diamond_shapes(bin: &Path) {
    for (max, expected) in [("1", vec![1, 1]), ("2", vec![2, 2]), ("5", vec![2, 4, 5, 5, 4, 2])] {
        let mut cmd = command(bin, "epd", 1);
        cmd.args(["-max", max, "-n", "1000", "-cycles", "1"]);
        let out = run(cmd);
        let log = parse_region_log(&String::from_utf8_lossy(&out.stderr)).unwrap();
        let requests: Vec<usize> = log.iter().map(|r| r.request).collect();
        assert_eq!(requests, expected, "-max {max}");
        // OMP_NUM_THREADS=1 does not cap omp_set_num_threads: teams follow the requests.
        assert!(log.iter().all(|r| r.threads == r.request), "-max {max}");
    }
}

/// Bad arguments exit 2 naming the option; a rigid team it cannot have exits 1.
fn bad_input_is_refused(bin: &Path) {
    for (args, needle) in [
        (vec!["-bogus", "1"], "unknown option '-bogus'"),
        (vec!["-n", "12x"], "option -n: '12x' is not an integer"),
        (vec!["-n", "2"], "option -n: 2 is below the minimum 3"),
        (vec!["-iters"], "option -iters needs a value"),
    ] {
        let mut cmd = command(bin, "stencil", 1);
        cmd.args(&args);
        let out = run(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no result line");
    }
    let mut cmd = command(bin, "rigid", 2);
    cmd.args(["-iters", "10"]).env("OMP_THREAD_LIMIT", "1");
    let out = run(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("asked for 2 threads, the runtime gave 1"), "{stderr}");
}

fn all_checks(bin: &Path) {
    every_kernel_agrees_across_team_sizes(bin);
    tall_grids_agree_across_team_sizes(bin);
    epd_requests_follow_the_diamond(bin);
    epd_diamond_shapes(bin);
    bad_input_is_refused(bin);
}

#[test]
fn gcc_libgomp_kernels() {
    let bin = build(&out_dir("gcc"), "gcc").unwrap_or_else(|e| panic!("{e}"));
    all_checks(&bin);
}

#[test]
#[cfg_attr(not(has_clang), ignore = "needs clang with LLVM libomp (apt-get install clang libomp-dev)")]
fn clang_libomp_kernels() {
    let bin = build(&out_dir("clang"), "clang").unwrap_or_else(|e| panic!("{e}"));
    all_checks(&bin);
}

#[test]
fn a_missing_compiler_is_a_clear_build_error() {
    let cc = "cpumgr-no-such-compiler";
    assert!(!compiler_present(cc));
    match build(&out_dir("missing"), cc) {
        Err(BuildError::Failed { cc: named, log, .. }) => {
            assert_eq!(named, cc);
            assert!(log.contains(cc), "make's log names the compiler: {log}");
        }
        other => panic!("expected a failed build, got {other:?}"),
    }
}
