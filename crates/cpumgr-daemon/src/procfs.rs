//! What `/proc` says about the programs: which processes and threads each one has now, how many
//! of its threads are runnable (a spinning team is all runnable), and how much CPU time it used.
//!
//! One scan per quantum walks `/proc` once and keeps only the processes of registered programs,
//! reading their threads' states from `/proc/PID/task/TID/stat`.
//!
//! A program's processes are those its [`Target`] reaches (its process group, or its one
//! process), every descendant of them by parent pid as of the walk, whatever its group or session
//! (a child that called `setsid`), and every process counted in an earlier walk while it lives
//! (a [`Member`] kept by pid and start time: a child that left the group stays the program's once
//! its parent exited and it was re-parented). The manager's own process is never a descendant.

use std::collections::HashMap;
use std::fs;
use std::io::Read;

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
    /// Parent process.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// Start time after boot, in clock ticks (field 22): tells a process from a later one with
    /// the same pid.
    pub start: u64,
    /// User plus system time, in clock ticks.
    pub ticks: u64,
    /// Threads in the process (field 20).
    pub threads: u32,
}

/// Parses a `stat` line. The command name (field 2) may hold spaces and parentheses, so the
/// fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let state = f.first()?.chars().next()?;
    let ppid = f.get(1)?.parse().ok()?;
    let pgrp = f.get(2)?.parse().ok()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let threads = f.get(17)?.parse().ok()?;
    let start = f.get(19)?.parse().ok()?;
    Some(Stat { state, ppid, pgrp, ticks: utime + stime, threads, start })
}

/// A process of a program that a signal to the program's [`Target`] does not reach (it left the
/// group, or descends from a single process): stopped, continued and released on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    /// Its pid.
    pub pid: i32,
    /// Its start time ([`Stat::start`]), so that a later process given the same pid is not taken
    /// for it.
    pub start: u64,
}

impl Member {
    /// Whether the process is still this one (alive, and not a later process with its pid).
    pub fn alive(&self) -> bool {
        read_stat(self.pid).is_some_and(|s| s.start == self.start && s.state != 'Z')
    }
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
    /// CPU time of its live processes, clock ticks.
    pub ticks: u64,
    /// Its processes that a signal to its target does not reach (also in `pids`).
    pub detached: Vec<Member>,
}

/// Scans `/proc` for the processes of `programs`: each one's target with the members found
/// apart from it by earlier scans (its last [`Sample::detached`]). One walk reads every process's
/// `stat` once; the descendants come from the parent pids read in the same walk.
pub fn scan(programs: &[(Target, Vec<Member>)]) -> HashMap<Target, Sample> {
    let mut out: HashMap<Target, Sample> = HashMap::new();
    if programs.is_empty() {
        return out;
    }
    let mut groups = HashMap::new();
    let mut singles = HashMap::new();
    let mut kept = HashMap::new();
    for (target, members) in programs {
        match *target {
            Target::Group(g) => groups.insert(g, *target),
            Target::Process(p) => singles.insert(p, *target),
        };
        kept.extend(members.iter().map(|m| (*m, *target)));
    }
    let Ok(dir) = fs::read_dir("/proc") else { return out };
    let procs: Vec<(i32, Stat)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter_map(|pid| Some((pid, read_stat(pid)?)))
        .collect();
    // Each process's program, and whether its target's signal misses it: first whom a target
    // reaches or an earlier scan counted, then their descendants not already someone's.
    let mut owner: Vec<Option<(Target, bool)>> = procs
        .iter()
        .map(|(pid, stat)| match groups.get(&stat.pgrp).or_else(|| singles.get(pid)) {
            Some(t) if t.matches(*pid, stat.pgrp) => Some((*t, false)),
            _ => kept.get(&Member { pid: *pid, start: stat.start }).map(|t| (*t, true)),
        })
        .collect();
    let me = std::process::id() as i32;
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, (pid, stat)) in procs.iter().enumerate() {
        if *pid != me {
            children.entry(stat.ppid).or_default().push(i);
        }
    }
    let mut queue: Vec<usize> = (0..procs.len()).filter(|&i| owner[i].is_some()).collect();
    while let Some(i) = queue.pop() {
        let Some((target, _)) = owner[i] else { continue };
        for &c in children.get(&procs[i].0).map_or(&[][..], Vec::as_slice) {
            if owner[c].is_none() {
                owner[c] = Some((target, true));
                queue.push(c);
            }
        }
    }
    for ((pid, stat), owner) in procs.iter().zip(owner) {
        let Some((target, detached)) = owner else { continue };
        let s = out.entry(target).or_default();
        add_process(s, *pid, stat);
        if detached {
            s.detached.push(Member { pid: *pid, start: stat.start });
        }
    }
    out
}

/// Samples only the leading process of each of `targets` (the group leader, or the process): a
/// first look at programs that just registered, without walking all of `/proc`; the next full
/// [`scan`] finds the rest of their groups.
pub fn scan_leaders(targets: impl IntoIterator<Item = Target>) -> HashMap<Target, Sample> {
    let mut out = HashMap::new();
    for target in targets {
        let pid = match target {
            Target::Group(p) | Target::Process(p) => p,
        };
        if let Some(stat) = read_stat(pid) {
            add_process(out.entry(target).or_default(), pid, &stat);
        }
    }
    out
}

/// A `/proc` file's text, in one `read` when it fits in 1 KiB (a `stat` line does). The kernel
/// writes such a file whole into a buffer large enough, so a read that does not fill the buffer
/// is its end. `fs::read_to_string` pays a `statx` (the size is 0) and reads of 32, 32, 64, 128,
/// 256 bytes and one more for the end: a walk of `/proc` made three times the system calls.
fn read_proc(path: &str) -> Option<String> {
    let mut file = fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        let n = file.read(&mut buf[len..]).ok()?;
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

/// Adds process `pid` (its `/proc/PID/stat` read as `stat`) and its threads to `s`. A process
/// of one thread is that thread (its `stat` state is the thread's): its `task` directory is not
/// read, which halves the reads of a walk over programs that are mostly single processes of one
/// thread (sleeping or serial programs, supervisors' children before their runtime starts).
fn add_process(s: &mut Sample, pid: i32, stat: &Stat) {
    s.pids.push(pid);
    s.ticks += stat.ticks;
    if stat.threads == 1 {
        add_thread(s, pid, stat.state);
    } else {
        add_threads(pid, s);
    }
}

fn add_threads(pid: i32, s: &mut Sample) {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let stat = read_proc(&format!("/proc/{pid}/task/{tid}/stat")).and_then(|t| parse_stat(&t));
        if let Some(stat) = stat {
            add_thread(s, tid, stat.state);
        }
    }
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
        let stat = Stat { state: 'R', ppid: 1, pgrp: 4242, ticks: 300, threads: 3, start: 1 };
        assert_eq!(parse_stat(line), Some(stat));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn a_leader_scan_reads_only_the_leaders() {
        let me = std::process::id() as i32;
        let target = Target::Group(me);
        let s = scan_leaders([target, Target::Process(i32::MAX)]);
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
                    scan(&[(target, Vec::new())]).remove(&target).unwrap()
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

    /// A shell leading a process group of its own, and its child `sleep` once in a session of its
    /// own.
    fn leader_with_a_setsid_child() -> (std::process::Child, i32) {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 600 & echo $!; wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let mut line = String::new();
        std::io::BufReader::new(sh.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let child: i32 = line.trim().parse().unwrap();
        let left = (0..10_000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            pgid_of(child) == Some(child)
        });
        assert!(left, "the child's setsid");
        (sh, child)
    }

    #[test]
    fn a_descendant_that_left_the_group_is_the_programs_and_stays_it_once_orphaned() {
        let (mut sh, child) = leader_with_a_setsid_child();
        let _ = sh.kill();
        let _ = sh.wait();
        let target = Target::Group(sh.id() as i32);
        // Its parent is gone: only the member kept from an earlier scan finds it.
        let start = read_stat(child).map(|s| s.start);
        let kept = vec![Member { pid: child, start: start.unwrap_or(0) }];
        let found = scan(&[(target, kept.clone())]).remove(&target);
        let unkept = scan(&[(target, Vec::new())]).remove(&target);
        let later = scan(&[(target, vec![Member { pid: child, start: start.unwrap_or(0) + 1 }])]).remove(&target);
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child), nix::sys::signal::SIGKILL);
        assert_eq!(found.map(|s| (s.pids, s.detached)), Some((vec![child], kept)));
        assert_eq!(unkept, None, "an orphan not counted before is nobody's");
        assert_eq!(later, None, "another process with the same pid is not the member");
    }

    #[test]
    fn a_descendant_in_a_session_of_its_own_is_found_apart_from_its_group() {
        let (mut sh, child) = leader_with_a_setsid_child();
        let leader = sh.id() as i32;
        let target = Target::Group(leader);
        let found = scan(&[(target, Vec::new())]).remove(&target);
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child), nix::sys::signal::SIGKILL);
        let _ = sh.kill();
        let _ = sh.wait();
        let found = found.expect("the program is sampled");
        let mut pids = found.pids.clone();
        pids.sort_unstable();
        assert_eq!(pids, vec![leader.min(child), leader.max(child)]);
        assert_eq!(found.detached.iter().map(|m| m.pid).collect::<Vec<_>>(), vec![child]);
        assert!(!Target::Group(leader).includes(child), "the group's signal misses it");
    }

    #[test]
    fn a_scan_finds_our_own_process_and_threads() {
        let me = std::process::id() as i32;
        let target = Target::Process(me);
        let s = scan(&[(target, Vec::new())]).remove(&target).unwrap();
        // With the children other tests run meanwhile, which are ours too.
        assert!(s.pids.contains(&me), "{:?}", s.pids);
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
