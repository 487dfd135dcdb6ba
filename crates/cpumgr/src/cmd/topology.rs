//! `cpumgr topology`: print the machine's tree, like `lstopo --of console`, or as JSON.

use clap::Parser;
use cpumgr_core::topology::{Level, Topology};
use serde_json::{json, Value};

/// Arguments of `cpumgr topology`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Topology to print instead of this machine's: a synthetic spec, an hwloc XML file, a sysfs
    /// root directory, or a CPU count.
    #[arg(long, env = "CPUMGR_TOPOLOGY")]
    topology: Option<String>,
    /// Print JSON instead of the tree.
    #[arg(long)]
    json: bool,
}

/// The JSON form: `{"summary", "cpus", "levels": {level: count}, "tree": {type, logical,
/// os_index, cpus, children}}`; implicit domains (levels the source did not describe) are left
/// out of the tree and their children attached to the nearest described ancestor.
pub fn to_json(t: &Topology) -> Value {
    fn node(t: &Topology, idx: usize) -> Vec<Value> {
        let d = &t.domains()[idx];
        let children: Vec<Value> = d.children.iter().flat_map(|&c| node(t, c)).collect();
        if d.implicit {
            return children;
        }
        let mut v = json!({"type": d.level.hwloc_name(), "logical": d.logical, "cpus": d.cpus.to_string()});
        if let Some(os) = d.os_index {
            v["os_index"] = json!(os);
        }
        if !children.is_empty() {
            v["children"] = Value::Array(children);
        }
        vec![v]
    }
    let levels: serde_json::Map<String, Value> =
        Level::ALL.iter().map(|&l| (l.hwloc_name().to_string(), json!(t.count(l)))).collect();
    json!({
        "summary": t.summary(),
        "cpus": t.cpus().to_string(),
        "levels": levels,
        "tree": node(t, 0).into_iter().next().unwrap_or(Value::Null),
    })
}

/// Prints the tree.
pub fn run(args: Args) -> anyhow::Result<()> {
    let t = crate::topology_arg::load(args.topology.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&t))?);
    } else {
        print!("{t}");
    }
    Ok(())
}
