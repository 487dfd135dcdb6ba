//! The Standard Workload Format of the Parallel Workloads Archive: one job per line, 18
//! whitespace-separated numeric fields, `-1` for unknown, and `;` comment lines that carry the
//! header (`; MaxProcs: 256`, `; MaxNodes: 256`, ...).
//!
//! A job arrives at its submit time (field 2) with its allocated processors (field 5, or the
//! requested ones, field 8, when unknown) and runs for its run time (field 4) alone on them. Jobs
//! are rigid by default; [`SwfOptions::kind`] makes them moldable or malleable with a speedup
//! model (their work is then run time × speedup on their size). A job is named `job` and its job
//! number (field 1) as written, in whole digits (`job7` for `7`, `007` or `7.0`; `job-1` when
//! unknown), whatever its size. The class of a job is its executable number (field 14) when known.
//!
//! The archive's files are read as they are:
//! - *Lines* end with `\n`, `\r\n` or a `\r` alone (old Mac files), the last one may lack it;
//!   fields are split by any run of spaces and tabs; blank lines are ignored; `;` lines are
//!   comments wherever they are. A UTF-8 byte-order mark is not part of the first line, and bytes
//!   that are not UTF-8 (a Latin-1 name in a comment) are read as U+FFFD. [`read`] reads a trace
//!   line by line, never whole.
//! - *Numbers* may be written in any decimal form (`12`, `12.0`, `1e3`).
//! - *The machine* is [`SwfOptions::cpus`] when given, else the header's `MaxProcs`, else its
//!   `MaxNodes` (the first number after the colon; the key in any case), else the largest job.
//!   The header is the comment lines before the first job line, as the standard has it: a value
//!   that is not a positive whole number, or a `MaxProcs` or `MaxNodes` line after the first job
//!   line, is ignored and named in [`SwfTrace::ignored_header`] with the machine used instead.
//!   So [`SwfOptions::limit`], which stops reading early, sizes the machine as a whole read does
//!   (unless it is the largest job's: of the jobs read).
//! - *Jobs the trace says did not run, or cannot be known,* are left out and counted by reason
//!   in [`SwfTrace::omitted`] ([`Omission`]): cancelled before they ran (status 5 with a run time
//!   of 0 or -1), the lines of a checkpointed or swapped job's partial executions (status 2, 3
//!   or 4: the job's own line, which sums them up, is simulated), and an unknown submit time,
//!   run time or size (allocated and requested processors both -1 or 0). Other jobs are
//!   simulated whatever their status (0 failed, 1 completed, 5 with a run time: cancelled while
//!   running), and so is a run time of 0: a job shorter than the trace's clock.
//! - *Fields other than the job number, submit time, run time and processor counts* (wait time,
//!   memory, status, user, queue, ...) must be numbers, but their values are not checked: a
//!   negative wait time does not stop a run.
//! - *Errors* name file, line and field, or, with [`SwfOptions::skip_bad`], skip the line and
//!   count it in [`SwfTrace::skipped`]: a line without 18 fields, a field that is not a number, a
//!   job number, submit time, run time or processor count (allocated or requested, used or not,
//!   in a job left out too) that is negative but not -1, not finite, or (the job number and the
//!   processor counts) not whole; a submit or run time, or the processor count used, beyond
//!   [`limits`] (the simulator's, not the format's); and a job larger than the machine (the
//!   message says where the machine's size comes from). A gzip-compressed file (the archive ships `.swf.gz`) is an error at line 1
//!   whatever the options.
//! - Jobs are simulated in submit order, ties in file order, however the file orders them.

use std::collections::HashMap;
use std::fmt;
use std::io::BufRead;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::error::InputError;
use crate::generate::JobKind;
use crate::job::JobSpec;
use crate::limits;

mod line;

use crate::speedup::SpeedupModel;
use line::{parse_line, whole, Entry, Raw};

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

/// The first bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The field named by an error about the file as a whole (it cannot be read, it is compressed).
const WHOLE_FILE: &str = "file";

/// What an error about the machine's size from the header adds: how to give another.
const CPUS_HINT: &str = "--cpus gives the machine's size";

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
    /// Simulate at most this many jobs: reading stops after as many jobs to simulate (not those
    /// left out, skipped or larger than the machine).
    pub limit: Option<usize>,
}

impl Default for SwfOptions {
    fn default() -> Self {
        SwfOptions { kind: JobKind::Rigid, speedup: SpeedupModel::LINEAR, skip_bad: false, cpus: None, limit: None }
    }
}

/// Why a well-formed job line is left out: the trace itself says that the job did not run or
/// that what the simulator needs of it is unknown (archive traces hold many such jobs, so they
/// are counted, not errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Omission {
    /// Cancelled before it ran: status 5 with a run time of 0 or -1.
    Cancelled,
    /// A partial execution (status 2, 3 or 4) of a job whose own line sums it up: simulating it
    /// too would run that work twice.
    PartialExecution,
    /// The submit time is -1.
    UnknownSubmit,
    /// The run time is -1 (and the job was not cancelled).
    UnknownRunTime,
    /// Neither the allocated nor the requested processors are known (-1 or 0).
    UnknownSize,
}

impl fmt::Display for Omission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Omission::Cancelled => "cancelled before they ran (status 5, run time 0 or -1)",
            Omission::PartialExecution => "partial executions of checkpointed or swapped jobs (status 2, 3 or 4; each job's summary line is simulated)",
            Omission::UnknownSubmit => "with an unknown submit time",
            Omission::UnknownRunTime => "with an unknown run time",
            Omission::UnknownSize => "with unknown processors (allocated and requested -1 or 0)",
        })
    }
}

/// The jobs left out for one reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Omitted {
    /// Why.
    pub reason: Omission,
    /// How many jobs.
    pub jobs: usize,
    /// The line of the first of them, for the user to look at.
    pub first_line: usize,
}

impl fmt::Display for Omitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}, the first at line {}", self.jobs, self.reason, self.first_line)
    }
}

/// A read trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfTrace {
    /// The jobs, in submit order.
    pub jobs: Vec<JobSpec>,
    /// Each job's requested run time (field 9), seconds, when the trace gives it: what a batch
    /// scheduler plans with ([`crate::cluster`]). Parallel to [`SwfTrace::jobs`].
    pub requested: Vec<Option<f64>>,
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
    /// The jobs left out because the trace says they did not run or are unknown, one entry per
    /// reason met, in the order first met.
    pub omitted: Vec<Omitted>,
    /// The `MaxProcs` and `MaxNodes` header lines not used to size the machine, each naming
    /// file, line and key, why, and the machine used instead: for the user to see, as the run
    /// goes on without them.
    pub ignored_header: Vec<InputError>,
}

/// A header value (`; Key: value`).
struct Header {
    value: u64,
    line: usize,
}

/// A trace being read.
struct Reader<'a> {
    file: &'a str,
    opts: &'a SwfOptions,
    max_procs: Option<Header>,
    max_nodes: Option<Header>,
    raws: Vec<Raw>,
    skipped: usize,
    first_skipped: Option<InputError>,
    omitted: Vec<Omitted>,
    /// The header lines whose value cannot size the machine: line, key and why.
    ignored_header: Vec<(usize, &'static str, String)>,
    /// The first job line, where the header ends.
    first_job: Option<usize>,
    /// The machine's size and where it comes from, once the header has ended, when the option
    /// or the header gives it (`None`: the largest job's).
    sized: Option<(u32, String)>,
}

/// Whether `e` is about a job line, which [`SwfOptions::skip_bad`] skips; errors about the file
/// as a whole, its header or the machine-size override are not.
pub fn skippable(e: &InputError) -> bool {
    e.field == "line" || FIELDS.contains(&e.field.as_str())
}

/// Parses SWF `text` read from `file`.
pub fn parse(file: &str, text: &str, opts: &SwfOptions) -> Result<SwfTrace, InputError> {
    read(file, text.as_bytes(), opts)
}

/// Reads an SWF trace from `input`, named `file` in errors, a line at a time: a trace of
/// millions of jobs costs the jobs' memory, not its text's as well, and reading stops at
/// [`SwfOptions::limit`]. An input that cannot be read is an error at the line it stopped at.
pub fn read(file: &str, mut input: impl BufRead, opts: &SwfOptions) -> Result<SwfTrace, InputError> {
    let mut reader = Reader::new(file, opts);
    let mut buf = Vec::new();
    let mut after_cr = false;
    for n in 1.. {
        match next_line(&mut input, &mut buf, &mut after_cr) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(InputError::new(file, n, WHOLE_FILE, format!("cannot be read: {e}"))),
        }
        let bytes = if n == 1 { first_line(file, &buf)? } else { &buf };
        if reader.line(n, String::from_utf8_lossy(bytes).trim())?.is_break() {
            break;
        }
    }
    reader.finish()
}

/// Reads the next line of `input` into `buf`, without its end: `\n`, `\r\n` or a `\r` alone (old
/// Mac files); false at the end of the input. `after_cr` says that the last line ended with a
/// `\r`, whose `\n`, if it has one, may come in the next read.
fn next_line(input: &mut impl BufRead, buf: &mut Vec<u8>, after_cr: &mut bool) -> std::io::Result<bool> {
    buf.clear();
    let mut read_any = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(read_any);
        }
        // The `\n` of a `\r\n` split across two reads ends no line of its own.
        let lf = usize::from(std::mem::take(after_cr) && chunk[0] == b'\n');
        let rest = &chunk[lf..];
        let end = rest.iter().position(|&b| b == b'\n' || b == b'\r');
        buf.extend_from_slice(&rest[..end.unwrap_or(rest.len())]);
        read_any |= !rest.is_empty();
        let used = match end {
            Some(i) => {
                *after_cr = rest[i] == b'\r';
                lf + i + 1
            }
            None => chunk.len(),
        };
        input.consume(used);
        if end.is_some() {
            return Ok(true);
        }
    }
}

/// The first line without its UTF-8 byte-order mark (editors on some systems write one); a
/// gzip stream is an error that says so, not a line of garbage.
fn first_line<'b>(file: &str, bytes: &'b [u8]) -> Result<&'b [u8], InputError> {
    if bytes.starts_with(&GZIP_MAGIC) {
        return Err(InputError::new(
            file,
            1,
            WHOLE_FILE,
            "the file is gzip-compressed (the archive's .swf.gz): decompress it first (gunzip)",
        ));
    }
    Ok(bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes))
}

impl<'a> Reader<'a> {
    fn new(file: &'a str, opts: &'a SwfOptions) -> Self {
        Reader {
            file,
            opts,
            max_procs: None,
            max_nodes: None,
            raws: Vec::new(),
            skipped: 0,
            first_skipped: None,
            omitted: Vec::new(),
            ignored_header: Vec::new(),
            first_job: None,
            sized: None,
        }
    }

    /// Takes line `n`, trimmed; breaks once [`SwfOptions::limit`] jobs to simulate are read.
    fn line(&mut self, n: usize, line: &str) -> Result<ControlFlow<()>, InputError> {
        if let Some(comment) = line.strip_prefix(';') {
            self.header(n, comment);
            return Ok(ControlFlow::Continue(()));
        }
        if line.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        if self.first_job.is_none() {
            self.first_job = Some(n);
            self.sized = self.given_size()?;
        }
        if self.opts.limit.is_some_and(|l| self.raws.len() >= l) {
            return Ok(ControlFlow::Break(()));
        }
        match parse_line(self.file, n, line) {
            Ok(Entry::Job(r)) => self.job(r)?,
            Ok(Entry::Omitted(reason)) => self.omit(reason, n),
            Err(e) => self.bad(e)?,
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Keeps the machine's size from a `MaxProcs` or `MaxNodes` comment of the header (see the
    /// module documentation), a later one replacing an earlier one, or notes why it cannot.
    fn header(&mut self, n: usize, comment: &str) {
        let Some((key, value)) = comment.split_once(':') else { return };
        let key = key.trim();
        let (slot, key) = if key.eq_ignore_ascii_case("MaxProcs") {
            (&mut self.max_procs, "MaxProcs")
        } else if key.eq_ignore_ascii_case("MaxNodes") {
            (&mut self.max_nodes, "MaxNodes")
        } else {
            return;
        };
        if let Some(first) = self.first_job {
            let why = format!("after the first job line ({first}), where the header has ended");
            self.ignored_header.push((n, key, why));
            return;
        }
        let word = value.split_whitespace().next();
        match word.and_then(whole) {
            Some(value) => *slot = Some(Header { value, line: n }),
            None => {
                let why = word.map_or("no value".into(), |w| {
                    format!("{w:?} is not a number of processors (a positive whole number)")
                });
                self.ignored_header.push((n, key, why));
            }
        }
    }

    /// Keeps a job to simulate, or, if it is larger than the machine, makes it a bad line.
    fn job(&mut self, r: Raw) -> Result<(), InputError> {
        let too_large = self.sized.as_ref().filter(|(cpus, _)| r.size > *cpus).map(|(cpus, source)| {
            // Nodes of several processors make a MaxNodes header too small: say how to size it.
            let hint = if self.opts.cpus.is_none() { format!("; {CPUS_HINT}") } else { String::new() };
            let m = format!("job of {} processors is larger than the machine ({cpus} CPUs, {source}){hint}", r.size);
            InputError::new(self.file, r.line, FIELDS[r.size_field], m)
        });
        match too_large {
            Some(e) => self.bad(e),
            None => {
                self.raws.push(r);
                Ok(())
            }
        }
    }

    /// Counts a job left out for `reason` at line `n`.
    fn omit(&mut self, reason: Omission, n: usize) {
        match self.omitted.iter_mut().find(|o| o.reason == reason) {
            Some(o) => o.jobs += 1,
            None => self.omitted.push(Omitted { reason, jobs: 1, first_line: n }),
        }
    }

    /// A bad line: skipped and counted with [`SwfOptions::skip_bad`], else the error.
    fn bad(&mut self, e: InputError) -> Result<(), InputError> {
        if !self.opts.skip_bad {
            return Err(e);
        }
        self.first_skipped.get_or_insert(e);
        self.skipped += 1;
        Ok(())
    }

    /// The machine's size and where it comes from (for the message about a job larger than it)
    /// when the option or the header gives it; `None`: the largest job's.
    fn given_size(&self) -> Result<Option<(u32, String)>, InputError> {
        let header = |h: &Header, key: &str| {
            let cpus = limits::cpus(h.value)
                .map_err(|m| InputError::new(self.file, h.line, key, format!("{m} ({CPUS_HINT})")))?;
            Ok((cpus, format!("the header's {key} at line {}", h.line)))
        };
        match (self.opts.cpus, &self.max_procs, &self.max_nodes) {
            (Some(c), _, _) => {
                let cpus = limits::cpus(c as u64)
                    .map_err(|m| InputError::new(self.file, 1, "cpus", format!("the machine-size override: {m}")))?;
                Ok(Some((cpus, "the machine-size override".into())))
            }
            (None, Some(h), _) => header(h, "MaxProcs").map(Some),
            (None, None, Some(h)) => header(h, "MaxNodes").map(Some),
            (None, None, None) => Ok(None),
        }
    }

    /// The jobs, in submit order.
    fn finish(mut self) -> Result<SwfTrace, InputError> {
        // A trace without job lines has its header read only now.
        let sized = if self.first_job.is_some() { self.sized.take() } else { self.given_size()? };
        let (cpus, source) =
            sized.unwrap_or_else(|| (self.raws.iter().map(|r| r.size).max().unwrap_or(1), "the largest job".into()));
        let mut jobs = Vec::with_capacity(self.raws.len());
        let mut requested = Vec::with_capacity(self.raws.len());
        // A class per executable number (field 14), one string for all its jobs.
        let mut classes: HashMap<i64, Arc<str>> = HashMap::new();
        for r in std::mem::take(&mut self.raws) {
            let exe = if r.executable >= 0.0 { r.executable as i64 } else { -1 };
            let class = classes
                .entry(exe)
                .or_insert_with(|| if exe >= 0 { format!("exe{exe}").into() } else { "swf".into() })
                .clone();
            jobs.push(self.opts.kind.job(r.name, class, r.arrival, r.size, r.run, &self.opts.speedup));
            requested.push(r.requested);
        }
        // In submit order, ties in file order (a stable sort), the requested times beside.
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&k| jobs[k].arrival);
        if order.windows(2).any(|w| w[0] > w[1]) {
            let mut taken: Vec<Option<JobSpec>> = jobs.into_iter().map(Some).collect();
            jobs = order.iter().map(|&k| taken[k].take().expect("each index once")).collect();
            requested = order.iter().map(|&k| requested[k]).collect();
        }
        let header = |h: Option<Header>| h.and_then(|h| u32::try_from(h.value).ok());
        let ignored = |(line, key, why)| {
            InputError::new(self.file, line, key, format!("{why}: ignored; the machine has {cpus} CPUs ({source})"))
        };
        Ok(SwfTrace {
            jobs,
            requested,
            cpus,
            max_procs: header(self.max_procs),
            max_nodes: header(self.max_nodes),
            skipped: self.skipped,
            first_skipped: self.first_skipped,
            omitted: self.omitted,
            ignored_header: self.ignored_header.into_iter().map(ignored).collect(),
        })
    }
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
    fn requested_run_times_follow_their_jobs_into_submit_order() {
        // Field 9: 3600 for the later-listed job that arrives first, unknown (-1) and 0 for the
        // others.
        let text = "2 10 -1 50 4 -1 -1 4 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n\
            1 5 -1 100 4 -1 -1 4 3600 -1 1 -1 -1 -1 0 -1 -1 -1\n\
            3 20 -1 10 4 -1 -1 4 0 -1 1 -1 -1 -1 0 -1 -1 -1\n";
        let t = parse("t.swf", text, &SwfOptions::default()).unwrap();
        let names: Vec<&str> = t.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["job1", "job2", "job3"]);
        assert_eq!(t.requested, [Some(3600.0), None, None]);
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

    /// A job line: job `n` submitted at `submit`, running `run` s on `alloc` processors (or
    /// `req` requested ones), ending with `status`.
    fn job(n: &str, submit: &str, run: &str, alloc: &str, req: &str, status: &str) -> String {
        format!("{n} {submit} -1 {run} {alloc} -1 -1 {req} -1 -1 {status} -1 -1 -1 0 -1 -1 -1\n")
    }

    #[test]
    fn archive_layouts_read_as_their_plain_form() {
        let plain = parse("t.swf", TRACE, &SwfOptions::default()).unwrap();
        let spaced: String = TRACE.lines().map(|l| format!("  {}\t \n", l.replace(' ', " \t  "))).collect();
        let interleaved =
            TRACE.replace("\n1 ", "\n\n   \n; a comment\n\t\n1 ").replace("\n2 ", "\r\n; Note: mid-trace\n2 ");
        let variants = [
            ("CRLF", TRACE.replace('\n', "\r\n")),
            ("CR alone (old Mac files)", TRACE.replace('\n', "\r")),
            ("CR, LF and CRLF mixed", TRACE.replacen('\n', "\r", 2).replacen('\n', "\r\n", 2)),
            ("tabs, runs of spaces, trailing whitespace", spaced),
            ("blank lines and comments between jobs", interleaved),
            ("no final newline", TRACE.trim_end().to_string()),
            ("byte-order mark", format!("\u{feff}{TRACE}")),
        ];
        for (what, text) in variants {
            assert_eq!(parse("t.swf", &text, &SwfOptions::default()).as_ref(), Ok(&plain), "{what}");
        }
        let latin1 = [b"; Installation: Universit\xe4t\n".as_slice(), TRACE.as_bytes()].concat();
        assert_eq!(read("t.swf", latin1.as_slice(), &SwfOptions::default()), Ok(plain), "a Latin-1 comment");
    }

    #[test]
    fn line_numbers_count_every_kind_of_line_end_across_reads() {
        // The bad line is line 5 whatever ends the lines, and however the input splits them: a
        // CRLF whose LF comes in the next read is still one line end.
        let text = format!("{TRACE}1 0 -1 100 16\n");
        for end in ["\n", "\r\n", "\r"] {
            let text = text.replace('\n', end);
            for capacity in 1..=4 {
                let input = std::io::BufReader::with_capacity(capacity, text.as_bytes());
                let e = read("t.swf", input, &SwfOptions::default()).unwrap_err();
                assert_eq!((e.line, e.field.as_str()), (6, "line"), "{end:?}, reads of {capacity} bytes: {e}");
            }
        }
    }

    #[test]
    fn both_processor_counts_are_checked_whether_used_or_not() {
        // Allocated processors given: the requested ones are not used, but a count that is no
        // count is an error all the same, fractional or infinite alike, and so in a job left out.
        for (alloc, req) in [("16", "2.5"), ("16", "inf"), ("2.5", "16"), ("inf", "16")] {
            for status in ["1", "5"] {
                let e = parse("t.swf", &job("1", "0", "0", alloc, req, status), &SwfOptions::default()).unwrap_err();
                let field = if alloc == "16" { "requested_processors" } else { "allocated_processors" };
                assert_eq!(e.field, field, "allocated {alloc}, requested {req}, status {status}: {e}");
            }
        }
        // The machine's limit is the simulator's, not the format's: it bounds the count used.
        let wide = job("1", "0", "10", "16", "5000000000", "1");
        assert_eq!(parse("t.swf", &wide, &SwfOptions::default()).unwrap().jobs[0].request, 16);
    }

    #[test]
    fn jobs_the_trace_says_did_not_run_are_counted_not_errors() {
        let text = [
            "; MaxProcs: 64\n".to_string(),
            job("1", "0", "10", "4", "-1", "1"),
            job("2", "1", "0", "4", "-1", "1"),
            job("3", "2", "0", "-1", "4", "5"),
            job("4", "3", "-1", "-1", "-1", "5"),
            job("5", "4", "-1", "4", "4", "-1"),
            job("6", "5", "10", "-1", "-1", "1"),
            job("7", "6", "10", "0", "0", "0"),
            job("8", "-1", "10", "4", "-1", "1"),
            job("9", "7", "10", "0", "8", "5"),
            job("10", "8", "10", "2", "-1", "0"),
            // A checkpointed job: its summary, then its two partial executions.
            job("11", "9", "100", "4", "-1", "1"),
            job("11", "9", "40", "4", "-1", "2"),
            job("11", "9", "60", "4", "-1", "3"),
        ]
        .concat();
        for skip_bad in [false, true] {
            let t = parse("t.swf", &text, &SwfOptions { skip_bad, ..Default::default() }).unwrap();
            let names: Vec<&str> = t.jobs.iter().map(|j| j.name.as_str()).collect();
            assert_eq!(
                names,
                ["job1", "job2", "job9", "job10", "job11"],
                "completed, failed and killed jobs run, a checkpointed one once"
            );
            assert_eq!(t.jobs[1].total_work(), 0.0, "a run time of 0 is a job shorter than the clock");
            assert_eq!(t.jobs[2].request, 8, "allocated 0: the requested processors");
            let omitted = |reason, jobs, first_line| Omitted { reason, jobs, first_line };
            let want = vec![
                omitted(Omission::Cancelled, 2, 4),
                omitted(Omission::UnknownRunTime, 1, 6),
                omitted(Omission::UnknownSize, 2, 7),
                omitted(Omission::UnknownSubmit, 1, 9),
                omitted(Omission::PartialExecution, 2, 13),
            ];
            assert_eq!((t.omitted, t.skipped), (want, 0), "skip_bad {skip_bad}");
        }
        let o = Omitted { reason: Omission::UnknownRunTime, jobs: 25, first_line: 34 };
        assert_eq!(o.to_string(), "25 with an unknown run time, the first at line 34");
    }

    #[test]
    fn jobs_run_in_submit_order_whatever_their_numbers() {
        let text = [
            job("3", "100", "1", "1", "-1", "1"),
            job("99999999999999", "5", "1", "1", "-1", "1"),
            job("1e30", "50", "1", "1", "-1", "1"),
            job("7", "5", "1", "1", "-1", "1"),
        ]
        .concat();
        let t = parse("t.swf", &text, &SwfOptions::default()).unwrap();
        let names: Vec<&str> = t.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            ["job99999999999999", "job7", &format!("job1{}", "0".repeat(30)), "job3"],
            "ties in file order"
        );
    }

    #[test]
    fn a_job_is_named_by_its_number_as_written() {
        let named = [
            ("9223372036854775808", "job9223372036854775808"),
            ("9223372036854775809", "job9223372036854775809"),
            ("18446744073709551617", "job18446744073709551617"),
            ("9007199254740993", "job9007199254740993"),
            ("123456789012345678901234567890", "job123456789012345678901234567890"),
            ("007", "job7"),
            ("7.0", "job7"),
            ("0.7e1", "job7"),
            ("+700e-2", "job7"),
            ("0", "job0"),
            ("-0.0", "job0"),
            ("0e99999999999999999999", "job0"),
            ("-1", "job-1"),
        ];
        for (number, name) in named {
            let t = parse("t.swf", &job(number, "0", "1", "1", "-1", "1"), &SwfOptions::default()).unwrap();
            assert_eq!(t.jobs[0].name, name, "{number}");
        }
        let refused = [
            ("1.5", "not a whole number"),
            ("1.00000000000000000001", "not a whole number"),
            ("1e-400", "not a whole number"),
            ("-3", "negative"),
            ("inf", "not a finite number"),
            ("1e400", "not a finite number"),
            ("x", "not a number"),
        ];
        for (number, message) in refused {
            let text = format!("{}{}", job(number, "0", "1", "1", "-1", "1"), job("2", "0", "1", "1", "-1", "1"));
            let e = parse("t.swf", &text, &SwfOptions::default()).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (1, "job_number"), "{e}");
            assert!(e.message.contains(message) && skippable(&e), "{number}: {e}");
            let t = parse("t.swf", &text, &SwfOptions { skip_bad: true, ..Default::default() }).unwrap();
            assert_eq!((t.skipped, t.jobs.len()), (1, 1), "{number}");
        }
    }

    #[test]
    fn the_header_sizes_the_machine() {
        let jobs = job("1", "0", "10", "16", "-1", "1");
        let cases = [
            ("; MaxProcs: 48\n", 48, (Some(48), None)),
            ("; MaxNodes: 32\n", 32, (None, Some(32))),
            ("; MaxNodes: 32\n; MaxProcs: 64\n", 64, (Some(64), Some(32))),
            (";maxprocs:   40 (estimated)\n", 40, (Some(40), None)),
            ("; MaxProcs: 24.0\n", 24, (Some(24), None)),
            ("; MaxProcs: -1\n; MaxNodes: 20\n", 20, (None, Some(20))),
            ("; MaxProcs: unknown\n", 16, (None, None)),
        ];
        for (header, cpus, (max_procs, max_nodes)) in cases {
            let t = parse("t.swf", &format!("{header}{jobs}"), &SwfOptions::default()).unwrap();
            assert_eq!((t.cpus, t.max_procs, t.max_nodes), (cpus, max_procs, max_nodes), "{header:?}");
        }
        for key in ["MaxProcs", "MaxNodes"] {
            let text = format!("; Version: 2.2\n; {key}: 8\n{jobs}{}", job("2", "1", "10", "-1", "12", "1"));
            let e = parse("t.swf", &text, &SwfOptions::default()).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (3, "allocated_processors"), "{e}");
            assert!(
                e.message
                    .contains(&format!("larger than the machine (8 CPUs, the header's {key} at line 2); --cpus gives")),
                "{e}"
            );
            let sized = parse("t.swf", &text, &SwfOptions { cpus: Some(4), ..Default::default() }).unwrap_err();
            assert!(sized.message.ends_with("(4 CPUs, the machine-size override)"), "the size was given: {sized}");
            let huge = format!("; {key}: {}\n{jobs}", limits::MAX_CPUS as u64 + 1);
            let e = parse("t.swf", &huge, &SwfOptions::default()).unwrap_err();
            assert!(e.line == 1 && e.message.ends_with("(--cpus gives the machine's size)"), "{e}");
            assert!(
                parse("t.swf", &huge, &SwfOptions { cpus: Some(64), ..Default::default() }).is_ok(),
                "--cpus is the way past it"
            );
            let t = parse("t.swf", &text, &SwfOptions { skip_bad: true, ..Default::default() }).unwrap();
            assert_eq!((t.jobs.len(), t.skipped, t.first_skipped.unwrap().line), (0, 2, 3));
        }
    }

    #[test]
    fn unusable_header_values_are_named_with_the_machine_used_instead() {
        let jobs = job("1", "0", "10", "16", "-1", "1");
        let cases = [
            (
                "; MaxProcs: abc\n; MaxNodes: 0\n",
                16,
                "the largest job",
                vec![(1, "MaxProcs", "\"abc\""), (2, "MaxNodes", "\"0\"")],
            ),
            ("; MaxProcs: 0\n; MaxNodes: 32\n", 32, "the header's MaxNodes at line 2", vec![(1, "MaxProcs", "\"0\"")]),
            ("; MaxProcs:\n", 16, "the largest job", vec![(1, "MaxProcs", "no value")]),
            ("; MaxProcs: 1e30\n", 16, "the largest job", vec![(1, "MaxProcs", "\"1e30\"")]),
            ("; MaxProcs: 64\n; Note: MaxNodes unknown\n", 64, "", vec![]),
        ];
        for (header, cpus, source, want) in cases {
            let t = parse("t.swf", &format!("{header}{jobs}"), &SwfOptions::default()).unwrap();
            let got: Vec<_> = t.ignored_header.iter().map(|e| (e.file.as_str(), e.line, e.field.as_str())).collect();
            let lines: Vec<_> = want.iter().map(|&(line, key, _)| ("t.swf", line, key)).collect();
            assert_eq!((t.cpus, got), (cpus, lines), "{header:?}");
            for (e, (_, _, what)) in t.ignored_header.iter().zip(want) {
                assert!(e.message.starts_with(what), "{e}");
                assert!(e.message.ends_with(&format!("ignored; the machine has {cpus} CPUs ({source})")), "{e}");
            }
        }
        let o = SwfOptions { cpus: Some(8), ..Default::default() };
        let t = parse("t.swf", &format!("; MaxProcs: abc\n{}", job("1", "0", "10", "4", "-1", "1")), &o).unwrap();
        assert!(
            t.ignored_header[0].message.ends_with("the machine has 8 CPUs (the machine-size override)"),
            "{:?}",
            t.ignored_header
        );
    }

    #[test]
    fn the_header_ends_at_the_first_job_whatever_the_limit() {
        let text =
            [job("1", "0", "10", "16", "-1", "1"), "; MaxProcs: 64\n".into(), job("2", "1", "10", "4", "-1", "1")]
                .concat();
        for limit in [None, Some(1)] {
            let t = parse("t.swf", &text, &SwfOptions { limit, ..Default::default() }).unwrap();
            assert_eq!((t.cpus, t.max_procs), (16, None), "limit {limit:?}: the largest job, not a late MaxProcs");
            if limit.is_none() {
                let e = &t.ignored_header[0];
                assert_eq!((e.line, e.field.as_str()), (2, "MaxProcs"), "{e}");
                assert!(
                    e.message.starts_with("after the first job line (1), where the header has ended: ignored"),
                    "{e}"
                );
            }
        }
        // The header sizes the machine whatever the limit, and however early it stops.
        for limit in [None, Some(0), Some(1)] {
            let t = parse("t.swf", TRACE, &SwfOptions { limit, ..Default::default() }).unwrap();
            assert_eq!((t.cpus, t.ignored_header.len()), (64, 0), "limit {limit:?}");
        }
    }

    #[test]
    fn the_limit_counts_the_jobs_to_simulate() {
        let jobs = [
            job("1", "0", "10", "16", "-1", "1"),
            job("2", "1", "10", "-1", "-1", "1"),
            job("3", "2", "10", "4", "-1", "1"),
            job("4", "3", "10", "4", "-1", "1"),
        ];
        let text = format!("; MaxProcs: 8\n{}", jobs.concat());
        let o = SwfOptions { skip_bad: true, limit: Some(2), ..Default::default() };
        let t = parse("t.swf", &text, &o).unwrap();
        let names: Vec<&str> = t.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            (names, t.skipped, t.omitted.len()),
            (vec!["job3", "job4"], 1, 1),
            "job 1 is too large, job 2 of unknown size"
        );
        // A job too large is an error at its line, before a bad line after it.
        let e = parse("t.swf", &format!("{text}1 0 -1 100 16\n"), &SwfOptions::default()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "allocated_processors"), "{e}");
    }

    #[test]
    fn numbers_in_any_decimal_form() {
        let text = "; MaxProcs: 8\n1.0 0.0 -1.0 10.0 4.0 -1 -1 4.0 -1 -1 1.0 -1 -1 3.0 0 -1 -1 -1\n2 1e1 -1 1e3 2e0 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n";
        let t = parse("t.swf", text, &SwfOptions::default()).unwrap();
        assert_eq!((t.jobs[0].request, &*t.jobs[0].class, t.jobs[0].name.as_str()), (4, "exe3", "job1"));
        assert_eq!((t.jobs[1].arrival, t.jobs[1].request), (10_000_000_000, 2));
        assert!((t.jobs[1].total_work() - 2000.0).abs() < 1e-9);
    }

    #[test]
    fn fields_the_simulator_does_not_use_need_only_be_numbers() {
        let odd = "1 0 -5 10 4 -2 -1 -1 -7 -1 1 -1 -1 -1 0 -1 -1 -3\n";
        assert_eq!(parse("t.swf", odd, &SwfOptions::default()).unwrap().jobs.len(), 1, "negative wait and think times");
        let cases = [
            ("1 0 -1 10 4 -1 -1 -1 -1 -1 1 -1 -1 -1 q -1 -1 -1\n", "queue_number", "not a number"),
            ("1 0 -1 inf 4 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n", "run_time", "not a finite number"),
            ("1 NaN -1 10 4 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n", "submit_time", "not a finite number"),
        ];
        for (line, field, message) in cases {
            let e = parse("t.swf", line, &SwfOptions::default()).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(message) && skippable(&e), "{e}");
        }
    }

    #[test]
    fn a_gzip_file_is_named_as_one_whatever_the_options() {
        let gz = [0x1f, 0x8b, 0x08, 0x00, 0xff, b'\n', 0x00];
        for skip_bad in [false, true] {
            let e = read("t.swf.gz", gz.as_slice(), &SwfOptions { skip_bad, ..Default::default() }).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (1, "file"), "{e}");
            assert!(e.message.contains("gzip") && !skippable(&e), "{e}");
        }
        let e = parse("t.swf", "; MaxProcs: 4000000000\n", &SwfOptions::default()).unwrap_err();
        assert!(!skippable(&e), "a header is not a line to skip: {e}");
    }

    /// Input that fails when read, as a disk or a network file system may.
    struct Broken;

    impl std::io::Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("device gone"))
        }
    }

    impl BufRead for Broken {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            Err(std::io::Error::other("device gone"))
        }

        fn consume(&mut self, _: usize) {}
    }

    #[test]
    fn reading_stops_at_the_limit_and_a_failed_read_names_its_line() {
        use std::io::Read;
        let text = format!("{TRACE}{}", job("3", "20", "10", "4", "-1", "1"));
        let o = SwfOptions { limit: Some(2), ..Default::default() };
        assert_eq!(
            read("t.swf", text.as_bytes().chain(Broken), &o).unwrap().jobs.len(),
            2,
            "the failing input is not reached"
        );
        let e = read("t.swf", text.as_bytes().chain(Broken), &SwfOptions::default()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (7, "file"), "{e}");
        assert!(e.message.contains("device gone"), "{e}");
    }
}
