//! `cpumgr topology`: print the machine's tree.

use clap::Parser;

/// Arguments of `cpumgr topology`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Topology to print instead of this machine's.
    #[arg(long, env = "CPUMGR_TOPOLOGY")]
    topology: Option<String>,
}

/// Prints the tree.
pub fn run(args: Args) -> anyhow::Result<()> {
    let t = crate::topology_arg::load(args.topology.as_deref())?;
    print!("{t}");
    Ok(())
}
