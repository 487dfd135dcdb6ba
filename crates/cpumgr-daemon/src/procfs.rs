//! What `/proc` says about the programs: which processes and threads each one has now, how many
//! of its threads are runnable (a spinning team is all runnable), and how much CPU time it used.
//!
//! The manager scans at every quantum boundary. Once a sweep ([`SWEEP`]) a scan lists all of
//! `/proc` and keeps only the processes of registered programs (a process of another group costs
//! one `getpgid`), and follows each program's tree through its processes' children; between two
//! listings it reads again only the processes each program's last sample had ([`Known`]).
//! Threads' states come from `/proc/PID/task/TID/stat`. The manager's scans keep the files they
//! read open ([`Files`]), so that a quantum's read of a process it read before is one system call.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// How the manager addresses a program's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A whole process group (the program leads it: `cpumgr run` starts programs this way).
    Group(i32),
    /// One process (a program that registered itself from inside someone else's group).
    Process(i32),
}

impl Target {
    /// The target for `pid`: its group when it leads one, else the process alone.
    pub fn of(pid: i32) -> Target {
        match nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))) {
            Ok(g) if g.as_raw() == pid => Target::Group(pid),
            _ => Target::Process(pid),
        }
    }

    /// The process that leads it (the group's leader, or the process).
    pub fn leader(&self) -> i32 {
        match *self {
            Target::Group(p) | Target::Process(p) => p,
        }
    }

    /// Whether process `pid` is part of the target: what stopping the target would stop.
    pub fn includes(&self, pid: i32) -> bool {
        let pgrp = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))).map_or(-1, |g| g.as_raw());
        self.matches(pid, pgrp)
    }

    fn matches(&self, pid: i32, pgrp: i32) -> bool {
        match *self {
            Target::Group(g) => pgrp == g,
            Target::Process(p) => pid == p,
        }
    }
}

/// The fields of `/proc/PID/stat` the manager uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// One-letter state: `R` running or runnable, `S` sleeping, `T` stopped, `Z` zombie, ...
    pub state: char,
    /// Process group.
    pub pgrp: i32,
    /// User plus system time, in clock ticks.
    pub ticks: u64,
    /// Threads in the process (field 20).
    pub threads: u32,
    /// When it started, clock ticks after boot (field 22): with the pid, a process's identity.
    pub start: u64,
}

/// Parses a `stat` line. The command name (field 2) may hold spaces and parentheses, so the
/// fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let mut f = text[text.rfind(')')? + 1..].split_ascii_whitespace();
    // The first is field 3 (state), the third field 5 (group).
    let state = f.next()?.chars().next()?;
    let pgrp = f.nth(1)?.parse().ok()?;
    // Fields 14 and 15 (user and system time), 20 (threads) and 22 (start time).
    let utime: u64 = f.nth(8)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    let threads = f.nth(4)?.parse().ok()?;
    let start = f.nth(1)?.parse().ok()?;
    Some(Stat { state, pgrp, ticks: utime + stime, threads, start })
}

/// One program's processes and threads at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Its processes.
    pub pids: Vec<i32>,
    /// Every thread of every process, a process's together, in the order of `pids`.
    pub tids: Vec<i32>,
    /// How many of `tids` each process of `pids` has, in its order.
    pub threads: Vec<u32>,
    /// Threads in state `R`.
    pub runnable: u32,
    /// Threads in state `T` (stopped).
    pub stopped: u32,
    /// Its processes outside its group (also in `pids`): descendants that made groups or sessions
    /// of their own, as MPI launchers' proxies and ranks do. Signals to the group miss them.
    pub strays: Vec<Stray>,
    /// CPU time of its live processes, clock ticks.
    pub ticks: u64,
    /// Whether only its leading process was read ([`scan_leaders`]): its strays are unknown.
    pub leaders_only: bool,
}

/// A process of a program outside its group, known by pid and start time (so that a pid reused
/// by another process is never taken for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stray {
    /// Its pid.
    pub pid: i32,
    /// Its start time, clock ticks after boot.
    pub start: u64,
}

impl Stray {
    /// Whether the process is still this one (alive, not a reuse of its pid).
    pub fn alive(&self) -> bool {
        read_stat(self.pid).is_some_and(|s| s.start == self.start && s.state != 'Z')
    }
}

/// Scans `/proc` for the processes of `targets`, once (a scan every quantum keeps [`Files`]).
pub fn scan(targets: &[Target]) -> HashMap<Target, Sample> {
    let targets: Vec<(Target, Known)> = targets.iter().map(|t| (*t, Known::default())).collect();
    Files::new(0, Duration::ZERO).scan(&targets)
}

/// How often the manager's scans list all of `/proc` and read every process's children: between
/// two listings a scan reads only the processes each program's last sample had (and follows the
/// tree of a program first sampled from its leader alone), so a process a program started since
/// is found at the next listing, within this long.
pub const SWEEP: Duration = Duration::from_secs(1);

/// What a program's last sample found: where the next scan starts between two listings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known {
    /// Its processes.
    pub pids: Vec<i32>,
    /// Those of them outside its group: read again only while each is the same process.
    pub strays: Vec<Stray>,
    /// Read its processes' children at the next scan, listing or not: a program sampled from
    /// its leader alone (just registered), whose launcher is starting its processes now.
    pub follow: bool,
}

impl Known {
    /// What `s` found, to start the next scan from.
    pub fn of(s: &Sample) -> Known {
        Known { pids: s.pids.clone(), strays: s.strays.clone(), follow: s.leaders_only }
    }
}

/// A `/proc` file a scan reads, by what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ProcFile {
    /// `/proc/PID/stat`.
    Stat(i32),
    /// `/proc/PID/task/TID/stat`.
    TaskStat(i32, i32),
    /// `/proc/PID/task/PID/children`: the children of its main thread.
    Children(i32),
}

impl ProcFile {
    fn path(self) -> String {
        match self {
            ProcFile::Stat(pid) => format!("/proc/{pid}/stat"),
            ProcFile::TaskStat(pid, tid) => format!("/proc/{pid}/task/{tid}/stat"),
            ProcFile::Children(pid) => format!("/proc/{pid}/task/{pid}/children"),
        }
    }
}

/// The `/proc` files a scan read, kept open for the next: reading an open `/proc` file again
/// (`pread` at its start: the kernel writes it anew) is one system call where opening, reading
/// and closing it is three, and an open file stays its process's (a read after the process is
/// gone fails; a new process that reuses the pid is never read through it). What a scan did not
/// read is closed after it: the processes gone, the programs no longer scanned (those held
/// stopped), and the children files between listings.
pub struct Files {
    open: HashMap<ProcFile, (fs::File, u64)>,
    /// Scans so far: each file is marked with the last one that read it.
    scans: u64,
    /// The most files kept open.
    most: usize,
    /// When a scan last listed all of `/proc`, and how often one does.
    swept: Option<Instant>,
    sweep: Duration,
    /// The buffer files are read into.
    buf: Vec<u8>,
}

impl Files {
    /// Keeps at most `most` files open; lists all of `/proc` once a `sweep`.
    pub fn new(most: usize, sweep: Duration) -> Files {
        Files { open: HashMap::new(), scans: 0, most, swept: None, sweep, buf: Vec::new() }
    }

    /// Keeps open at most a quarter of the descriptors this process may have: the manager also
    /// holds a pidfd and a slot per program, and sockets.
    pub fn for_manager() -> Files {
        use nix::sys::resource::{getrlimit, Resource};
        let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
        Files::new(usize::try_from(soft / 4).unwrap_or(usize::MAX), SWEEP)
    }

    /// Files kept open now.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Whether the next scan of group targets lists all of `/proc`.
    fn lists_next(&self) -> bool {
        self.swept.is_none_or(|t| t.elapsed() >= self.sweep)
    }

    /// The text of `/proc` file `f`, through the open file when there is one.
    fn read(&mut self, f: ProcFile) -> Option<&str> {
        let scan = self.scans;
        let ok = match self.open.get_mut(&f) {
            Some((file, seen)) => {
                *seen = scan;
                let ok = read_into(file, &mut self.buf);
                if !ok {
                    self.open.remove(&f);
                }
                ok
            }
            None => {
                let file = fs::File::open(f.path()).ok()?;
                let ok = read_into(&file, &mut self.buf);
                if ok && self.open.len() < self.most {
                    self.open.insert(f, (file, scan));
                }
                ok
            }
        };
        ok.then(|| std::str::from_utf8(&self.buf).ok()).flatten()
    }

    fn read_stat(&mut self, pid: i32) -> Option<Stat> {
        self.read(ProcFile::Stat(pid)).and_then(parse_stat)
    }

    /// Scans `/proc` for the processes of `targets`, each with what its last sample found;
    /// closes the files of earlier scans that this one did not read. Lists all of `/proc`, and
    /// reads every process's children, once a sweep; in between reads the processes each
    /// target had, and the children of those whose [`Known::follow`] says so.
    pub fn scan(&mut self, targets: &[(Target, Known)]) -> HashMap<Target, Sample> {
        self.scans += 1;
        let out = self.walk(targets);
        let scan = self.scans;
        self.open.retain(|_, (_, seen)| *seen == scan);
        out
    }

    fn walk(&mut self, targets: &[(Target, Known)]) -> HashMap<Target, Sample> {
        // Single processes alone need no listing of /proc (releasing one is then a few reads).
        let listing = targets.iter().any(|(t, _)| matches!(t, Target::Group(_))) && self.lists_next();
        let mut out = if listing {
            self.swept = Some(Instant::now());
            self.list(targets)
        } else {
            self.reread(targets)
        };
        let leaders: Vec<i32> = targets.iter().map(|(t, _)| t.leader()).collect();
        for (target, known) in targets {
            let Target::Group(g) = *target else { continue };
            if listing || known.follow {
                if let Some(s) = out.get_mut(target) {
                    self.add_descendants(s, g, &leaders);
                }
            }
        }
        out
    }

    /// Every process of `targets`' groups, and each single target's process, from a listing of
    /// all of `/proc`.
    fn list(&mut self, targets: &[(Target, Known)]) -> HashMap<Target, Sample> {
        let mut out: HashMap<Target, Sample> = HashMap::new();
        let groups: HashMap<i32, Target> =
            targets.iter().filter_map(|(t, _)| if let Target::Group(g) = t { Some((*g, *t)) } else { None }).collect();
        let singles: HashMap<i32, Target> = targets
            .iter()
            .filter_map(|(t, _)| if let Target::Process(p) = t { Some((*p, *t)) } else { None })
            .collect();
        let Ok(dir) = fs::read_dir("/proc") else { return out };
        let pids: Vec<i32> =
            dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())).collect();
        for pid in pids {
            // A process in no target's group is left after one system call, not a read of its
            // `stat`: most of a server's processes (daemons, containers, per-CPU kernel threads, whose
            // group is 0) are no program's. The group read from `stat` decides for those kept.
            if !singles.contains_key(&pid) {
                match nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))) {
                    Ok(g) if !groups.contains_key(&g.as_raw()) => continue,
                    Err(nix::errno::Errno::ESRCH) => continue,
                    // A security policy that refuses the call (not the read): `stat` decides.
                    _ => {}
                }
            }
            let Some(stat) = self.read_stat(pid) else { continue };
            let target = match groups.get(&stat.pgrp).or_else(|| singles.get(&pid)) {
                Some(t) if t.matches(pid, stat.pgrp) => *t,
                _ => continue,
            };
            let sample = out.entry(target).or_default();
            if !sample.pids.contains(&pid) {
                self.add_process(sample, pid, &stat);
            }
        }
        out
    }

    /// Each target's leader and the processes its last sample had, those still its own: in its
    /// group (or its process), or a stray that is still the same process. No `getpgid` first:
    /// these are the programs' own processes, and their `stat` says their group.
    fn reread(&mut self, targets: &[(Target, Known)]) -> HashMap<Target, Sample> {
        let mut out = HashMap::with_capacity(targets.len());
        for (target, known) in targets {
            let mut s = Sample::default();
            let leader = target.leader();
            for pid in std::iter::once(leader).chain(known.pids.iter().copied().filter(|&p| p != leader)) {
                let Some(stat) = self.read_stat(pid) else { continue };
                if target.matches(pid, stat.pgrp) {
                    self.add_process(&mut s, pid, &stat);
                } else if let Some(stray) = known.strays.iter().find(|k| k.pid == pid && k.start == stat.start) {
                    if stat.state != 'Z' {
                        s.strays.push(*stray);
                        self.add_process(&mut s, pid, &stat);
                    }
                }
            }
            if !s.pids.is_empty() {
                out.insert(*target, s);
            }
        }
        out
    }

    /// Adds to `s`, a sample of group `group`, the descendants of its processes that left the group
    /// (transitively), from each process's list of children (its main thread's: launchers fork from
    /// it). A program's processes are its group and everything it started, whatever groups and
    /// sessions those make, except: another registered program (one of `leaders`) and its own; a
    /// `cpumgr` process (a nested `cpumgr run` or `attach` supervises its own program) and what it
    /// started; a process of another user (a `sudo` in a session of its own).
    fn add_descendants(&mut self, s: &mut Sample, group: i32, leaders: &[i32]) {
        // Read once a process outside the group is found: most programs have none.
        let mut owner = None;
        let mut i = 0;
        while i < s.pids.len() {
            let pid = s.pids[i];
            i += 1;
            let Some(children) = self.read(ProcFile::Children(pid)) else { continue };
            let children: Vec<i32> = children.split_ascii_whitespace().filter_map(|c| c.parse().ok()).collect();
            for child in children {
                if s.pids.contains(&child) || leaders.contains(&child) {
                    continue;
                }
                let Some(stat) = self.read_stat(child) else { continue };
                // One in the group: started since the listing, or found down the tree.
                if stat.pgrp == group {
                    self.add_process(s, child, &stat);
                    continue;
                }
                if uid_of_proc(child) != *owner.get_or_insert_with(|| uid_of_proc(group)) || is_cpumgr(child) {
                    continue;
                }
                s.strays.push(Stray { pid: child, start: stat.start });
                self.add_process(s, child, &stat);
            }
        }
    }

    /// Adds process `pid` (its `/proc/PID/stat` read as `stat`) and its threads to `s`. A
    /// process of one thread is that thread (its `stat` state is the thread's): its `task`
    /// directory is not read, which halves the reads of a walk over programs that are mostly
    /// single processes of one thread (sleeping or serial programs, supervisors' children before
    /// their runtime starts).
    fn add_process(&mut self, s: &mut Sample, pid: i32, stat: &Stat) {
        s.pids.push(pid);
        s.ticks += stat.ticks;
        let before = s.tids.len();
        self.add_threads(s, pid, stat);
        s.threads.push((s.tids.len() - before) as u32);
    }

    /// Adds the threads of process `pid` to `s`.
    fn add_threads(&mut self, s: &mut Sample, pid: i32, stat: &Stat) {
        if stat.threads == 1 {
            add_thread(s, pid, stat.state);
            return;
        }
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if let Some(stat) = self.read(ProcFile::TaskStat(pid, tid)).and_then(parse_stat) {
                add_thread(s, tid, stat.state);
            }
        }
    }
}

/// The owner of `/proc/PID` (the process's effective user at its start), without reading a file.
fn uid_of_proc(pid: i32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// Whether process `pid` runs this very binary (`cpumgr`: a supervisor or a manager).
fn is_cpumgr(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    static OURS: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();
    let ours = OURS.get_or_init(|| fs::metadata("/proc/self/exe").ok().map(|m| (m.dev(), m.ino())));
    let theirs = fs::metadata(format!("/proc/{pid}/exe")).ok().map(|m| (m.dev(), m.ino()));
    ours.is_some() && theirs == *ours
}

/// Adds to `s` the processes of `known` that are still the same processes and not in it: strays
/// a program had when it was last stopped or scanned, whose launcher may have died since
/// (orphans leave its tree, not its care).
pub fn add_known(s: &mut Sample, known: &[Stray]) {
    for k in known {
        if s.pids.contains(&k.pid) {
            continue;
        }
        if let Some(stat) = read_stat(k.pid).filter(|st| st.start == k.start) {
            s.strays.push(*k);
            Files::new(0, Duration::ZERO).add_process(s, k.pid, &stat);
        }
    }
}

/// Samples only the leading process of each of `targets` (the group leader, or the process): a
/// first look at programs that just registered, without walking all of `/proc`; the next full
/// [`scan`] finds the rest of their groups.
pub fn scan_leaders(targets: &[Target]) -> HashMap<Target, Sample> {
    let mut out = HashMap::new();
    for &target in targets {
        let pid = match target {
            Target::Group(p) | Target::Process(p) => p,
        };
        if let Some(stat) = read_stat(pid) {
            let s: &mut Sample = out.entry(target).or_default();
            s.leaders_only = true;
            Files::new(0, Duration::ZERO).add_process(s, pid, &stat);
        }
    }
    out
}

/// A `/proc` file's text, once.
fn read_proc(path: &str) -> Option<String> {
    let mut buf = Vec::new();
    read_into(&fs::File::open(path).ok()?, &mut buf).then(|| String::from_utf8(buf).ok()).flatten()
}

/// Reads an open `/proc` file whole into `buf` (which it resizes), from its start, in one `pread`
/// when it fits in 1 KiB (a `stat` line does); false if the read failed. The kernel writes such a
/// file whole into a buffer large enough, so a read that does not fill the buffer is its end
/// (`fs::read_to_string` pays a `statx` and reads of 32, 32, 64, 128, 256 bytes and one more for
/// the end).
fn read_into(file: &fs::File, buf: &mut Vec<u8>) -> bool {
    buf.resize(buf.len().max(1024), 0);
    let mut len = 0;
    loop {
        let Ok(n) = file.read_at(&mut buf[len..], len as u64) else { return false };
        len += n;
        if len < buf.len() {
            break;
        }
        buf.resize(2 * len, 0);
    }
    buf.truncate(len);
    true
}

fn read_stat(pid: i32) -> Option<Stat> {
    read_proc(&format!("/proc/{pid}/stat")).and_then(|t| parse_stat(&t))
}

/// When process `pid` started, clock ticks after boot; `None` when it is gone.
pub fn start_of(pid: i32) -> Option<u64> {
    read_stat(pid).map(|s| s.start)
}

/// Counts thread `tid` in state `state` into `s`; a thread that has exited is left out.
fn add_thread(s: &mut Sample, tid: i32, state: char) {
    match state {
        'Z' | 'X' => return,
        'R' => s.runnable += 1,
        'T' | 't' => s.stopped += 1,
        _ => {}
    }
    s.tids.push(tid);
}

/// The real user id owning `pid`, from `/proc/PID/status`.
pub fn uid_of(pid: i32) -> Option<u32> {
    let text = read_proc(&format!("/proc/{pid}/status"))?;
    text.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_ascii_whitespace().next()?.parse().ok()
}

/// The process group of `pid`.
pub fn pgid_of(pid: i32) -> Option<i32> {
    nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))).ok().map(|p| p.as_raw())
}

/// Clock ticks per second (`_SC_CLK_TCK`).
pub fn ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "4242 (a (b) c) R 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 1 1 1";
        assert_eq!(parse_stat(line), Some(Stat { state: 'R', pgrp: 4242, ticks: 300, threads: 3, start: 1 }));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn a_leader_scan_reads_only_the_leaders() {
        let me = std::process::id() as i32;
        let target = Target::Group(me);
        let s = scan_leaders(&[target, Target::Process(i32::MAX)]);
        assert_eq!(s.len(), 1, "a process that does not exist gives no sample");
        assert_eq!(s[&target].pids, vec![me]);
        assert!(s[&target].tids.contains(&me));
    }

    #[test]
    fn a_process_of_one_thread_is_sampled_from_its_stat_alone() {
        let mut child = std::process::Command::new("sleep").arg("600").spawn().expect("spawn sleep");
        let pid = child.id() as i32;
        let target = Target::Process(pid);
        // The first sample that satisfies `cond`, within a second (the child starts, or stops).
        let sample_when = |cond: &dyn Fn(&Sample) -> bool| {
            (0..1000)
                .map(|_| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    scan(&[target]).remove(&target).unwrap()
                })
                .find(|s| cond(s))
        };
        let sleeping = sample_when(&|s| s.runnable == 0 && s.stopped == 0);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGSTOP).unwrap();
        let stopped = sample_when(&|s| s.stopped == 1);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(sleeping.map(|s| (s.pids, s.tids)), Some((vec![pid], vec![pid])), "its one thread is seen asleep");
        assert_eq!(stopped.map(|s| (s.tids, s.runnable)), Some((vec![pid], 0)), "its one thread is seen stopped");
    }

    /// A scan through kept files reads each process anew (its CPU time grows), keeps the files
    /// of what it read, and closes those of a process that is gone.
    #[test]
    fn kept_files_read_a_process_anew_and_close_when_it_is_gone() {
        use std::os::unix::process::CommandExt;
        let mut busy =
            std::process::Command::new("sh").args(["-c", "while :; do :; done"]).process_group(0).spawn().unwrap();
        let target = Target::Group(busy.id() as i32);
        let mut files = Files::new(16, SWEEP);
        let ticks =
            |files: &mut Files| files.scan(&[(target, Known::default())]).remove(&target).map_or(0, |s| s.ticks);
        let first = ticks(&mut files);
        let kept = files.len();
        let mut later = first;
        for _ in 0..500 {
            later = ticks(&mut files);
            if later > first {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = busy.kill();
        let _ = busy.wait();
        assert!(kept >= 2, "its stat and children files are kept: {kept}");
        assert!(later > first, "the busy process's CPU time, read again through its kept file, grew: {first} {later}");
        assert_eq!(files.scan(&[(target, Known::default())]).get(&target), None);
        assert!(files.is_empty(), "{} files left open for a process that is gone", files.len());
    }

    /// A shell leading a process group of its own that runs `then` once a line is written to its
    /// standard input.
    fn leader_on_cue(then: &str) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("sh")
            .args(["-c", &format!("read x; {then}")])
            .process_group(0)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Between two listings of `/proc`, a scan reads again the processes the last sample had: a
    /// process the group's leader forked since is found by a scan that follows the tree (a new
    /// program's), or else by the next listing, which also finds one a parent outside the group
    /// put into it.
    #[test]
    fn between_listings_a_scan_rereads_what_it_knew_and_a_listing_finds_the_rest() {
        use std::io::Write;
        use std::os::unix::process::CommandExt;
        use std::process::Command;
        let mut leader = leader_on_cue("sleep 600 & wait");
        let g = leader.id() as i32;
        let target = Target::Group(g);
        let mut files = Files::new(64, Duration::from_secs(3600));
        let sample = |files: &mut Files, known: &Known| files.scan(&[(target, known.clone())]).remove(&target).unwrap();
        let first = sample(&mut files, &Known { follow: true, ..Known::default() });
        assert_eq!(first.pids, vec![g], "the first scan lists /proc");
        // A process of the group whose parent is this test, not the leader.
        let mut joined = Command::new("sleep").arg("600").process_group(g).spawn().unwrap();
        writeln!(leader.stdin.as_mut().unwrap()).unwrap();
        let forked = (0..2000).any(|_| {
            std::thread::sleep(Duration::from_millis(1));
            read_proc(&format!("/proc/{g}/task/{g}/children")).is_some_and(|c| !c.trim().is_empty())
        });
        let known = Known::of(&first);
        let reread = sample(&mut files, &known).pids;
        let followed = sample(&mut files, &Known { follow: true, ..known.clone() }).pids;
        let listed = Files::new(64, Duration::ZERO).scan(&[(target, known)]).remove(&target).unwrap().pids;
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), nix::sys::signal::SIGKILL);
        let (_, _) = (leader.wait(), joined.wait());
        let joined = joined.id() as i32;
        assert!(forked, "the leader forked");
        assert_eq!(reread, vec![g], "a scan between listings reads what it knew");
        assert_eq!(followed.len(), 2, "a scan that follows the tree finds the forked child: {followed:?}");
        assert!(!followed.contains(&joined), "a tree walk found a process outside the tree: {followed:?}");
        assert_eq!(listed.len(), 3, "a listing finds all three: {listed:?}");
        assert!(listed.contains(&joined), "{listed:?}");
    }

    /// A child a program starts between two listings is found within a sweep, by scans that
    /// start each from the last sample, as the manager's do.
    #[test]
    fn a_child_started_between_listings_is_found_within_a_sweep() {
        use std::io::Write;
        let mut leader = leader_on_cue("setsid sleep 600 & wait");
        let g = leader.id() as i32;
        let target = Target::Group(g);
        let sweep = Duration::from_millis(300);
        let mut files = Files::new(64, sweep);
        let mut last = files.scan(&[(target, Known::default())]).remove(&target).unwrap();
        writeln!(leader.stdin.as_mut().unwrap()).unwrap();
        let started = Instant::now();
        let mut scans = 0;
        // Until it is found in its own session (it starts in the group, then calls `setsid`).
        while last.strays.is_empty() && started.elapsed() < 20 * sweep {
            std::thread::sleep(Duration::from_millis(5));
            last = files.scan(&[(target, Known::of(&last))]).remove(&target).unwrap();
            scans += 1;
        }
        // Between listings the stray is read again through what the last sample knew.
        let again = files.scan(&[(target, Known::of(&last))]).remove(&target).unwrap();
        for p in last.pids.iter().filter(|&&p| p != g) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), nix::sys::signal::SIGKILL);
        }
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), nix::sys::signal::SIGKILL);
        let _ = leader.wait();
        assert_eq!(last.pids.len(), 2, "the leader and the stray it started, after {scans} scans: {last:?}");
        assert_eq!(last.strays.len(), 1, "{last:?}");
        assert_eq!(again.strays, last.strays, "a stray stays in the sample between listings");
    }

    #[test]
    fn a_group_scan_finds_the_groups_processes_and_no_others() {
        use std::os::unix::process::CommandExt;
        // A group of two (a shell leading it, and its sleeping child), and a process of another
        // group beside it: the walk skips the latter after its group id alone.
        let mut group =
            std::process::Command::new("sh").args(["-c", "sleep 600 & wait"]).process_group(0).spawn().unwrap();
        let mut other = std::process::Command::new("sleep").arg("600").process_group(0).spawn().unwrap();
        let leader = group.id() as i32;
        let target = Target::Group(leader);
        let mut pids = Vec::new();
        for _ in 0..1000 {
            pids = scan(&[target]).remove(&target).map(|s| s.pids).unwrap_or_default();
            if pids.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(leader), nix::sys::signal::SIGKILL);
        let _ = other.kill();
        let (_, _) = (group.wait(), other.wait());
        assert_eq!(pids.len(), 2, "the leader and its child: {pids:?}");
        assert!(pids.contains(&leader) && !pids.contains(&(other.id() as i32)), "{pids:?}");
    }

    #[test]
    fn a_group_scan_follows_descendants_into_their_own_sessions() {
        use std::os::unix::process::CommandExt;
        // The shell leads the group; its child makes a session of its own (as MPI launchers'
        // proxies and ranks do) and starts a grandchild there.
        let mut group = std::process::Command::new("sh")
            .args(["-c", "setsid sh -c 'sleep 600 & wait' & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let leader = group.id() as i32;
        let target = Target::Group(leader);
        let mut sample = Sample::default();
        for _ in 0..2000 {
            sample = scan(&[target]).remove(&target).unwrap_or_default();
            if sample.pids.len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let alive = sample.strays.iter().all(|s| s.alive());
        for p in sample.strays.iter().map(|s| s.pid).chain([leader]) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::SIGKILL);
        }
        let _ = group.wait();
        assert_eq!(sample.pids.len(), 3, "the leader, its child and grandchild: {sample:?}");
        assert_eq!(sample.strays.len(), 2, "both out of the group: {sample:?}");
        assert!(sample.strays.iter().all(|p| p.pid != leader && sample.pids.contains(&p.pid)));
        assert!(alive, "each stray is known by its pid and start time");
    }

    #[test]
    fn a_scan_finds_our_own_process_and_threads() {
        let me = std::process::id() as i32;
        let target = Target::Process(me);
        let s = scan(&[target]).remove(&target).unwrap();
        assert_eq!(s.pids, vec![me]);
        assert!(s.tids.contains(&me));
        assert!(s.runnable >= 1, "the scanning thread itself is running");
        assert_eq!(uid_of(me), Some(nix::unistd::getuid().as_raw()));
    }

    /// `threads` says which of `tids` are whose: a process of one thread, then this test's own
    /// process (added as a known stray) with a thread that waits until the check is done.
    #[test]
    fn each_process_has_its_threads_together() {
        let mut sleep = std::process::Command::new("sleep").arg("600").spawn().expect("spawn sleep");
        let (pid, me) = (sleep.id() as i32, std::process::id() as i32);
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let waiter = std::thread::spawn(move || {
            tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        let target = Target::Process(pid);
        let mut s = scan(&[target]).remove(&target).unwrap();
        add_known(&mut s, &[Stray { pid: me, start: start_of(me).unwrap() }]);
        drop(done_tx);
        waiter.join().unwrap();
        let _ = sleep.kill();
        let _ = sleep.wait();
        assert_eq!(s.pids, vec![pid, me]);
        assert_eq!(s.threads.len(), 2);
        assert_eq!(s.threads.iter().sum::<u32>() as usize, s.tids.len());
        assert_eq!(s.tids[..s.threads[0] as usize], [pid], "{s:?}");
        let mine = &s.tids[s.threads[0] as usize..];
        assert!(mine.contains(&me) && mine.contains(&tid), "{s:?}");
    }

    #[test]
    fn a_proc_file_is_read_whole_whatever_its_length() {
        let me = std::process::id();
        let limits = format!("/proc/{me}/limits");
        let whole = fs::read_to_string(&limits).unwrap();
        assert!(whole.len() > 1024, "longer than the first read: {} bytes", whole.len());
        assert_eq!(read_proc(&limits).unwrap(), whole);
        // Its counters change between two reads, not its lines.
        let status = format!("/proc/{me}/status");
        assert_eq!(read_proc(&status).unwrap().lines().count(), fs::read_to_string(&status).unwrap().lines().count());
        assert_eq!(read_proc("/proc/self/stat").and_then(|t| parse_stat(&t)).map(|s| s.pgrp), pgid_of(me as i32));
    }
}
