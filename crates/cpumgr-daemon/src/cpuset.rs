//! Enforcement through the cgroup cpuset controller: each program's processes live in a cgroup of
//! the manager's whose `cpuset.cpus` is the program's CPU set, so one write moves every thread,
//! and children the program forks are born inside it (no per-thread `sched_setaffinity` each
//! quantum, no thread started between two quanta on a CPU it does not own).
//!
//! The tree: `<the manager's own cpuset cgroup>/cpumgr-<pid>-<n>/prog-<id>`. Cgroup v2 is used
//! when the unified hierarchy offers the cpuset controller and the manager can enable it below its
//! own cgroup; else cgroup v1 when a hierarchy with the cpuset controller is mounted (v1 needs
//! `cpuset.mems` set before a process can join; it is copied from the parent). Either needs write
//! access to the tree (root, or a delegated subtree); without it the manager uses affinity.
//!
//! Only processes whose cgroup holds the manager's own are moved ([`crate::cgroup_owner`]): a
//! program with a process in a cpuset cgroup someone else made (a Slurm step's, a container's)
//! is never moved, and is left to affinity ([`Cpusets::apply`] says so), which the kernel
//! intersects with that cgroup's CPUs.
//!
//! Nothing is left behind: releasing a program moves every process of its cgroup back to the
//! cgroup its leader came from and removes the program's cgroup; the manager's own directory goes
//! when the manager stops. A manager killed outright leaves its directory: its programs'
//! supervisors move their processes out ([`escape`], from [`crate::enforce::release`]), and the
//! next manager removes directories of managers that are gone.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cpumgr_core::{CpuSet, ProgramId};

use crate::cgroup_owner::{self, Owner, PREFIX};

/// Which cgroup hierarchy holds the cpuset controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// The unified hierarchy (cgroup v2).
    V2,
    /// A v1 hierarchy with the cpuset controller.
    V1,
}

/// A mounted hierarchy with the cpuset controller, and how cgroup paths map onto it.
#[derive(Debug, Clone)]
struct Hierarchy {
    flavour: Flavour,
    /// Where it is mounted.
    mount: PathBuf,
    /// The cgroup path the mount shows as its root (`/` unless in a container).
    root: String,
}

impl Hierarchy {
    /// The hierarchy of `flavour` from `/proc/self/mountinfo`, if mounted.
    fn find(flavour: Flavour) -> Option<Hierarchy> {
        let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
        info.lines().find_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            let (root, mount) = (*pre.get(3)?, *pre.get(4)?);
            let ok = match flavour {
                Flavour::V2 => post.first() == Some(&"cgroup2"),
                Flavour::V1 => post.first() == Some(&"cgroup") && post.get(2)?.split(',').any(|o| o == "cpuset"),
            };
            ok.then(|| Hierarchy { flavour, mount: PathBuf::from(mount), root: root.to_string() })
        })
    }

    /// The directory of `pid`'s cgroup in this hierarchy (0: the caller).
    fn dir_of(&self, pid: i32) -> Option<PathBuf> {
        let file = if pid == 0 { "/proc/self/cgroup".to_string() } else { format!("/proc/{pid}/cgroup") };
        let text = fs::read_to_string(file).ok()?;
        let path = text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let mine = match self.flavour {
                Flavour::V2 => controllers.is_empty(),
                Flavour::V1 => controllers.split(',').any(|c| c == "cpuset"),
            };
            mine.then_some(path)
        })?;
        let rel = path.strip_prefix(self.root.trim_end_matches('/')).unwrap_or(path);
        Some(self.mount.join(rel.trim_start_matches('/')))
    }

    /// The directory of `pid`'s cgroup and who owns it, for a manager whose own cgroup is `own`.
    fn cgroup_of(&self, pid: i32, own: &Path) -> Option<(PathBuf, Owner)> {
        let dir = self.dir_of(pid)?;
        let owner = cgroup_owner::owner(&dir, own);
        Some((dir, owner))
    }
}

/// The CPUs or memory nodes (`what`: `cpus`, `mems`) the cgroup at `dir` really has: v1's
/// `cpuset.effective_X`, v2's `cpuset.X.effective`.
fn effective(dir: &Path, what: &str) -> io::Result<String> {
    fs::read_to_string(dir.join(format!("cpuset.effective_{what}")))
        .or_else(|_| fs::read_to_string(dir.join(format!("cpuset.{what}.effective"))))
        .map(|s| s.trim().to_string())
}

/// Moves process `pid` into the cgroup at `dir` (a process that is gone is not an error).
fn attach(dir: &Path, pid: i32) -> io::Result<()> {
    match fs::write(dir.join("cgroup.procs"), pid.to_string()) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r,
    }
}

/// The processes in the cgroup at `dir`.
fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Moves every process of the cgroup at `dir` to `to` and removes `dir` (and its children). A
/// process that is exiting can linger in the list a moment, so the removal is tried a few times.
fn empty_and_remove(dir: &Path, to: &Path) -> io::Result<()> {
    if let Ok(children) = fs::read_dir(dir) {
        for c in children.flatten().filter(|c| c.file_type().is_ok_and(|t| t.is_dir())) {
            empty_and_remove(&c.path(), to)?;
        }
    }
    let mut last = Ok(());
    for _ in 0..50 {
        for pid in procs(dir) {
            attach(to, pid)?;
        }
        last = fs::remove_dir(dir);
        match &last {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            _ => return last,
        }
    }
    last
}

/// One program's cgroup.
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    /// Where its leader was before: where its processes go back.
    home: PathBuf,
    /// The CPU set last written.
    cpus: Option<CpuSet>,
    /// Processes already moved in (their children are born inside).
    attached: HashSet<i32>,
}

/// The manager's cpuset tree.
#[derive(Debug)]
pub struct Cpusets {
    hierarchy: Hierarchy,
    /// `cpumgr-<pid>-<n>`, the manager's directory.
    dir: PathBuf,
    /// `cpuset.mems` for the programs' cgroups (v1 requires it).
    mems: String,
    programs: HashMap<ProgramId, Group>,
    /// Programs left to affinity: one of their processes lives in a foreign cgroup.
    foreign: HashSet<ProgramId>,
}

impl Cpusets {
    /// Builds the manager's tree in the first hierarchy that accepts it (v2, then v1); why none
    /// does otherwise. The manager's directory gets every CPU and memory node of the manager's own
    /// cgroup, so a program's cgroup can hold any of them (a new program may keep the CPUs it
    /// started with for a while, managed or not).
    pub fn open() -> Result<Cpusets, String> {
        let mut why = Vec::new();
        for flavour in [Flavour::V2, Flavour::V1] {
            let Some(h) = Hierarchy::find(flavour) else {
                why.push(format!("{flavour:?}: no hierarchy with the cpuset controller"));
                continue;
            };
            match Self::open_in(h) {
                Ok(c) => return Ok(c),
                Err(e) => why.push(format!("{flavour:?}: {e}")),
            }
        }
        Err(why.join("; "))
    }

    fn open_in(h: Hierarchy) -> io::Result<Cpusets> {
        let own = h.dir_of(0).ok_or_else(|| io::Error::other("this process is in no cgroup of it"))?;
        if h.flavour == Flavour::V2 {
            let controllers = fs::read_to_string(own.join("cgroup.controllers"))?;
            if !controllers.split_whitespace().any(|c| c == "cpuset") {
                return Err(io::Error::other(format!("{}: the cpuset controller is not offered", own.display())));
            }
            fs::write(own.join("cgroup.subtree_control"), "+cpuset")?;
        }
        remove_stale(&own);
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
        let dir = own.join(format!("{PREFIX}{}-{n}", std::process::id()));
        fs::create_dir(&dir)?;
        let setup = || -> io::Result<String> {
            let mems = effective(&own, "mems")?;
            if h.flavour == Flavour::V2 {
                fs::write(dir.join("cgroup.subtree_control"), "+cpuset")?;
            }
            fs::write(dir.join("cpuset.mems"), &mems)?;
            fs::write(dir.join("cpuset.cpus"), effective(&own, "cpus")?)?;
            Ok(mems)
        };
        match setup() {
            Ok(mems) => Ok(Cpusets { hierarchy: h, dir, mems, programs: HashMap::new(), foreign: HashSet::new() }),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// `cpuset-v2` or `cpuset-v1`, as `status` reports it.
    pub fn name(&self) -> &'static str {
        match self.hierarchy.flavour {
            Flavour::V2 => "cpuset-v2",
            Flavour::V1 => "cpuset-v1",
        }
    }

    /// The manager's directory in the hierarchy.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manager's own cgroup, which its directory is in.
    fn own(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// Whether program `id` is left to affinity: a process of it lives in a cgroup someone else
    /// made.
    pub fn is_foreign(&self, id: ProgramId) -> bool {
        self.foreign.contains(&id)
    }

    /// Confines program `id` (leader `leader`, processes `pids`) to `cpus`: its cgroup is created
    /// on first use, its CPU set written when it changes, and processes not yet inside moved in.
    /// False, with nothing moved, when a process of it lives in a cgroup someone else made: the
    /// caller confines it by affinity (a program already inside is first moved back home). The
    /// choice is logged once per program.
    pub fn apply(&mut self, id: ProgramId, leader: i32, pids: &[i32], cpus: &CpuSet) -> io::Result<bool> {
        if self.foreign.contains(&id) {
            return Ok(false);
        }
        let attached = self.programs.get(&id).map(|g| &g.attached);
        // The cgroup of each process not inside yet, read once; a new program's leader's is also
        // where its processes go home to.
        let (mut foreign, mut leader_cgroup) = (None, None);
        for p in pids.iter().copied().filter(|p| !attached.is_some_and(|a| a.contains(p))) {
            match self.hierarchy.cgroup_of(p, self.own()) {
                Some((dir, Owner::Foreign)) => {
                    foreign = Some(dir);
                    break;
                }
                Some(cgroup) if p == leader => leader_cgroup = Some(cgroup),
                _ => {}
            }
        }
        if let Some(cgroup) = foreign {
            tracing::info!(id = id.0, cgroup = %cgroup.display(), "confined by affinity: a process of it lives in a cpuset cgroup the manager did not make, and stays there");
            self.release(id);
            self.foreign.insert(id);
            return Ok(false);
        }
        let g = match self.programs.entry(id) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let own = self.dir.parent().unwrap_or(&self.dir);
                let (dir_of, owner) = leader_cgroup
                    .or_else(|| self.hierarchy.cgroup_of(leader, own))
                    .ok_or_else(|| io::Error::other(format!("no cgroup for process {leader}")))?;
                // A process in a manager's tree (one a dead manager left) goes home to the
                // manager's own cgroup, not to a directory that is going away.
                let home = match owner {
                    Owner::Manager => own.to_path_buf(),
                    _ => dir_of,
                };
                let dir = self.dir.join(format!("prog-{}", id.0));
                fs::create_dir(&dir)
                    .or_else(|e| if e.kind() == io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) })?;
                fs::write(dir.join("cpuset.mems"), &self.mems)?;
                tracing::info!(id = id.0, cgroup = %dir.display(), "confined by its cgroup in the manager's cpuset tree");
                v.insert(Group { dir, home, cpus: None, attached: HashSet::new() })
            }
        };
        if g.cpus.as_ref() != Some(cpus) {
            fs::write(g.dir.join("cpuset.cpus"), cpus.to_string())?;
            g.cpus = Some(cpus.clone());
        }
        for &pid in pids {
            if !g.attached.contains(&pid) {
                attach(&g.dir, pid)?;
                g.attached.insert(pid);
            }
        }
        Ok(true)
    }

    /// Moves every process of program `id`'s cgroup back where its leader came from and removes
    /// the cgroup. Nothing to do for a program that never had one (or was left to affinity).
    pub fn release(&mut self, id: ProgramId) {
        self.foreign.remove(&id);
        if let Some(g) = self.programs.remove(&id) {
            if let Err(e) = empty_and_remove(&g.dir, &g.home) {
                tracing::warn!(id = id.0, dir = %g.dir.display(), "cannot empty and remove a program's cgroup: {e}");
            }
        }
    }
}

impl Drop for Cpusets {
    /// Releases every program still inside and removes the manager's directory.
    fn drop(&mut self) {
        let ids: Vec<ProgramId> = self.programs.keys().copied().collect();
        for id in ids {
            self.release(id);
        }
        let parent = self.dir.parent().map(Path::to_path_buf).unwrap_or_default();
        if let Err(e) = empty_and_remove(&self.dir, &parent) {
            tracing::warn!(dir = %self.dir.display(), "cannot remove the manager's cgroup: {e}");
        }
    }
}

/// Removes the directories of managers that are gone (`cpumgr-<pid>-<n>` whose pid is not
/// alive) below `own`, moving what is left in them up to `own`.
fn remove_stale(own: &Path) {
    let Ok(entries) = fs::read_dir(own) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = cgroup_owner::manager_pid(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        match empty_and_remove(&e.path(), own) {
            Ok(()) => tracing::info!(dir = %e.path().display(), "removed the cgroup of a manager that is gone"),
            Err(err) => tracing::warn!(dir = %e.path().display(), "cannot remove a stale cgroup: {err}"),
        }
    }
}

/// Moves process `pid` out of any manager's cpuset cgroup, to the cgroup above the manager's
/// directory; false when it was in none. What a supervisor does when its manager died without
/// releasing (a process left in a cpuset cannot widen its affinity beyond it).
pub fn escape(pid: i32) -> bool {
    for flavour in [Flavour::V2, Flavour::V1] {
        let Some(h) = Hierarchy::find(flavour) else { continue };
        let Some(dir) = h.dir_of(pid) else { continue };
        let Some(top) = dir
            .ancestors()
            .find(|d| d.file_name().is_some_and(|n| cgroup_owner::manager_pid(&n.to_string_lossy()).is_some()))
        else {
            continue;
        };
        if let Some(out) = top.parent() {
            match attach(out, pid) {
                Ok(()) => return true,
                Err(e) => tracing::warn!(pid, "cannot move out of {}: {e}", dir.display()),
            }
        }
    }
    false
}
