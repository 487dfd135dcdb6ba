//! Workload files for `cpumgr launch`: jobs that are real commands, their arrival times, and the
//! multiprogramming level, in TOML.
//!
//! ```toml
//! name = "mixed"
//! mpl = 2                     # jobs running at once (0: no limit)
//! arrivals = "fixed"          # "fixed" (each job's `at`), "poisson" (mean gap `gap` seconds),
//!                             # or "swf" (submit times of a Standard Workload Format trace)
//! seed = 1                    # for poisson arrivals
//! swf = "jobs.swf"            # for swf arrivals: the trace, relative to this file
//! time_scale = 0.01           # seconds here per second of the trace (default 1)
//! swf_sizes = true            # requests from the trace's sizes, scaled to this machine
//!
//! [[job]]
//! name = "stencil"
//! command = ["{kernels}/stencil", "-n", "400"]
//! env = { OMP_NUM_THREADS = "{cpus}" }
//! at = 0.0                    # arrival, seconds after the run starts
//! repeat = 2                  # copies of this job (each arrives `every` seconds after the last)
//! every = 0.5
//! request = "{cpus}"          # CPUs it asks the manager for; default: all
//! kind = "malleable"          # or "rigid" (with `procs`, a number or e.g. "{cpus}"),
//!                             # "moldable", "evolving"; a command that starts an MPI launcher
//!                             # with a rank count is rigid with its ranks by default
//! needs = ["mpiexec"]         # programs (on PATH) or files the job needs: without them it is
//!                             # left out of every run, with a note
//! ```
//!
//! With `arrivals = "swf"`, the workload's jobs (in file order, copies included) take the
//! submit times of the trace's first jobs, measured from the first one and multiplied by
//! `time_scale`; with `swf_sizes`, each job asks for its trace job's processors scaled from the
//! trace's machine (`MaxProcs`) to this one. The trace is read by the simulator's SWF reader, so
//! its errors name the trace's file, line and field.
//!
//! `{cpus}` is replaced by the number of CPUs the run uses, `{cpus*K}` by K times that (work
//! that grows with the machine), and `{kernels}` by the directory of the built test kernels, in
//! commands, environment values and `request`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Why a workload file was refused; names the file, line and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct WorkloadError {
    /// The file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong, naming the field.
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: Option<String>,
    #[serde(default)]
    mpl: u32,
    #[serde(default)]
    arrivals: Option<String>,
    gap: Option<f64>,
    #[serde(default)]
    seed: u64,
    swf: Option<PathBuf>,
    time_scale: Option<f64>,
    #[serde(default)]
    swf_sizes: bool,
    #[serde(default)]
    job: Vec<JobSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSpec {
    name: String,
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    dir: Option<PathBuf>,
    #[serde(default)]
    at: f64,
    #[serde(default = "one")]
    repeat: u32,
    #[serde(default)]
    every: f64,
    request: Option<String>,
    kind: Option<String>,
    procs: Option<Count>,
    class: Option<String>,
    #[serde(default)]
    needs: Vec<String>,
}

/// A CPU or process count written as a number or as text with placeholders (`"{cpus}"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Count {
    Number(u32),
    Text(String),
}

impl Count {
    /// The count, placeholders expanded; `None` when it is not a whole number >= 1.
    fn value(&self, expand: &Expand) -> Option<u32> {
        match self {
            Count::Number(n) => Some(*n),
            Count::Text(t) => expand.apply(t).trim().parse().ok(),
        }
        .filter(|n| *n > 0)
    }

    /// As the file wrote it, for errors.
    fn written(&self) -> String {
        match self {
            Count::Number(n) => n.to_string(),
            Count::Text(t) => format!("{t:?}"),
        }
    }
}

fn one() -> u32 {
    1
}

/// One job instance to run: a command with its arrival time.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Unique within the workload: the job's name, with `#k` for repeats.
    pub name: String,
    /// The job class (the `[[job]]` table's name or `class`): CV and dedicated times are per class.
    pub class: String,
    /// Program and arguments, placeholders expanded.
    pub command: Vec<String>,
    /// Extra environment, expanded.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub dir: Option<PathBuf>,
    /// Arrival, seconds after the run starts.
    pub at: f64,
    /// CPUs it asks for.
    pub request: u32,
    /// Fixed process/thread count for rigid jobs.
    pub procs: Option<u32>,
    /// `malleable`, `moldable`, `rigid` or `evolving`.
    pub kind: String,
}

/// A workload ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its name.
    pub name: String,
    /// Jobs running at once; 0 for no limit.
    pub mpl: u32,
    /// Jobs in arrival order.
    pub jobs: Vec<Job>,
    /// Jobs left out for what they need and this machine lacks: (the job's name, what).
    pub left_out: Vec<(String, String)>,
}

/// Whether `program` is an executable file on `PATH`.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|d| d.join(program).metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
    })
}

/// Whether `need` (a path, or a program looked up on `PATH`) is here.
fn present(need: &str) -> bool {
    if need.contains('/') {
        Path::new(need).exists()
    } else {
        on_path(need)
    }
}

/// Values for the placeholders.
#[derive(Debug, Clone)]
pub struct Expand {
    /// CPUs of the run.
    pub cpus: u32,
    /// Directory of the built kernels.
    pub kernels: PathBuf,
}

impl Expand {
    /// Replaces `{cpus}`, `{cpus*K}` (K a whole number: work that grows with the machine, so a
    /// workload takes about as long on 64 CPUs as on 2) and `{kernels}`.
    fn apply(&self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(at) = rest.find("{cpus*") {
            out.push_str(&rest[..at]);
            let tail = &rest[at + "{cpus*".len()..];
            match tail.find('}').and_then(|end| Some((end, tail[..end].parse::<u64>().ok()?))) {
                Some((end, k)) => {
                    out.push_str(&(k * u64::from(self.cpus)).to_string());
                    rest = &tail[end + 1..];
                }
                None => {
                    out.push_str("{cpus*");
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        out.replace("{cpus}", &self.cpus.to_string()).replace("{kernels}", &self.kernels.display().to_string())
    }
}

impl Workload {
    /// Parses a workload file's text. `file` names it in errors.
    pub fn parse(file: &Path, text: &str, expand: &Expand) -> Result<Workload, WorkloadError> {
        let fname = file.display().to_string();
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let spec: FileSpec = toml::from_str(text).map_err(|e| WorkloadError {
            file: fname.clone(),
            line: e.span().map_or(1, |s| line_of(s.start)),
            message: e.message().to_string(),
        })?;
        let headers: Vec<usize> = text.match_indices("[[job]]").map(|(o, _)| line_of(o)).collect();
        let err = |line: usize, message: String| WorkloadError { file: fname.clone(), line, message };
        // The line of a top-level key (before the first [[job]]), for errors about it.
        let key_line = |key: &str| {
            text.lines()
                .take_while(|l| !l.trim_start().starts_with("[["))
                .position(|l| l.trim_start().strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')))
                .map_or(1, |i| i + 1)
        };
        let mut poisson = None;
        let mut swf = None;
        match spec.arrivals.as_deref() {
            None | Some("fixed") => {}
            Some("poisson") => {
                poisson = Some(spec.gap.filter(|g| g.is_finite() && *g > 0.0).ok_or_else(|| {
                    err(key_line("gap"), "field `gap`: poisson arrivals need a mean gap in seconds > 0".into())
                })?)
            }
            Some("swf") => {
                let path = spec.swf.as_ref().ok_or_else(|| {
                    err(key_line("arrivals"), "field `swf`: swf arrivals need the trace's file".into())
                })?;
                let scale = spec.time_scale.unwrap_or(1.0);
                if !(scale.is_finite() && scale > 0.0) {
                    return Err(err(
                        key_line("time_scale"),
                        format!("field `time_scale`: {scale} is not a factor > 0"),
                    ));
                }
                swf = Some((file.parent().unwrap_or(Path::new("")).join(path), scale));
            }
            Some(other) => {
                return Err(err(
                    key_line("arrivals"),
                    format!("field `arrivals`: {other:?} is not \"fixed\", \"poisson\" or \"swf\""),
                ))
            }
        }
        if swf.is_none() && (spec.swf.is_some() || spec.time_scale.is_some() || spec.swf_sizes) {
            let key = if spec.swf.is_some() {
                "swf"
            } else if spec.time_scale.is_some() {
                "time_scale"
            } else {
                "swf_sizes"
            };
            return Err(err(key_line(key), format!("field `{key}`: only for arrivals = \"swf\"")));
        }
        let mut jobs = Vec::new();
        let mut left_out = Vec::new();
        for (k, j) in spec.job.iter().enumerate() {
            let line = headers.get(k).copied().unwrap_or(1);
            let bad = |field: &str, msg: String| err(line, format!("job {:?}: field `{field}`: {msg}", j.name));
            if j.command.is_empty() || j.command[0].trim().is_empty() {
                return Err(bad("command", "needs a program to run".into()));
            }
            if !(j.at.is_finite() && j.at >= 0.0) {
                return Err(bad("at", format!("{} is not a time >= 0", j.at)));
            }
            if !(j.every.is_finite() && j.every >= 0.0) {
                return Err(bad("every", format!("{} is not a time >= 0", j.every)));
            }
            if j.repeat == 0 {
                return Err(bad("repeat", "must be at least 1".into()));
            }
            // An MPI launcher's job is rigid with its ranks unless the file says otherwise.
            let ranks = if j.kind.is_none() && j.procs.is_none() {
                crate::mpi::ranks(&j.command.iter().map(|c| expand.apply(c)).collect::<Vec<_>>())
            } else {
                None
            };
            let kind = j.kind.clone().unwrap_or_else(|| {
                if j.procs.is_some() || ranks.is_some() {
                    "rigid".into()
                } else {
                    "malleable".into()
                }
            });
            let procs = match &j.procs {
                None => ranks,
                Some(c) => {
                    Some(c.value(expand).ok_or_else(|| bad("procs", format!("{} is not a count >= 1", c.written())))?)
                }
            };
            match (kind.as_str(), procs) {
                ("rigid", Some(_)) => {}
                ("rigid", None) => return Err(bad("procs", "a rigid job needs procs >= 1".into())),
                ("malleable" | "moldable" | "evolving", None) => {}
                ("malleable" | "moldable" | "evolving", Some(_)) => {
                    return Err(bad("procs", format!("only rigid jobs take procs, not {kind}")))
                }
                _ => return Err(bad("kind", format!("{kind:?} is not malleable, moldable, rigid or evolving"))),
            }
            let request = match &j.request {
                None => procs.unwrap_or(expand.cpus),
                Some(r) => expand
                    .apply(r)
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad("request", format!("{r:?} is not a CPU count >= 1")))?,
            };
            if let Some(missing) = j.needs.iter().map(|n| expand.apply(n)).find(|n| !present(n)) {
                left_out.push((j.name.clone(), missing));
                continue;
            }
            for copy in 0..j.repeat {
                jobs.push(Job {
                    name: if j.repeat > 1 { format!("{}#{}", j.name, copy + 1) } else { j.name.clone() },
                    class: j.class.clone().unwrap_or_else(|| j.name.clone()),
                    command: j.command.iter().map(|a| expand.apply(a)).collect(),
                    env: j.env.iter().map(|(k, v)| (k.clone(), expand.apply(v))).collect(),
                    dir: j.dir.clone(),
                    at: j.at + j.every * copy as f64,
                    request,
                    procs,
                    kind: kind.clone(),
                });
            }
        }
        if let Some(gap) = poisson {
            // Exponential gaps from a small deterministic generator (splitmix64), so a workload
            // arrives the same way in every configuration and repeat.
            let mut state = spec.seed ^ 0x9E37_79B9_7F4A_7C15;
            let mut t = 0.0;
            for job in &mut jobs {
                job.at = t;
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                let u = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                t += -gap * u.ln();
            }
        }
        if let Some((path, scale)) = swf {
            swf_arrivals(&mut jobs, &path, scale, spec.swf_sizes, expand.cpus, |message| {
                err(key_line("swf"), message)
            })?;
        }
        jobs.sort_by(|a, b| a.at.total_cmp(&b.at));
        if jobs.is_empty() {
            return Err(err(1, "the workload has no [[job]] this machine can run".into()));
        }
        let name = spec
            .name
            .unwrap_or_else(|| file.file_stem().map_or("workload".into(), |s| s.to_string_lossy().into_owned()));
        Ok(Workload { name, mpl: spec.mpl, jobs, left_out })
    }
}

/// Gives `jobs`, in order, the arrivals (and with `sizes` the requests, scaled to `cpus`) of the
/// SWF trace at `path`. Errors in the trace name its file, line and field; `at_swf` makes the
/// error about the workload's own `swf` field (the file cannot be read, or holds too few jobs).
fn swf_arrivals(
    jobs: &mut [Job],
    path: &Path,
    scale: f64,
    sizes: bool,
    cpus: u32,
    at_swf: impl Fn(String) -> WorkloadError,
) -> Result<(), WorkloadError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| at_swf(format!("field `swf`: cannot read {name}: {e}")))?;
    let opts = cpumgr_sim::swf::SwfOptions { limit: Some(jobs.len()), ..Default::default() };
    // Read as the simulator reads it (line by line, any comment's encoding, a compressed file
    // named as such); jobs the trace says did not run give no arrival.
    let trace = cpumgr_sim::swf::read(&name, std::io::BufReader::new(file), &opts).map_err(|e| WorkloadError {
        file: e.file,
        line: e.line,
        message: format!("field `{}`: {}", e.field, e.message),
    })?;
    if trace.jobs.len() < jobs.len() {
        return Err(at_swf(format!(
            "field `swf`: {name} holds {} jobs, the workload {}",
            trace.jobs.len(),
            jobs.len()
        )));
    }
    let first = trace.jobs.first().map_or(0, |j| j.arrival);
    for (job, t) in jobs.iter_mut().zip(&trace.jobs) {
        job.at = (t.arrival - first) as f64 / 1e9 * scale;
        if sizes {
            let scaled = (u64::from(t.request) * u64::from(cpus)).div_ceil(u64::from(trace.cpus.max(1)));
            job.request = scaled.clamp(1, u64::from(cpus.max(1))) as u32;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_whose_needs_are_missing_is_left_out_and_said() {
        let text = "[[job]]\nname = \"a\"\ncommand = [\"x\"]\n[[job]]\nname = \"mpi\"\ncommand = [\"mpiexec\", \"-n\", \"2\", \"{kernels}/halo\"]\nneeds = [\"sh\", \"{kernels}/halo\"]\n";
        let w = parse(text).unwrap();
        assert_eq!(w.jobs.len(), 1);
        assert_eq!(w.left_out, vec![("mpi".to_string(), "/k/halo".to_string())]);
        let here = parse(&text.replace("{kernels}/halo\"]\n", "/\"]\n")).unwrap();
        assert_eq!(
            (here.jobs.len(), here.jobs[1].kind.as_str(), here.jobs[1].procs),
            (2, "rigid", Some(2)),
            "an MPI launcher's job is rigid with its ranks"
        );
        assert!(here.left_out.is_empty());
    }

    fn parse(text: &str) -> Result<Workload, WorkloadError> {
        Workload::parse(Path::new("w.toml"), text, &Expand { cpus: 4, kernels: PathBuf::from("/k") })
    }

    #[test]
    fn cpus_times_k_scales_with_the_machine() {
        let e = Expand { cpus: 4, kernels: PathBuf::from("/k") };
        assert_eq!(e.apply("-iters {cpus*500} -t {cpus}"), "-iters 2000 -t 4");
        // Not a whole number: left as written.
        assert_eq!(e.apply("{cpus*x} {cpus*}"), "{cpus*x} {cpus*}");
    }

    #[test]
    fn expands_repeats_and_placeholders() {
        let w = parse(
            r#"
mpl = 2
[[job]]
name = "s"
command = ["{kernels}/stencil", "-t", "{cpus}"]
env = { OMP_NUM_THREADS = "{cpus}" }
repeat = 2
every = 1.5
[[job]]
name = "r"
command = ["rigid"]
procs = "{cpus}"
at = 1
"#,
        )
        .unwrap();
        assert_eq!(w.mpl, 2);
        assert_eq!(w.name, "w");
        let names: Vec<_> = w.jobs.iter().map(|j| (j.name.as_str(), j.at)).collect();
        assert_eq!(names, vec![("s#1", 0.0), ("r", 1.0), ("s#2", 1.5)]);
        assert_eq!(w.jobs[0].command, vec!["/k/stencil", "-t", "4"]);
        assert_eq!(w.jobs[0].env["OMP_NUM_THREADS"], "4");
        assert_eq!(w.jobs[0].request, 4);
        assert_eq!(
            (w.jobs[1].kind.as_str(), w.jobs[1].request, w.jobs[1].procs),
            ("rigid", 4, Some(4)),
            "procs = \"{{cpus}}\""
        );
    }

    #[test]
    fn poisson_arrivals_are_reproducible() {
        let text =
            "arrivals = \"poisson\"\ngap = 2.0\nseed = 7\n[[job]]\nname = \"a\"\ncommand = [\"true\"]\nrepeat = 50\n";
        let a = parse(text).unwrap();
        assert_eq!(a, parse(text).unwrap());
        let last = a.jobs.last().unwrap().at;
        assert!(last > 40.0 && last < 200.0, "50 gaps of mean 2 s: {last}");
    }

    #[test]
    fn swf_arrivals_take_the_traces_submit_times_and_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let swf = dir.path().join("t.swf");
        // A 16-processor machine; jobs submitted at 100, 110 and 160 s, of 16, 8 and 1 processors.
        let line = |n: u32, submit: u32, size: u32| {
            format!("{n} {submit} -1 50 {size} -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n")
        };
        std::fs::write(&swf, format!("; MaxProcs: 16\n{}{}{}", line(1, 100, 16), line(2, 110, 8), line(3, 160, 1)))
            .unwrap();
        let file = dir.path().join("w.toml");
        let expand = Expand { cpus: 4, kernels: PathBuf::from("/k") };
        let text = "arrivals = \"swf\"\nswf = \"t.swf\"\ntime_scale = 0.1\nswf_sizes = true\n[[job]]\nname = \"a\"\ncommand = [\"true\"]\nrepeat = 2\n[[job]]\nname = \"b\"\ncommand = [\"true\"]\n";
        let w = Workload::parse(&file, text, &expand).unwrap();
        let got: Vec<_> = w.jobs.iter().map(|j| (j.name.as_str(), (j.at * 1e6).round() / 1e6, j.request)).collect();
        assert_eq!(got, vec![("a#1", 0.0, 4), ("a#2", 1.0, 2), ("b", 6.0, 1)]);
        // Without swf_sizes the requests stay the workload's.
        let w = Workload::parse(&file, &text.replace("swf_sizes = true\n", ""), &expand).unwrap();
        assert!(w.jobs.iter().all(|j| j.request == 4));
        // As the archive ships traces: a Latin-1 comment, and a job cancelled before it ran,
        // which gives no arrival.
        let mut archived = b"; MaxProcs: 16\n; Computer: M\xfcnchen\n".to_vec();
        for l in [
            line(1, 100, 16),
            "2 105 -1 0 8 -1 -1 -1 -1 -1 5 -1 -1 -1 0 -1 -1 -1\n".into(),
            line(3, 110, 8),
            line(4, 160, 1),
        ] {
            archived.extend_from_slice(l.as_bytes());
        }
        std::fs::write(&swf, archived).unwrap();
        let w = Workload::parse(&file, text, &expand).unwrap();
        assert_eq!(w.jobs.iter().map(|j| (j.at * 1e6).round() / 1e6).collect::<Vec<_>>(), vec![0.0, 1.0, 6.0]);
        std::fs::write(&swf, format!("; MaxProcs: 16\n{}{}{}", line(1, 100, 16), line(2, 110, 8), line(3, 160, 1)))
            .unwrap();

        // Too few jobs in the trace: an error at the workload's `swf` line.
        let e = Workload::parse(&file, &text.replace("repeat = 2", "repeat = 5"), &expand).unwrap_err();
        assert_eq!((e.line, e.file.as_str()), (2, file.to_str().unwrap()), "{e}");
        assert!(e.message.contains("`swf`") && e.message.contains("holds 3 jobs, the workload 6"), "{e}");
        // A bad trace line: the trace's file, line and field.
        std::fs::write(
            &swf,
            format!("; MaxProcs: 16\n{}2 soon -1 50 8 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n", line(1, 100, 16)),
        )
        .unwrap();
        let e = Workload::parse(&file, text, &expand).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), (swf.to_str().unwrap(), 3), "{e}");
        assert!(e.message.contains("`submit_time`"), "{e}");
        // A missing trace, a bad scale, and swf keys without swf arrivals.
        let e = Workload::parse(&file, &text.replace("t.swf", "none.swf"), &expand).unwrap_err();
        assert!(e.line == 2 && e.message.contains("cannot read"), "{e}");
        let e = Workload::parse(&file, &text.replace("0.1", "0"), &expand).unwrap_err();
        assert!(e.line == 3 && e.message.contains("`time_scale`"), "{e}");
        let e =
            Workload::parse(&file, &text.replace("arrivals = \"swf\"", "arrivals = \"fixed\""), &expand).unwrap_err();
        assert!(e.line == 2 && e.message.contains("only for arrivals = \"swf\""), "{e}");
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = parse("[[job]]\nname = \"a\"\ncommand = [\"x\"]\nbogus = 1\n").unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("bogus"), "{e}");
        let e = parse("mpl = 1\n\n[[job]]\nname = \"a\"\ncommand = []\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("`command`"), "{e}");
        let e = parse("[[job]]\nname = \"a\"\ncommand = [\"x\"]\nkind = \"rigid\"\n").unwrap_err();
        assert!(e.message.contains("`procs`"), "{e}");
        let e = parse("[[job]]\nname = \"a\"\ncommand = [\"x\"]\nprocs = \"{cpus*0}\"\n").unwrap_err();
        assert!(e.message.contains("`procs`: \"{cpus*0}\" is not a count"), "{e}");
        let e = parse("[[job]]\nname = \"a\"\ncommand = [\"x\"]\nrequest = \"lots\"\n").unwrap_err();
        assert!(e.message.contains("`request`"), "{e}");
        assert!(parse("mpl = 1\n").unwrap_err().message.contains("no [[job]]"));
    }
}
