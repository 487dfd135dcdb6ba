//! `cpumgr daemon`: the manager in the foreground until SIGINT or SIGTERM, after which every
//! program it stopped is continued and every affinity it narrowed is widened back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::manager_args::ManagerArgs;

/// Arguments of `cpumgr daemon`.
#[derive(Debug, Parser)]
pub struct Args {
    #[command(flatten)]
    manager: ManagerArgs,
}

/// Runs the daemon.
pub fn run(args: Args) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    let running = args.manager.start()?;
    tracing::info!(socket = %running.socket.display(), policy = args.manager.policy, "cpumgr daemon started");
    eprintln!("cpumgr daemon: listening on {}", running.socket.display());
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    running.shutdown();
    eprintln!("cpumgr daemon: stopped; every program continued and unpinned");
    Ok(())
}
