//! The Standard Workload Format of the Parallel Workloads Archive: one job per line, 18
//! whitespace-separated numeric fields, `-1` for unknown, and `;` comment lines that carry the
//! header (`; MaxProcs: 256`, `; MaxNodes: 256`, ...).
//!
//! A job arrives at its submit time (field 2) with its allocated processors (field 5, or the
//! requested ones, field 8, when unknown) and runs for its run time (field 4) alone on them. Jobs
//! are rigid by default; [`SwfOptions::kind`] makes them moldable or malleable with a speedup
//! model (their work is then run time × speedup on their size). The class of a job is its
//! executable number (field 14) when known.
//!
//! A malformed line — wrong field count, a field that is not a number, a negative value other
//! than −1, an unknown size or run time, a job larger than the machine — is an error naming
//! file, line and field, or, with [`SwfOptions::skip_bad`], skipped and counted.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::InputError;
use crate::generate::JobKind;
use crate::job::JobSpec;
use crate::limits;
use crate::speedup::SpeedupModel;

/// The SWF field names, in order (1-based in the format's documentation).
pub const FIELDS: [&str; 18] = [
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable_number",
    "queue_number",
    "partition_number",
    "preceding_job_number",
    "think_time",
];

/// How SWF jobs become simulated jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfOptions {
    /// Rigid (default), moldable or malleable.
    pub kind: JobKind,
    /// The speedup model of the jobs.
    pub speedup: SpeedupModel,
    /// Skip and count bad lines instead of failing.
    pub skip_bad: bool,
    /// Machine size (1 to [`limits::MAX_CPUS`]); `None`: the header's MaxProcs, else MaxNodes,
    /// else the largest job.
    pub cpus: Option<u32>,
    /// Read at most this many jobs.
    pub limit: Option<usize>,
}

impl Default for SwfOptions {
    fn default() -> Self {
        SwfOptions { kind: JobKind::Rigid, speedup: SpeedupModel::LINEAR, skip_bad: false, cpus: None, limit: None }
    }
}

/// A read trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfTrace {
    /// The jobs, in submit order.
    pub jobs: Vec<JobSpec>,
    /// The machine size used (see [`SwfOptions::cpus`]).
    pub cpus: u32,
    /// The header's MaxProcs.
    pub max_procs: Option<u32>,
    /// The header's MaxNodes.
    pub max_nodes: Option<u32>,
    /// Bad lines skipped (with [`SwfOptions::skip_bad`]).
    pub skipped: usize,
    /// Why the first of them was skipped (file, line, field and reason), to show with the count.
    pub first_skipped: Option<InputError>,
}

struct Raw {
    line: usize,
    fields: [f64; 18],
}

/// Parses SWF `text` read from `file`.
pub fn parse(file: &str, text: &str, opts: &SwfOptions) -> Result<SwfTrace, InputError> {
    let mut max_procs = None;
    let mut max_nodes = None;
    let mut raws = Vec::new();
    let mut skipped = 0;
    let mut first_skipped = None;
    // A byte-order mark (editors on some systems write one) is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (k, line) in text.lines().enumerate() {
        let n = k + 1;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(c) = t.strip_prefix(';') {
            if let Some((key, value)) = c.split_once(':') {
                let v = value.trim().parse::<u64>().ok().filter(|&v| v > 0).map(|v| (v, n));
                match key.trim() {
                    "MaxProcs" => max_procs = v.or(max_procs),
                    "MaxNodes" => max_nodes = v.or(max_nodes),
                    _ => {}
                }
            }
            continue;
        }
        if opts.limit.is_some_and(|l| raws.len() >= l) {
            break;
        }
        match parse_line(file, n, t) {
            Ok(r) => raws.push(r),
            Err(e) if opts.skip_bad => {
                first_skipped.get_or_insert(e);
                skipped += 1;
            }
            Err(e) => return Err(e),
        }
    }
    let largest = raws.iter().map(|r| size_of(r) as u32).max().unwrap_or(1);
    let cpus = match (opts.cpus, max_procs, max_nodes) {
        (Some(c), _, _) => limits::cpus(c as u64).map_err(|m| InputError::new(file, 1, "cpus", format!("the machine-size override: {m}")))?,
        (None, Some((v, line)), _) => limits::cpus(v).map_err(|m| InputError::new(file, line, "MaxProcs", m))?,
        (None, None, Some((v, line))) => limits::cpus(v).map_err(|m| InputError::new(file, line, "MaxNodes", m))?,
        (None, None, None) => largest.max(1),
    };
    let mut jobs = Vec::with_capacity(raws.len());
    // A class per executable number (field 14), one string for all its jobs.
    let mut classes: HashMap<i64, Arc<str>> = HashMap::new();
    for r in &raws {
        let size = size_of(r);
        if size > cpus as i64 {
            let field = if r.fields[4] > 0.0 { FIELDS[4] } else { FIELDS[7] };
            let e = InputError::new(file, r.line, field, format!("job of {size} processors is larger than the machine ({cpus} CPUs)"));
            if opts.skip_bad {
                first_skipped.get_or_insert(e);
                skipped += 1;
                continue;
            }
            return Err(e);
        }
        let exe = if r.fields[13] >= 0.0 { r.fields[13] as i64 } else { -1 };
        let class = classes.entry(exe).or_insert_with(|| if exe >= 0 { format!("exe{exe}").into() } else { "swf".into() }).clone();
        let arrival = limits::nanos(r.fields[1]).expect("checked by parse_line");
        let name = format!("job{}", r.fields[0] as i64);
        jobs.push(opts.kind.job(name, class, arrival, size as u32, r.fields[3].max(0.0), &opts.speedup));
    }
    jobs.sort_by_key(|j| j.arrival);
    let header = |h: Option<(u64, usize)>| h.and_then(|(v, _)| u32::try_from(v).ok());
    Ok(SwfTrace { jobs, cpus, max_procs: header(max_procs), max_nodes: header(max_nodes), skipped, first_skipped })
}

fn size_of(r: &Raw) -> i64 {
    let alloc = r.fields[4] as i64;
    if alloc > 0 {
        alloc
    } else {
        r.fields[7] as i64
    }
}

fn parse_line(file: &str, n: usize, line: &str) -> Result<Raw, InputError> {
    let parts: Vec<&str> = line.split_whitespace().collect();
    if parts.len() != 18 {
        return Err(InputError::new(file, n, "line", format!("{} fields, an SWF line has 18", parts.len())));
    }
    let mut fields = [0f64; 18];
    for (i, p) in parts.iter().enumerate() {
        let v: f64 = p.parse().map_err(|_| InputError::new(file, n, FIELDS[i], format!("{p:?} is not a number")))?;
        if !v.is_finite() || (v < 0.0 && v != -1.0) {
            return Err(InputError::new(file, n, FIELDS[i], format!("{p} is negative (only -1, unknown, may be)")));
        }
        fields[i] = v;
    }
    if fields[1] < 0.0 {
        return Err(InputError::new(file, n, FIELDS[1], "the submit time is unknown"));
    }
    if fields[3] < 0.0 {
        return Err(InputError::new(file, n, FIELDS[3], "the run time is unknown"));
    }
    if fields[4] <= 0.0 && fields[7] <= 0.0 {
        return Err(InputError::new(file, n, FIELDS[4], "neither allocated nor requested processors are known"));
    }
    for i in [1, 3] {
        limits::nanos(fields[i]).map_err(|m| InputError::new(file, n, FIELDS[i], m))?;
    }
    for i in [4, 7] {
        // A fractional count such as `.6` used to fall through to an unknown (-1) requested
        // count and wrap to a job of 4294967295 CPUs (found by fuzzing).
        if fields[i].fract() != 0.0 {
            return Err(InputError::new(file, n, FIELDS[i], format!("{} is not a whole number of processors", fields[i])));
        }
        if fields[i] > limits::MAX_CPUS as f64 {
            return Err(InputError::new(file, n, FIELDS[i], format!("{} processors: a simulated machine has at most {}", fields[i], limits::MAX_CPUS)));
        }
    }
    Ok(Raw { line: n, fields })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpumgr_core::Kind;

    const TRACE: &str = "; Version: 2\n; MaxProcs: 64\n; MaxNodes: 32\n\
        1 0 -1 100 16 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n\
        2 10 -1 50 -1 -1 -1 8 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n";

    #[test]
    fn reads_jobs_and_header() {
        let t = parse("t.swf", TRACE, &SwfOptions::default()).unwrap();
        assert_eq!(t.cpus, 64, "MaxProcs wins over MaxNodes");
        assert_eq!(t.max_nodes, Some(32));
        assert_eq!(t.jobs.len(), 2);
        assert_eq!(t.jobs[0].kind, Kind::Rigid(16));
        assert_eq!(&*t.jobs[0].class, "exe3");
        assert_eq!(t.jobs[1].request, 8, "requested processors when allocated is unknown");
        assert_eq!(t.jobs[1].arrival, 10_000_000_000);
        assert!((t.jobs[0].total_work() - 1600.0).abs() < 1e-9, "run time × processors at linear speedup");
        let o = SwfOptions { kind: JobKind::Malleable, ..Default::default() };
        assert_eq!(parse("t.swf", TRACE, &o).unwrap().jobs[0].kind, Kind::Malleable);
    }

    #[test]
    fn jobs_of_one_executable_share_their_class() {
        let text = format!("{TRACE}3 20 -1 10 4 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n");
        let t = parse("t.swf", &text, &SwfOptions::default()).unwrap();
        let class = |i: usize| &t.jobs[i].class;
        assert_eq!((&**class(0), &**class(1), &**class(2)), ("exe3", "swf", "exe3"));
        assert!(Arc::ptr_eq(class(0), class(2)), "one string for the executable's jobs");
    }

    #[test]
    fn absurd_numbers_are_errors_not_overflows() {
        let job = "1 0 -1 100 16 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n";
        let e = parse("big.swf", &format!("; MaxProcs: 4000000000\n{job}"), &SwfOptions::default()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "MaxProcs"), "{e}");
        // The override wins over an unusable header.
        let o = SwfOptions { cpus: Some(32), ..Default::default() };
        assert_eq!(parse("big.swf", &format!("; MaxProcs: 4000000000\n{job}"), &o).unwrap().cpus, 32);
        let o = SwfOptions { cpus: Some(4_000_000_000), ..Default::default() };
        assert_eq!(parse("big.swf", job, &o).unwrap_err().field, "cpus");
        let late = "1 1e300 -1 100 16 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n";
        assert_eq!(parse("big.swf", late, &SwfOptions::default()).unwrap_err().field, "submit_time");
        let long = "1 0 -1 1e300 16 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n";
        assert_eq!(parse("big.swf", long, &SwfOptions::default()).unwrap_err().field, "run_time");
        let wide = "1 0 -1 100 5000000000 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n";
        assert_eq!(parse("big.swf", wide, &SwfOptions::default()).unwrap_err().field, "allocated_processors");
    }

    #[test]
    fn the_machine_size_can_be_overridden() {
        let o = SwfOptions { cpus: Some(16), ..Default::default() };
        let t = parse("t.swf", TRACE, &o).unwrap();
        assert_eq!((t.cpus, t.max_procs), (16, Some(64)), "the option wins over MaxProcs");
        let o = SwfOptions { cpus: Some(8), ..Default::default() };
        let e = parse("t.swf", TRACE, &o).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "allocated_processors"), "{e}");
    }

    #[test]
    fn bad_lines_name_file_line_and_field_or_are_skipped() {
        let cases = [
            ("1 0 -1 100 16\n", "line"),
            ("1 0 -1 abc 16 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n", "run_time"),
            ("1 0 -1 100 -4 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n", "allocated_processors"),
            ("1 0 -1 100 128 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n", "allocated_processors"),
            ("1 0 -1 100 .6 -1 -1 -1 -1 -1 1 -1 -1 3 0 -1 -1 -1\n", "allocated_processors"),
            ("1 0 -1 100 -1 -1 -1 2.5 -1 -1 1 -1 -1 3 0 -1 -1 -1\n", "requested_processors"),
        ];
        for (line, field) in cases {
            let text = format!("; MaxProcs: 64\n{line}");
            let e = parse("bad.swf", &text, &SwfOptions::default()).unwrap_err();
            assert_eq!((e.file.as_str(), e.line, e.field.as_str()), ("bad.swf", 2, field), "{e}");
            let text = format!("; MaxProcs: 64\n{line}{}", TRACE.lines().nth(3).unwrap());
            let t = parse("bad.swf", &text, &SwfOptions { skip_bad: true, ..Default::default() }).unwrap();
            assert_eq!((t.skipped, t.jobs.len()), (1, 1));
        }
    }
}
