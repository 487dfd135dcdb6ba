//! OpenMetrics: the manager's state as text a Prometheus-compatible scraper reads, served by
//! `GET /metrics` (or `HEAD`; a query string is ignored) on a loopback HTTP endpoint
//! (`cpumgr daemon --metrics ADDR`).
//!
//! Per program (labels `id`, `name`, `pid`): its request, its allocated CPUs, its state (a
//! stateset), its CPU time (a counter). Per managed CPU (label `cpu`): the id of the program that
//! owns it (0 when free). For the manager: quanta decided, the duration of each scheduler step (a
//! histogram), registrations. The server is one thread with a plain `TcpListener`, answering one
//! short request at a time; it never holds the state's lock longer than building a status does.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::PeerCred;

use crate::Shared;

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the step-duration histogram's buckets, in seconds (the last bucket, `+Inf`,
/// is implicit).
pub const STEP_BUCKETS: [f64; 9] = [0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025];

/// A histogram of scheduler-step durations, written by the scheduler thread without a lock.
#[derive(Debug, Default)]
pub struct StepHistogram {
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; STEP_BUCKETS.len() + 1],
    /// Sum of all observations, nanoseconds.
    sum_ns: AtomicU64,
}

impl StepHistogram {
    /// Records one step of `d`.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = STEP_BUCKETS.iter().position(|&b| s <= b).unwrap_or(STEP_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The observations per bucket (not cumulative) and their sum in seconds.
    pub fn snapshot(&self) -> ([u64; STEP_BUCKETS.len() + 1], f64) {
        let counts = std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed));
        (counts, self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

/// Escapes a label value (backslash, double quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The exposition of `status`, the step histogram and the registration count, ending in `# EOF`.
pub fn render(status: &StatusReport, steps: &StepHistogram, registrations: u64) -> String {
    let mut o = String::new();
    let family = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# TYPE {name} {kind}\n# HELP {name} {help}");
    };
    let labels: Vec<String> = status
        .programs
        .iter()
        .map(|p| format!("id=\"{}\",name=\"{}\",pid=\"{}\"", p.id, escape(&p.name), p.pid))
        .collect();
    family(&mut o, "cpumgr_program_request", "gauge", "CPUs the program asks for now.");
    for (p, l) in status.programs.iter().zip(&labels) {
        let _ = writeln!(o, "cpumgr_program_request{{{l}}} {}", p.request);
    }
    family(&mut o, "cpumgr_program_allocated_cpus", "gauge", "CPUs allocated to the program this quantum.");
    for (p, l) in status.programs.iter().zip(&labels) {
        let _ = writeln!(o, "cpumgr_program_allocated_cpus{{{l}}} {}", p.count);
    }
    family(&mut o, "cpumgr_program_state", "stateset", "Whether the program runs, waits, or is held stopped.");
    for (p, l) in status.programs.iter().zip(&labels) {
        for s in ["running", "waiting", "stopped"] {
            let _ = writeln!(o, "cpumgr_program_state{{{l},cpumgr_program_state=\"{s}\"}} {}", u8::from(p.state == s));
        }
    }
    family(&mut o, "cpumgr_program_cpu_seconds", "counter", "CPU time the program used since it registered.");
    for (p, l) in status.programs.iter().zip(&labels) {
        let _ = writeln!(o, "cpumgr_program_cpu_seconds_total{{{l}}} {}", p.cpu_ms as f64 / 1000.0);
    }
    family(&mut o, "cpumgr_cpu_owner", "gauge", "Id of the program that owns the CPU this quantum (0: free).");
    for cpu in status.cpus.iter() {
        let owner = status.programs.iter().find(|p| p.cpus.contains(cpu)).map_or(0, |p| p.id);
        let _ = writeln!(o, "cpumgr_cpu_owner{{cpu=\"{cpu}\"}} {owner}");
    }
    family(&mut o, "cpumgr_quantum_seconds", "gauge", "The scheduler quantum.");
    let _ = writeln!(o, "cpumgr_quantum_seconds {}", status.quantum_ms / 1000.0);
    family(&mut o, "cpumgr_steps", "counter", "Scheduler steps run (boundary and kicked).");
    let _ = writeln!(o, "cpumgr_steps_total {}", status.steps);
    family(&mut o, "cpumgr_step_duration_seconds", "histogram", "Duration of one scheduler step.");
    let (counts, sum) = steps.snapshot();
    let mut cumulative = 0;
    for (i, c) in counts.iter().enumerate() {
        cumulative += c;
        let le = STEP_BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(o, "cpumgr_step_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(o, "cpumgr_step_duration_seconds_count {cumulative}\ncpumgr_step_duration_seconds_sum {sum}");
    family(&mut o, "cpumgr_registrations", "counter", "Programs registered since the manager started.");
    let _ = writeln!(o, "cpumgr_registrations_total {registrations}");
    o.push_str("# EOF\n");
    o
}

/// Whether `addr` may serve metrics: loopback always, any other address only when allowed.
pub fn check_addr(addr: SocketAddr, allow_remote: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(format!("metrics address {addr} is not loopback; allow it explicitly to serve it to the network"))
    }
}

/// Binds `addr` and returns the listener and the address it got (port 0 picks a free one).
pub fn bind(addr: SocketAddr) -> io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    let bound = l.local_addr()?;
    Ok((l, bound))
}

/// Connections answered at once: each has a thread of its own for at most [`REQUEST_DEADLINE`]
/// and its reply, so slow or idle clients cannot hold up a scrape; more are closed at once.
const MAX_CLIENTS: usize = 32;

/// How long a client has to send its whole request, however slowly its bytes come.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// Serves `GET /metrics` (and `HEAD`) until the manager shuts down.
pub fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let clients = Arc::new(AtomicUsize::new(0));
    while !shared.shutdown.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                    clients.fetch_sub(1, Ordering::AcqRel);
                    tracing::debug!(%peer, "metrics: {MAX_CLIENTS} clients already; connection closed");
                    continue;
                }
                let (shared, done) = (Arc::clone(&shared), Arc::clone(&clients));
                let spawned = std::thread::Builder::new().name("cpumgr-metrics-client".into()).spawn(move || {
                    if let Err(e) = answer(&shared, stream) {
                        tracing::debug!(%peer, "metrics request: {e}");
                    }
                    done.fetch_sub(1, Ordering::AcqRel);
                });
                if let Err(e) = spawned {
                    clients.fetch_sub(1, Ordering::AcqRel);
                    tracing::warn!("metrics: no thread for a client: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                tracing::warn!("metrics accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// A stream read until a deadline: each read waits at most for the time left.
struct Until<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the request took too long"));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// Answers one HTTP request on `stream`, read within [`REQUEST_DEADLINE`].
fn answer(shared: &Shared, stream: TcpStream) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut reader = BufReader::new(Until { stream: &stream, deadline: Instant::now() + REQUEST_DEADLINE });
    let mut request = String::new();
    reader.by_ref().take(8192).read_line(&mut request)?;
    // Headers are read and ignored, up to the blank line.
    let mut line = String::new();
    while reader.by_ref().take(8192).read_line(&mut line)? > 0 && !line.trim_end().is_empty() {
        line.clear();
    }
    let mut parts = request.split_ascii_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (code, kind, body) = reply(shared, method, target);
    // HEAD gets GET's headers, its Content-Length included, and no body.
    let sent = if method == "HEAD" { "" } else { body.as_str() };
    // A 405 names the methods that are served (RFC 9110, 15.5.6).
    let allow = if code.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" };
    let mut w = &stream;
    write!(
        w,
        "HTTP/1.1 {code}\r\n{allow}Content-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{sent}",
        body.len()
    )?;
    w.flush()
}

/// The status, content type and body that answer `method` on `target`. GET and HEAD are served
/// alike; a query string is ignored (scrapers and probes add their own), so only the path picks
/// the page.
fn reply(shared: &Shared, method: &str, target: &str) -> (&'static str, &'static str, String) {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    if method != "GET" && method != "HEAD" {
        ("405 Method Not Allowed", "text/plain", "only GET and HEAD\n".to_string())
    } else if path == "/metrics" {
        let status = shared.lock().status(&PeerCred { pid: 0, uid: 0, gid: 0 });
        let registrations = shared.registrations.load(Ordering::Relaxed);
        ("200 OK", CONTENT_TYPE, render(&status, &shared.step_durations, registrations))
    } else {
        ("404 Not Found", "text/plain", "see /metrics\n".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpumgr_core::CpuSet;
    use cpumgr_proto::msg::ProgramStatus;

    fn status() -> StatusReport {
        StatusReport {
            policy: "equipartition".into(),
            quantum_ms: 100.0,
            backend: "affinity".into(),
            cpus: CpuSet::parse("0-2").unwrap(),
            pid: 1,
            steps: 42,
            programs: vec![ProgramStatus {
                id: 3,
                pid: 77,
                name: "say \"hi\"".into(),
                request: 2,
                count: 2,
                cpus: CpuSet::parse("1-2").unwrap(),
                state: "running".into(),
                threads: Some(2),
                team: String::new(),
                fold_cost: None,
                cpu_ms: 1500,
                speedup: None,
                allowed: None,
                confined_by: None,
            }],
        }
    }

    #[test]
    fn the_exposition_has_every_family_and_ends_in_eof() {
        let h = StepHistogram::default();
        h.observe(Duration::from_micros(80));
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_secs(1));
        let text = render(&status(), &h, 5);
        let l = r#"id="3",name="say \"hi\"",pid="77""#;
        for line in [
            format!("cpumgr_program_request{{{l}}} 2"),
            format!("cpumgr_program_allocated_cpus{{{l}}} 2"),
            format!("cpumgr_program_state{{{l},cpumgr_program_state=\"running\"}} 1"),
            format!("cpumgr_program_state{{{l},cpumgr_program_state=\"stopped\"}} 0"),
            format!("cpumgr_program_cpu_seconds_total{{{l}}} 1.5"),
            "cpumgr_cpu_owner{cpu=\"0\"} 0".into(),
            "cpumgr_cpu_owner{cpu=\"2\"} 3".into(),
            "cpumgr_steps_total 42".into(),
            "cpumgr_step_duration_seconds_bucket{le=\"0.0001\"} 1".into(),
            "cpumgr_step_duration_seconds_bucket{le=\"0.001\"} 2".into(),
            "cpumgr_step_duration_seconds_bucket{le=\"+Inf\"} 3".into(),
            "cpumgr_step_duration_seconds_count 3".into(),
            "cpumgr_registrations_total 5".into(),
        ] {
            assert!(text.lines().any(|x| x == line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
    }

    #[test]
    fn only_loopback_unless_allowed() {
        assert!(check_addr("127.0.0.1:9100".parse().unwrap(), false).is_ok());
        assert!(check_addr("[::1]:9100".parse().unwrap(), false).is_ok());
        assert!(check_addr("0.0.0.0:9100".parse().unwrap(), false).is_err());
        assert!(check_addr("0.0.0.0:9100".parse().unwrap(), true).is_ok());
    }
}
