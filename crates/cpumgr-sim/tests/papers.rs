//! The presets reproduce the direction of each paper's result (issue 3, "Must show").

mod common;

use common::{class_mean, run_preset};

#[test]
fn pdpa_beats_equipartition_and_os_on_swim_apsi() {
    // Paper 000 Table 5: PDPA finishes the workload 4.56× sooner than SGI-MP.
    let (pdpa, _) = run_preset("pdpa-swim-apsi", "pdpa");
    for other in ["equipartition", "os"] {
        let (o, _) = run_preset("pdpa-swim-apsi", other);
        assert!(pdpa.makespan < o.makespan, "makespan: pdpa {} vs {other} {}", pdpa.makespan, o.makespan);
        assert!(
            pdpa.mean_slowdown < o.mean_slowdown,
            "slowdown: pdpa {} vs {other} {}",
            pdpa.mean_slowdown,
            o.mean_slowdown
        );
    }
}

#[test]
fn scs_beats_cs_for_high_communication_jobs_at_mpl_4() {
    // Paper 002 Fig. 4: SCS dominates CS for high-communication workloads at MPL 4.
    let (scs, _) = run_preset("scs-mpl:high=true", "scs:mpl=4");
    let (cs, _) = run_preset("scs-mpl:high=true", "cs:mpl=4");
    assert!(scs.mean_slowdown < cs.mean_slowdown, "scs {} vs cs {}", scs.mean_slowdown, cs.mean_slowdown);
    assert!(scs.mean_turnaround < cs.mean_turnaround);
}

#[test]
fn llpc_slows_down_less_than_time_sharing_beside_a_sequential_load() {
    // Paper 001 Table 3: LLPC 1.15-1.25 against time-sharing 1.46-2.39.
    let (_, llpc) = run_preset("llpc-background", "llpc");
    let (_, os) = run_preset("llpc-background", "os");
    for app in ["swim", "su2cor", "hydro2d", "mgrid"] {
        let l = class_mean(&llpc, app, |j| j.slowdown);
        let t = class_mean(&os, app, |j| j.slowdown);
        assert!(l < t, "{app}: llpc {l} vs time-sharing {t}");
        assert!(l >= 1.0);
    }
}

#[test]
fn time_shared_dss_turnaround_grows_linearly_with_the_degree_and_os_faster() {
    // Paper 003 Table 2: under the resource manager, degree d takes about d times degree 1.
    let turnaround = |policy: &str, d: u32| run_preset(&format!("omp-multiprog:degree={d}"), policy).0.mean_turnaround;
    let (dss1, os1) = (turnaround("omp-dss", 1), turnaround("os", 1));
    for d in [2u32, 4, 8] {
        let dss = turnaround("omp-dss", d) / dss1;
        let os = turnaround("os", d) / os1;
        assert!((0.85 * d as f64..=1.15 * d as f64).contains(&dss), "degree {d}: omp-dss grows {dss}×");
        assert!(os > 1.2 * dss, "degree {d}: os grows {os}×, omp-dss {dss}×");
    }
}
