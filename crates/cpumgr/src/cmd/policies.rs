//! `cpumgr policies`: list every policy with its paper, rule and parameters.

use clap::Parser;
use cpumgr_core::policies::CATALOG;
use serde_json::json;

/// Arguments of `cpumgr policies`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Prints the catalog.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        let list: Vec<_> = CATALOG
            .iter()
            .map(|p| json!({"name": p.name, "paper": p.paper, "summary": p.summary, "params": p.params}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "policies": list }))?);
        return Ok(());
    }
    for p in CATALOG {
        println!("{:<14} [{}] {}", p.name, p.paper, p.summary);
        for s in p.params {
            println!("    {:<20} {} ({})", format!("{}={}", s.key, s.default_text()), s.help, s.range());
        }
    }
    Ok(())
}
