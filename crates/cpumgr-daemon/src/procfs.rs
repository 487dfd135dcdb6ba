//! What `/proc` says about the programs: which processes and threads each one has now, how many
//! of its threads are runnable (a spinning team is all runnable), and how much CPU time it used.
//!
//! One scan per quantum walks `/proc` once and keeps only the processes of registered programs
//! (a process of another group costs one `getpgid`), reading their threads' states from
//! `/proc/PID/task/TID/stat`. The manager's scans keep the files they read open ([`Files`]), so
//! that a quantum's read of a process it read before is one system call.

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
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let state = f.first()?.chars().next()?;
    let pgrp = f.get(2)?.parse().ok()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let threads = f.get(17)?.parse().ok()?;
    let start = f.get(19)?.parse().ok()?;
    Some(Stat { state, pgrp, ticks: utime + stime, threads, start })
}

/// One program's processes and threads at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Its processes.
    pub pids: Vec<i32>,
    /// Every thread of every process.
    pub tids: Vec<i32>,
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
    let targets: Vec<(Target, Vec<i32>)> = targets.iter().map(|t| (*t, Vec::new())).collect();
    Files::new(0, Duration::ZERO).scan(&targets)
}

/// How often the manager's scans list all of `/proc` to find a group's processes: those between follow
/// each group's tree from its leader and the processes the last scan found, and so miss only
/// what a parent outside the group moved into it, or an orphan whose parent started and left it
/// between two scans, until the next listing.
pub const SWEEP: Duration = Duration::from_secs(1);

/// The `/proc` files a scan read, kept open for the next: reading an open `/proc` file again
/// (`pread` at its start: the kernel writes it anew) is one system call where opening, reading
/// and closing it is three, and an open file stays its process's (a read after the process is
/// gone fails; a new process that reuses the pid is never read through it). What a scan did not
/// read is closed after it: the processes gone, and the programs no longer scanned (those held
/// stopped).
pub struct Files {
    open: HashMap<String, (fs::File, u64)>,
    /// Scans so far: each file is marked with the last one that read it.
    scans: u64,
    /// The most files kept open.
    most: usize,
    /// When a scan last listed all of `/proc`, and how often one does.
    swept: Option<Instant>,
    sweep: Duration,
}

impl Files {
    /// Keeps at most `most` files open; lists all of `/proc` once a `sweep`.
    pub fn new(most: usize, sweep: Duration) -> Files {
        Files { open: HashMap::new(), scans: 0, most, swept: None, sweep }
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

    /// The text of `/proc` file `path`, through the open file when there is one.
    fn read(&mut self, path: String) -> Option<String> {
        let scan = self.scans;
        if let Some((file, seen)) = self.open.get_mut(&path) {
            *seen = scan;
            let text = read_whole(file);
            if text.is_none() {
                self.open.remove(&path);
            }
            return text;
        }
        let file = fs::File::open(&path).ok()?;
        let text = read_whole(&file)?;
        if self.open.len() < self.most {
            self.open.insert(path, (file, scan));
        }
        Some(text)
    }

    fn read_stat(&mut self, pid: i32) -> Option<Stat> {
        self.read(format!("/proc/{pid}/stat")).and_then(|t| parse_stat(&t))
    }

    /// Scans `/proc` for the processes of `targets`, each with the pids its last sample had;
    /// closes the files of earlier scans that this one did not read. Lists all of `/proc` once a
    /// sweep; follows each group's tree in between.
    pub fn scan(&mut self, targets: &[(Target, Vec<i32>)]) -> HashMap<Target, Sample> {
        self.scans += 1;
        let out = self.walk(targets);
        let scan = self.scans;
        self.open.retain(|_, (_, seen)| *seen == scan);
        out
    }

    fn walk(&mut self, targets: &[(Target, Vec<i32>)]) -> HashMap<Target, Sample> {
        let mut out: HashMap<Target, Sample> = HashMap::new();
        let groups: HashMap<i32, Target> =
            targets.iter().filter_map(|(t, _)| if let Target::Group(g) = t { Some((*g, *t)) } else { None }).collect();
        let singles: HashMap<i32, Target> = targets
            .iter()
            .filter_map(|(t, _)| if let Target::Process(p) = t { Some((*p, *t)) } else { None })
            .collect();
        // Single processes alone need no walk of all of /proc (releasing one is then a few reads).
        let pids: Vec<i32> = if groups.is_empty() {
            singles.keys().copied().collect()
        } else if self.swept.is_some_and(|t| t.elapsed() < self.sweep) {
            // Each target's leader and the processes it had: the trees below them follow.
            let mut pids = Vec::new();
            for (t, known) in targets {
                pids.push(t.leader());
                pids.extend(known.iter().filter(|&&p| p != t.leader()));
            }
            pids
        } else {
            self.swept = Some(Instant::now());
            let Ok(dir) = fs::read_dir("/proc") else { return out };
            dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())).collect()
        };
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
        let leaders: Vec<i32> = targets.iter().map(|(t, _)| t.leader()).collect();
        for (target, s) in out.iter_mut() {
            if let Target::Group(g) = target {
                self.add_descendants(s, *g, &leaders);
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
            let Some(children) = self.read(format!("/proc/{pid}/task/{pid}/children")) else { continue };
            for child in children.split_ascii_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
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
        if stat.threads == 1 {
            add_thread(s, pid, stat.state);
            return;
        }
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if let Some(stat) = self.read(format!("/proc/{pid}/task/{tid}/stat")).and_then(|t| parse_stat(&t)) {
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
    read_whole(&fs::File::open(path).ok()?)
}

/// An open `/proc` file's text, from its start, in one `pread` when it fits in 1 KiB (a `stat`
/// line does). The kernel writes such a file whole into a buffer large enough, so a read that
/// does not fill the buffer is its end (`fs::read_to_string` pays a `statx` and reads of 32, 32,
/// 64, 128, 256 bytes and one more for the end).
fn read_whole(file: &fs::File) -> Option<String> {
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        let n = file.read_at(&mut buf[len..], len as u64).ok()?;
        len += n;
        if len < buf.len() {
            break;
        }
        buf.resize(2 * len, 0);
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

fn read_stat(pid: i32) -> Option<Stat> {
    read_proc(&format!("/proc/{pid}/stat")).and_then(|t| parse_stat(&t))
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
        let ticks = |files: &mut Files| files.scan(&[(target, vec![])]).remove(&target).map_or(0, |s| s.ticks);
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
        assert_eq!(files.scan(&[(target, vec![])]).get(&target), None);
        assert!(files.is_empty(), "{} files left open for a process that is gone", files.len());
    }

    /// Between two listings of `/proc`, a scan follows the group's tree: it finds a process the
    /// group's leader forked since, not one a parent outside the group put into it; the next
    /// listing finds that one too.
    #[test]
    fn between_listings_a_scan_follows_the_groups_tree() {
        use std::io::Write;
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let mut leader = Command::new("sh")
            .args(["-c", "read x; sleep 600 & wait"])
            .process_group(0)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let g = leader.id() as i32;
        let target = Target::Group(g);
        let mut files = Files::new(64, Duration::from_secs(3600));
        let pids = |files: &mut Files, known: Vec<i32>| files.scan(&[(target, known)]).remove(&target).unwrap().pids;
        assert_eq!(pids(&mut files, vec![]), vec![g], "the first scan lists /proc");
        // A process of the group whose parent is this test, not the leader.
        let mut joined = Command::new("sleep").arg("600").process_group(g).spawn().unwrap();
        writeln!(leader.stdin.as_mut().unwrap()).unwrap();
        let mut found = Vec::new();
        for _ in 0..2000 {
            found = pids(&mut files, vec![g]);
            if found.len() > 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let swept = Files::new(64, Duration::ZERO).scan(&[(target, vec![g])]).remove(&target).unwrap().pids;
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), nix::sys::signal::SIGKILL);
        let (_, _) = (leader.wait(), joined.wait());
        let joined = joined.id() as i32;
        assert_eq!(found.len(), 2, "the leader and the child it forked: {found:?}");
        assert!(!found.contains(&joined), "a tree walk found a process outside the tree: {found:?}");
        assert_eq!(swept.len(), 3, "a listing finds all three: {swept:?}");
        assert!(swept.contains(&joined), "{swept:?}");
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
