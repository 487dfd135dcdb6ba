//! `cpumgr._cpumgr`: the native half of the `cpumgr` Python package.
//!
//! - [`PyClient`]: the client of `cpumgr-client` (register, read the allocation, request, idle,
//!   safe-point check, reports), for Python programs; the package's `cpumgr.threads()` sizes
//!   BLAS/OpenMP pools from it.
//! - [`simulate`]: `cpumgr-sim` runs of a workload under several policies, named by spec or
//!   written in Python ([`PyPolicy`]: any object with `decide(view)`), returning the per-job
//!   records and per-run summaries as JSON for the Python side to turn into dicts.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use cpumgr_client::{Client, Mode, Options};
use cpumgr_core::{policies, Decision, Policy, SimHints, Topology, View};
use cpumgr_sim::{presets, JobRecord, Observer, RunSummary, SimConfig, Workload};

/// A program's handle on cpumgr (see `cpumgr_client::Client`).
#[pyclass(name = "Client", module = "cpumgr._cpumgr", frozen)]
struct PyClient {
    /// The connection; [`PyClient::close`] swaps in an unmanaged one.
    inner: RwLock<Client>,
}

impl PyClient {
    fn c(&self) -> std::sync::RwLockReadGuard<'_, Client> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PyClient {
    /// Connects as the environment and the arguments say; never fails (without a manager it
    /// says so once on stderr and keeps `max` threads).
    #[new]
    #[pyo3(signature = (name=None, min=None, max=None, mode=None, socket=None))]
    fn new(
        name: Option<String>,
        min: Option<u32>,
        max: Option<u32>,
        mode: Option<String>,
        socket: Option<PathBuf>,
    ) -> Self {
        PyClient { inner: RwLock::new(Client::init(Options { name, min, max, mode, socket })) }
    }

    /// Unregisters the program now (as dropping the last reference would) and leaves this client
    /// unmanaged, keeping `max` threads: `cpumgr.finalize()` calls it, so that a reference the
    /// program still holds cannot keep the registration alive.
    fn close(&self) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let max = inner.max();
        *inner = Client::init(Options { max: Some(max), mode: Some("off".into()), ..Options::default() });
    }

    /// `"managed"`, `"unmanaged"` or `"llpc"`.
    #[getter]
    fn mode(&self) -> &'static str {
        match self.c().mode() {
            Mode::Managed => "managed",
            Mode::Unmanaged => "unmanaged",
            Mode::Llpc => "llpc",
        }
    }

    /// The program's id in the manager, when managed.
    #[getter]
    fn id(&self) -> Option<u64> {
        self.c().id()
    }

    /// The most threads the program uses.
    #[getter]
    fn max(&self) -> u32 {
        self.c().max()
    }

    /// The team for the next parallel section, at most `cap` (0: the program's maximum).
    #[pyo3(signature = (cap=0))]
    fn team(&self, cap: u32) -> u32 {
        self.c().team(cap)
    }

    /// `(count, cpus, epoch)` of the manager's allocation, `None` when unmanaged.
    fn allocation(&self) -> Option<(u32, Vec<u32>, u64)> {
        self.c().allocation().map(|a| (a.count, a.cpus.iter().collect(), a.epoch))
    }

    /// Sets the request: CPUs wanted at present, fewest, most.
    fn request(&self, wanted: u32, min: u32, max: u32) {
        self.c().set_request(wanted, min, max);
    }

    /// Gives every CPU back until the next request or section.
    fn idle(&self) {
        self.c().idle();
    }

    /// The thread count the manager asks a program running `team` threads to shrink to, or None.
    fn should_yield(&self, team: u32) -> Option<u32> {
        self.c().should_yield(team)
    }

    /// A parallel section with `team` threads starts (the manager keeps it whole until it ends).
    fn begin_region(&self, team: u32) {
        self.c().begin_region(team);
    }

    /// The section ended; the program is serial.
    fn end_region(&self) {
        self.c().end_region();
    }

    /// Reports a speedup measured on `cpus` CPUs (for `pdpa`).
    fn report_speedup(&self, cpus: u32, speedup: f64) {
        self.c().report_speedup(cpus, speedup);
    }
}

/// A policy written in Python: an object whose `decide(view)` returns one CPU count per program
/// of `view["programs"]` (0: the program does not run this quantum). The first exception it
/// raises (or a malformed answer) ends its decisions and is raised from `simulate`.
struct PyPolicy {
    obj: Py<PyAny>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl PyPolicy {
    fn counts(&self, py: Python<'_>, view: &View) -> PyResult<Vec<u32>> {
        let secs = |ns: u64| ns as f64 / 1e9;
        let programs = PyList::empty(py);
        for p in view.programs {
            let d = PyDict::new(py);
            d.set_item("id", p.id.0)?;
            d.set_item("name", p.name.as_str())?;
            d.set_item("wants", p.wants())?;
            d.set_item("wanted", p.request.wanted)?;
            d.set_item("now", p.request.wanted)?;
            d.set_item("min", p.request.min)?;
            d.set_item("max", p.request.max)?;
            d.set_item("weight", p.weight)?;
            d.set_item("arrival", secs(p.arrival))?;
            d.set_item("cpu_time", secs(p.cpu_time))?;
            d.set_item("speedup", p.speedup.map(|s| (s.cpus.get(), s.speedup)))?;
            d.set_item("running", p.running)?;
            d.set_item("threads", p.threads)?;
            programs.append(d)?;
        }
        let v = PyDict::new(py);
        v.set_item("now", secs(view.now))?;
        v.set_item("quantum", secs(view.quantum))?;
        v.set_item("cpus", view.cpus)?;
        v.set_item("programs", programs)?;
        let counts: Vec<u32> = self.obj.bind(py).call_method1("decide", (v,))?.extract()?;
        if counts.len() != view.programs.len() {
            return Err(PyValueError::new_err(format!(
                "decide(view) returned {} counts for {} programs",
                counts.len(),
                view.programs.len()
            )));
        }
        let total: u64 = counts.iter().map(|&c| c as u64).sum();
        if total > view.cpus as u64 {
            return Err(PyValueError::new_err(format!("decide(view) handed out {total} CPUs of {}", view.cpus)));
        }
        Ok(counts)
    }
}

impl SimHints for PyPolicy {
    /// Python code is handed every program's CPU time and speedup report: the simulator must
    /// keep them fresh every quantum (it brings jobs up to date only at their own events for a
    /// policy that reads neither).
    fn reads_usage(&self) -> bool {
        true
    }

    /// Python code may decide by the clock or by state of its own: nothing promises that its
    /// decisions repeat while the view does, so the simulator's fast-forward never skips a
    /// quantum of it (every quantum calls `decide`).
    fn settled(&self) -> bool {
        false
    }
}

impl Policy for PyPolicy {
    fn name(&self) -> &'static str {
        "python"
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let mut error = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if error.is_some() {
            // The run stops at its next step ([`Jobs`]); the error is raised from `simulate`.
            return;
        }
        match Python::with_gil(|py| self.counts(py, view)) {
            Ok(counts) => {
                for (a, c) in out.allocations.iter_mut().zip(counts) {
                    a.count = c;
                    a.running = c > 0;
                }
            }
            Err(e) => *error = Some(e),
        }
    }
}

/// Collects finished jobs, and stops the run once its Python policy has failed (`error`).
struct Jobs {
    records: Vec<JobRecord>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl Observer for Jobs {
    fn job(&mut self, record: &JobRecord) {
        self.records.push(record.clone());
    }

    fn stop(&self) -> bool {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

/// A workload file (TOML, as `cpumgr sim --workload`) when `spec` names one, else a preset spec
/// (`name[:key=value,...]`).
fn workload(spec: &str) -> PyResult<Workload> {
    let bad = |e: cpumgr_sim::InputError| PyValueError::new_err(e.to_string());
    if Path::new(spec).is_file() {
        let text = std::fs::read_to_string(spec).map_err(|e| PyValueError::new_err(format!("{spec}: {e}")))?;
        return cpumgr_sim::workload::parse(spec, &text).map_err(bad);
    }
    presets::build(spec).map_err(bad)
}

/// Simulates `workload` (a preset spec or a workload file) under each of `policies` (specs such
/// as `"equipartition"`, or Python objects with `decide(view)`) on `cpus` CPUs (default: the
/// workload's machine). Returns `(jobs, runs)` as JSON: every finished job's record with its
/// `policy`, and one summary per run.
#[pyfunction]
#[pyo3(signature = (workload_spec, policies_, cpus=None, quantum_ms=None, mpl=None))]
fn simulate(
    py: Python<'_>,
    workload_spec: &str,
    policies_: Vec<Bound<'_, PyAny>>,
    cpus: Option<u32>,
    quantum_ms: Option<f64>,
    mpl: Option<u32>,
) -> PyResult<(String, String)> {
    let w = workload(workload_spec)?;
    let n = cpus.or(w.cpus).ok_or_else(|| {
        PyValueError::new_err(format!("{workload_spec}: give cpus= (the workload names no machine size)"))
    })?;
    cpumgr_sim::limits::cpus(n as u64).map_err(|m| PyValueError::new_err(format!("cpus={n}: {m}")))?;
    let topology = Topology::flat(n);
    let quantum = match quantum_ms {
        Some(q) => {
            Some(cpumgr_sim::limits::quantum(q).map_err(|m| PyValueError::new_err(format!("quantum_ms={q}: {m}")))?)
        }
        None => w.quantum,
    };
    let cfg =
        SimConfig { quantum, cost: w.cost.unwrap_or_default(), mpl: mpl.unwrap_or(w.mpl), ..SimConfig::default() };
    let mut jobs = Vec::new();
    let mut runs: Vec<RunSummary> = Vec::new();
    for p in &policies_ {
        let error = Arc::new(Mutex::new(None));
        let (spec, policy, in_python): (String, Box<dyn SimHints>, bool) = if let Ok(spec) = p.extract::<String>() {
            let policy =
                policies::build_simulated(&spec).map_err(|e| PyValueError::new_err(format!("policy {spec:?}: {e}")))?;
            (spec, policy, false)
        } else if p.hasattr("decide")? {
            let name = p.get_type().name()?.to_string();
            (name, Box::new(PyPolicy { obj: p.clone().unbind(), error: error.clone() }), true)
        } else {
            return Err(PyTypeError::new_err("a policy is a spec string or an object with decide(view)"));
        };
        let mut seen = Jobs { records: Vec::new(), error: error.clone() };
        let go = || cpumgr_sim::run(&topology, &spec, policy, w.jobs(), &cfg, &mut seen);
        // A run that calls no Python lets the interpreter's other threads run meanwhile.
        let result = if in_python { go() } else { py.allow_threads(go) };
        if let Some(e) = error.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(e);
        }
        let summary = result.map_err(|e| PyRuntimeError::new_err(format!("{}: {spec}: {e}", w.name)))?;
        for r in seen.records {
            let mut v = serde_json::to_value(r).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            v["policy"] = spec.clone().into();
            jobs.push(v);
        }
        runs.push(summary);
    }
    let json = |e: serde_json::Error| PyRuntimeError::new_err(e.to_string());
    Ok((serde_json::to_string(&jobs).map_err(json)?, serde_json::to_string(&runs).map_err(json)?))
}

/// The module.
#[pymodule]
fn _cpumgr(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyClient>()?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    Ok(())
}
