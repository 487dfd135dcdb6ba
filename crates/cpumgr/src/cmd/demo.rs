//! `cpumgr demo`: the main job in one command. Builds the test kernels (their sources are inside
//! this binary), runs the built-in mixed workload (`workloads/demo.toml`) under every baseline
//! (plain OS, processor sets, passive and dynamic OpenMP) and under cpumgr policies with the
//! OpenMP adapter preloaded, prints the comparison, and writes `cpumgr-demo.html`.

use std::path::PathBuf;

use clap::Parser;

use super::launch::{launch, Args as LaunchArgs};

/// The demo's workload.
const WORKLOAD: &str = include_str!("../../../../workloads/demo.toml");

/// Arguments of `cpumgr demo`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Times to run each configuration (alternating).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Policies to compare with the baselines.
    #[arg(long, default_value = "equipartition:redistribute=true,pdpa")]
    policy: String,
    /// Baselines.
    #[arg(long, default_value = "os,static,passive,dynamic")]
    baseline: String,
    /// Where to write the report.
    #[arg(long, default_value = "cpumgr-demo.html")]
    report: PathBuf,
    /// C compiler with OpenMP for the kernels.
    #[arg(long, env = "CC", default_value = "gcc")]
    cc: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Policy runs leave unmanaged processes the CPUs they use (`cpumgr launch --yield-outside`).
    #[arg(long)]
    yield_outside: bool,
    /// End a run still going after this long (`cpumgr launch --time-limit`): plain OS with
    /// spinning teams can take minutes on a large machine; `none` for no limit.
    #[arg(long, default_value = "2m")]
    time_limit: String,
}

/// Runs the demo: the launcher builds the kernels its workload names, with `--cc`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let launch_args = LaunchArgs {
        workload: PathBuf::from("workloads/demo.toml"),
        policy: vec![args.policy],
        baseline: args.baseline.split(',').map(String::from).collect(),
        quantum: "100ms".into(),
        repeat: args.repeat,
        cpus: None,
        kernels: None,
        cc: args.cc,
        report: Some(args.report),
        trace: None,
        json: args.json,
        no_omp: false,
        yield_outside: args.yield_outside,
        time_limit: Some(args.time_limit),
    };
    launch(&launch_args, WORKLOAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are valid input for the launcher they are handed to (a default the duration
    /// parser refused once stopped every `cpumgr demo` before it ran).
    #[test]
    fn the_defaults_parse() {
        let args = Args::try_parse_from(["demo"]).unwrap();
        let limit = super::super::launch::time_limit(Some(&args.time_limit)).unwrap();
        assert_eq!(limit, Some(std::time::Duration::from_secs(120)));
        for p in super::super::launch::split_policies(&args.policy) {
            cpumgr_core::policies::build(&p).unwrap();
        }
        for b in args.baseline.split(',') {
            assert!(cpumgr_launch::Config::parse(b).is_some(), "{b}");
        }
    }
}
