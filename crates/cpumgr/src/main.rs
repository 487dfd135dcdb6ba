//! `cpumgr`: the command-line front end of the CPU manager. Each subcommand lives in its own
//! module under `cmd/`; this file only parses the command line and maps errors to exit codes
//! (0 ok, 1 runtime failure, 2 bad usage or bad input).

mod cmd;
mod input;
mod kernels;
mod topology_arg;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A CPU manager for multicore machines that run several parallel programs at once.
#[derive(Debug, Parser)]
#[command(name = "cpumgr", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the machine's topology (or a synthetic or XML one) as a tree.
    Topology(cmd::topology::Args),
    /// List every scheduling policy with its parameters and defaults.
    Policies(cmd::policies::Args),
    /// Run a policy and the placer for a few quanta over a list of programs.
    Decide(cmd::decide::Args),
    /// The main job: build the test kernels, run a mixed workload under baselines and policies, compare.
    Demo(cmd::demo::Args),
    /// Run a workload of real programs under several configurations and compare them.
    Launch(cmd::launch::Args),
    /// Rebuild an HTML report from saved traces.
    Report(cmd::report::Args),
    /// Work with traces (export to Perfetto or Paraver).
    Trace(cmd::trace::Args),
    /// Simulate policies on a modelled workload (TOML, SWF trace or paper preset) and compare them.
    Sim(cmd::sim::Args),
    /// Run the CPU manager in the foreground.
    Daemon(cmd::daemon::Args),
    /// Run a command as a program registered with the manager (starting one if none runs).
    Run(cmd::run::Args),
    /// Manage a process that already runs, until it exits (or this command is interrupted).
    Attach(cmd::attach::Args),
    /// Supervise one Slurm job step as one program (started by the SPANK plugin, docs/SLURM.md).
    Step(cmd::step::Args),
    /// Show the manager's policy, CPUs and programs.
    Status(cmd::status::Args),
    /// A live view of the manager: CPUs along the topology coloured by owner, programs, keys to steer.
    Top(cmd::top::Args),
    /// Change the running manager's policy.
    Policy(cmd::policy::Args),
    /// Change the running manager's quantum.
    Quantum(cmd::quantum::Args),
}

impl Command {
    /// Whether the command only prints a result and exits: `cpumgr status | head -1` should end
    /// it quietly, as it ends `ls`, not with a panic on the closed pipe.
    fn prints_and_exits(&self) -> bool {
        matches!(
            self,
            Command::Topology(_)
                | Command::Policies(_)
                | Command::Decide(_)
                | Command::Report(_)
                | Command::Trace(_)
                | Command::Status(_)
                | Command::Policy(_)
                | Command::Quantum(_)
        )
    }
}

/// Restores the default action of SIGPIPE (the Rust runtime ignores it, so a write to a closed
/// pipe fails, and `println!` panics on it): the process then ends at its first write to a
/// closed pipe, as a Unix filter does. The control socket's sends pass `MSG_NOSIGNAL`, so a
/// manager that goes away is still an error, not a signal.
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("CPUMGR_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if cli.command.prints_and_exits() {
        end_quietly_on_a_closed_pipe();
    }
    let result = match cli.command {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Policies(a) => cmd::policies::run(a),
        Command::Decide(a) => cmd::decide::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Launch(a) => cmd::launch::run_launch(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Daemon(a) => cmd::daemon::run(a),
        Command::Run(a) => cmd::run::run(a).map(|code| std::process::exit(code as i32)),
        Command::Attach(a) => cmd::attach::run(a),
        Command::Step(a) => cmd::step::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Top(a) => cmd::top::run(a),
        Command::Policy(a) => cmd::policy::run(a),
        Command::Quantum(a) => cmd::quantum::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cpumgr: {e:#}");
            if e.downcast_ref::<input::InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
