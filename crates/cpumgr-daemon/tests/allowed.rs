//! What a program is allowed, on real processes: the CPUs its processes could use when the
//! manager first saw them (a batch system's binding, `taskset`) bound the CPUs it is given, and
//! each process gets its own affinity back when it is released (a job step that Slurm binds
//! task by task). Processes are `sleep`s given their affinity before they execute it, in one
//! process group, as Slurm's tasks are.

mod support;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_daemon::enforce::Choice;
use cpumgr_daemon::{affinity, Settings};
use cpumgr_proto::{Reply, Request};
use support::{wait_for, Live};

/// Processes of one group, killed with it and reaped on drop.
struct Group(Vec<Child>);

impl Group {
    /// A new group led by a `sleep` with the affinity `cpus`.
    fn lead(cpus: &str) -> Group {
        Group(vec![sleep(cpus, 0)])
    }

    /// Starts a `sleep` with the affinity `cpus` in the group; its pid.
    fn add(&mut self, cpus: &str) -> i32 {
        let child = sleep(cpus, self.leader());
        let pid = child.id() as i32;
        self.0.push(child);
        pid
    }

    fn leader(&self) -> i32 {
        self.0[0].id() as i32
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.leader()), nix::sys::signal::SIGKILL);
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// `sleep 600` in process group `group` (0: a group of its own), bound to `cpus` before it runs.
fn sleep(cpus: &str, group: i32) -> Child {
    let mask = affinity::mask(&CpuSet::parse(cpus).unwrap()).unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("600").process_group(group).stdin(Stdio::null());
    // SAFETY: one system call, no allocation, between fork and exec.
    unsafe { cmd.pre_exec(move || affinity::set_mask(0, &mask)) };
    cmd.spawn().expect("spawn sleep")
}

fn cpus_of(pid: i32) -> CpuSet {
    affinity::get(pid).unwrap_or_default()
}

fn set(list: &str) -> CpuSet {
    CpuSet::parse(list).unwrap()
}

fn manager(backend: Choice) -> Live {
    Live::start(&Settings {
        policy: "equipartition".into(),
        quantum: Duration::from_millis(50),
        cpus: Some(set("0-1")),
        backend,
        ..Default::default()
    })
}

/// A step of two tasks, task 0 (the group's leader) bound to CPU 0 and task 1 to CPU 1,
/// registered at task 0: the program is allowed both (each process's mask is read at its first
/// confinement), runs on both, and at release each task gets its own CPU back, while a process
/// that appeared after the program was confined gets the program's whole allowed set.
fn tasks_get_their_own_masks_back(backend: Choice) {
    let live = manager(backend);
    let mut step = Group::lead("0");
    let task1 = step.add("1");
    let leader = step.leader();
    let (id, _slot) = live.register(leader, 2);
    live.wait_status("the step allowed both tasks' CPUs, on both", |s| {
        s.programs.iter().any(|p| p.id == id && p.count == 2 && p.allowed.is_none())
    });
    // Confined: pinned to both CPUs, or in the program's cgroup (whose CPUs the kernel
    // intersects with each task's own mask, which then stays as it was).
    let confined = |pid: i32| match backend {
        Choice::Cpuset => std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|text| text.lines().any(|l| l.ends_with(&format!("/prog-{id}")))),
        _ => cpus_of(pid) == set("0-1"),
    };
    wait_for("both tasks confined", || confined(leader) && confined(task1));
    // Started after the confinement, bound elsewhere than the program's CPUs would be (as a
    // child of a confined task inherits them): the manager confines it too.
    let later = step.add("1");
    wait_for("the later process confined", || confined(later));
    let later_too = step.add("0");
    wait_for("the second later process confined", || confined(later_too));
    assert_eq!(live.conn.call(&Request::Unregister { id }).unwrap().0, Reply::Ok);
    assert_eq!(cpus_of(leader), set("0"), "task 0 back on its own CPU");
    assert_eq!(cpus_of(task1), set("1"), "task 1 back on its own CPU");
    assert_eq!(cpus_of(later), set("0-1"), "a later process gets the program's allowed CPUs");
    assert_eq!(cpus_of(later_too), set("0-1"));
}

#[test]
fn each_task_gets_its_own_mask_back_at_release() {
    tasks_get_their_own_masks_back(Choice::Affinity);
}

#[test]
#[cfg_attr(not(has_cpusets), ignore = "needs a writable cpuset cgroup hierarchy (root)")]
fn each_task_gets_its_own_mask_back_from_the_cpuset_backend() {
    if let Err(e) = cpumgr_daemon::cpuset::Cpusets::open() {
        panic!("the build found a writable cpuset tree, this run cannot write it: {e}");
    }
    tasks_get_their_own_masks_back(Choice::Cpuset);
}

/// A program bound to CPU 1, registered first and asking for both CPUs, beside one allowed both:
/// it is only ever given CPU 1 (one CPU: the policy sees it capped), the other gets CPU 0, and
/// `status` says what the bound one is allowed.
#[test]
fn a_program_allowed_one_cpu_is_only_given_that_cpu() {
    let live = manager(Choice::Affinity);
    let narrow = Group::lead("1");
    let wide = Group::lead("0-1");
    let (n, _ns) = live.register(narrow.leader(), 2);
    let (w, _ws) = live.register(wide.leader(), 2);
    let program = |s: &cpumgr_proto::msg::StatusReport, id| s.programs.iter().find(|p| p.id == id).cloned().unwrap();
    live.wait_status("CPU 1 to the bound one, CPU 0 to the other", |s| {
        program(s, n).cpus == set("1") && program(s, w).cpus == set("0")
    });
    wait_for("both confined", || cpus_of(narrow.leader()) == set("1") && cpus_of(wide.leader()) == set("0"));
    for _ in 0..20 {
        let s = live.status();
        let (a, b) = (program(&s, n), program(&s, w));
        assert!(a.cpus.is_subset(&set("1")) && a.count <= 1, "{a:?}");
        assert_eq!((a.allowed, b.allowed), (Some(set("1")), None));
        assert!(cpus_of(narrow.leader()).is_subset(&set("1")));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Alone, it still gets CPU 1 only; the other alone gets both.
    assert_eq!(live.conn.call(&Request::Unregister { id: w }).unwrap().0, Reply::Ok);
    std::thread::sleep(Duration::from_millis(200));
    let a = program(&live.status(), n);
    assert_eq!((a.count, a.cpus), (1, set("1")));
    assert_eq!(cpus_of(wide.leader()), set("0-1"), "the other released to what it was allowed");
}
