//! cpumgr under real Slurm: a one-node cluster (munged, slurmctld, slurmd) in a temporary
//! directory with the SPANK plugin (`dist/slurm/cpumgr_spank.so`) in its `plugstack.conf` and a
//! cpumgr manager on a private socket; two `srun --cpumgr` jobs given the same CPUs by a partition
//! with `OverSubscribe=FORCE:2`. Needs Slurm (slurm-wlm, munge, libslurm-dev), a C compiler and
//! root; elsewhere the runner reports it ignored.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{allowed, gone, stopped, wait_for, wait_for_or, BIN};
use cpumgr_core::CpuSet;
use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::{Conn, Reply, Request};

/// The manager's quantum: long enough that a hand-over inside it comes from the step's end,
/// not from the next quantum's decision.
const QUANTUM: Duration = Duration::from_secs(2);

/// Why this test cannot run here, if it cannot: it needs root and Slurm's daemons, commands and
/// headers, and make with a C compiler for the plugin.
fn slurm_missing() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("root".into());
    }
    let tools = ["munged", "slurmctld", "slurmd", "srun", "scancel", "sinfo", "make", "cc"];
    let missing: Vec<&str> = tools.iter().copied().filter(|t| common_path(t).is_none()).collect();
    if !missing.is_empty() {
        return Some(format!("Slurm and root ({} not found)", missing.join(", ")));
    }
    if !Path::new("/usr/include/slurm/spank.h").is_file() {
        return Some("Slurm and root (no /usr/include/slurm/spank.h: libslurm-dev)".into());
    }
    None
}

fn common_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// A free TCP port on loopback (bound, then let go for Slurm to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Stops `child` with SIGTERM, then SIGKILL if it has not ended within 5 s, and reaps it.
fn end(child: &mut Child) {
    use nix::sys::signal::{kill, Signal};
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    if let Ok(None) = child.try_wait() {
        let _ = kill(pid, Signal::SIGTERM);
        let until = Instant::now() + Duration::from_secs(5);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = kill(pid, Signal::SIGKILL);
    }
    let _ = child.wait();
}

/// How Slurm tracks and confines a step's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confinement {
    /// `proctrack/linuxproc` and `task/affinity`: no cgroup.
    Affinity,
    /// `proctrack/cgroup` and `task/cgroup,task/affinity` on cgroup v1 (`cgroup.conf`).
    CgroupV1,
}

/// The one-node cluster and its manager; everything it started is ended when it is dropped,
/// also when the test panics.
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    socket: PathBuf,
    /// munged, slurmctld, slurmd (ended in reverse order).
    daemons: Vec<Child>,
    manager: Option<Child>,
    /// The `srun`s the test started.
    jobs: Vec<Child>,
    /// CPUs of the node (each job asks for all of them, so that the jobs share them).
    cpus: u32,
    /// The node's name (Slurm's cgroups are `slurm_HOST/...`).
    host: String,
    confinement: Confinement,
}

impl Cluster {
    fn start(confinement: Confinement) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let plugin_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/slurm");
        let out = Command::new("make").arg("-C").arg(&plugin_dir).arg(format!("OUT={}", d.display())).output().unwrap();
        assert!(out.status.success(), "make -C dist/slurm: {}", String::from_utf8_lossy(&out.stderr));

        let key = d.join("munge.key");
        std::fs::write(&key, (0..1024).map(|i| (i * 7919 % 251) as u8).collect::<Vec<u8>>()).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o400)).unwrap();
        let munge_socket = d.join("munge.sock");
        let mut c = Cluster {
            conf: d.join("slurm.conf"),
            socket: d.join("cpumgr.sock"),
            daemons: Vec::new(),
            manager: None,
            jobs: Vec::new(),
            cpus: 0,
            host: String::new(),
            confinement,
            dir,
        };
        c.daemons.push(
            Command::new("munged")
                .arg("-F")
                .arg("--force")
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--socket={}", munge_socket.display()))
                .arg(format!("--pid-file={}", d.join("munged.pid").display()))
                .arg(format!("--log-file={}", d.join("munged.log").display()))
                .arg(format!("--seed-file={}", d.join("munge.seed").display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for("munged's socket", || munge_socket.exists());

        // The node as slurmd sees it ("NodeName=H CPUs=N ... RealMemory=M").
        let probe = Command::new("slurmd").arg("-C").output().unwrap();
        let node = String::from_utf8_lossy(&probe.stdout).lines().next().unwrap_or_default().to_string();
        let host = node.split_whitespace().next().and_then(|w| w.strip_prefix("NodeName=")).unwrap().to_string();
        c.host = host.clone();
        c.cpus = node
            .split_whitespace()
            .find_map(|w| w.strip_prefix("CPUs="))
            .and_then(|v| v.parse().ok())
            .expect("slurmd -C names the node's CPUs");
        std::fs::create_dir_all(d.join("state")).unwrap();
        std::fs::create_dir_all(d.join("spool")).unwrap();
        let conf = format!(
            "ClusterName=cpumgrtest\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmUser=root\nSlurmdUser=root\n\
             SlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
             AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={munge}\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             {tracking}\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
             SchedulerType=sched/builtin\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nMpiDefault=none\nReturnToService=2\n\
             KillWait=2\nPlugStackConfig={d}/plugstack.conf\n\
             {node} NodeAddr=127.0.0.1 State=UNKNOWN\n\
             PartitionName=shared Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:2\n",
            tracking = match confinement {
                Confinement::Affinity => "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity",
                Confinement::CgroupV1 => "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity",
            },
            ctld = free_port(),
            slurmd = free_port(),
            munge = munge_socket.display(),
            d = d.display(),
        );
        std::fs::write(&c.conf, conf).unwrap();
        // Read from beside slurm.conf.
        std::fs::write(d.join("cgroup.conf"), "CgroupPlugin=cgroup/v1\nConstrainCores=yes\n").unwrap();
        c.plugstack("");
        for (daemon, args) in [("slurmctld", &["-D", "-i"][..]), ("slurmd", &["-D"][..])] {
            let child = c.slurm_daemon(daemon, args);
            c.daemons.push(child);
        }
        wait_for_or("the node to be idle", || c.slurm("sinfo", &["-h", "-o", "%T"]).trim() == "idle", || c.logs());
        c.start_manager();
        c
    }

    /// Writes plugstack.conf: the plugin with this test's paths, and `extra` arguments (read
    /// again by every srun and slurmstepd).
    fn plugstack(&self, extra: &str) {
        let d = self.dir.path();
        let omp = Path::new(BIN).with_file_name("libcpumgr_omp.so");
        let line = format!(
            "required {d}/cpumgr_spank.so socket={s} cpumgr={BIN} omp_lib={omp} log={d}/steps.log {extra}\n",
            d = d.display(),
            s = self.socket.display(),
            omp = omp.display()
        );
        std::fs::write(d.join("plugstack.conf"), line).unwrap();
    }

    /// `srun --cpumgr true`: its exit code and stderr.
    fn srun_true(&self) -> (Option<i32>, String) {
        let out = Command::new("srun").args(["--cpumgr", "true"]).env("SLURM_CONF", &self.conf).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Stops slurmd and starts it again (the steps' slurmstepd and supervisors outlive it).
    fn restart_slurmd(&mut self) {
        let mut old = self.daemons.pop().expect("slurmd");
        end(&mut old);
        let child = self.slurm_daemon("slurmd", &["-D"]);
        self.daemons.push(child);
    }

    /// Starts a Slurm daemon of this cluster in the foreground (its log is in the directory).
    fn slurm_daemon(&self, daemon: &str, args: &[&str]) -> Child {
        Command::new(daemon)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Starts the node's manager with the backend a site gets by default (`auto`: the cpuset
    /// tree where it can be written, as here as root): a step in a cgroup Slurm made must stay
    /// there, confined by affinity ([`Cluster::check_inside_slurm`]).
    fn start_manager(&mut self) {
        let q = format!("{}ms", QUANTUM.as_millis());
        let child = Command::new(BIN)
            .args(["daemon", "--backend", "auto", "--quantum", &q, "--socket"])
            .arg(&self.socket)
            .stderr(std::fs::File::create(self.dir.path().join("cpumgr.log")).unwrap())
            .spawn()
            .unwrap();
        self.manager = Some(child);
        wait_for("the manager to answer", || Conn::connect(&self.socket).is_ok());
    }

    /// Output of a Slurm command of this cluster.
    fn slurm(&self, cmd: &str, args: &[&str]) -> String {
        let out = Command::new(cmd).args(args).env("SLURM_CONF", &self.conf).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The daemons' logs, for a failure's message.
    fn logs(&self) -> String {
        ["slurmctld.log", "slurmd.log", "steps.log", "cpumgr.log"]
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!("--- {f}\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Starts `srun --cpumgr -c CPUS sh -c SCRIPT`; returns its index in `jobs`.
    fn srun(&mut self, script: &str) -> usize {
        let cpus = self.cpus.to_string();
        let child = Command::new("srun")
            .args(["--cpumgr", "-c", &cpus, "sh", "-c", script])
            .env("SLURM_CONF", &self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.jobs.push(child);
        self.jobs.len() - 1
    }

    fn status(&self) -> Option<StatusReport> {
        match Conn::connect(&self.socket).ok()?.call(&Request::Status).ok()?.0 {
            Reply::Status(s) => Some(s),
            _ => None,
        }
    }

    /// The registered steps, as (name, pid of task 0), once `n` are registered.
    fn steps(&self, n: usize) -> Vec<(String, i32)> {
        let seen = std::cell::RefCell::new(Vec::new());
        wait_for_or(
            &format!("{n} steps to be registered"),
            || {
                let now: Vec<(String, i32)> = self
                    .status()
                    .map(|s| s.programs.iter().map(|p| (p.name.clone(), p.pid)).collect())
                    .unwrap_or_default();
                *seen.borrow_mut() = now;
                seen.borrow().len() == n
            },
            || format!("{:?}\n{}", seen.borrow(), self.logs()),
        );
        seen.into_inner()
    }

    /// Waits until the steps' task 0 run on disjoint, non-empty CPU sets.
    fn wait_disjoint(&self, a: i32, b: i32) {
        wait_for_or(
            "the two steps to run on disjoint CPUs",
            || match (allowed(a), allowed(b)) {
                (Some(x), Some(y)) => !x.is_empty() && !y.is_empty() && x.is_disjoint(&y),
                _ => false,
            },
            || format!("{:?} {:?}\n{}", allowed(a), allowed(b), self.logs()),
        );
    }

    /// Checks that the steps whose task 0 is in `pids`, confined on disjoint CPUs, are where
    /// Slurm put them: under `task/cgroup` in the step's cgroup (`/slurm_HOST/...`), confined by
    /// affinity; under `task/affinity` alone (no cgroup of Slurm's) a cpuset backend may take
    /// them into the manager's tree.
    fn check_inside_slurm(&self, pids: &[i32]) {
        let s = self.status().expect("the manager answers");
        for &pid in pids {
            let p = s.programs.iter().find(|p| p.pid == pid).expect("the step is registered");
            let (cg, by) = (cpuset_cgroup(pid), p.confined_by.as_deref());
            match self.confinement {
                Confinement::CgroupV1 => {
                    assert!(self.in_slurms_place(pid), "{} left Slurm's cgroup for {cg}", p.name);
                    assert_eq!(by, Some("affinity"), "{} in {cg}: {s:?}", p.name);
                }
                Confinement::Affinity if s.backend.starts_with("cpuset") => {
                    assert!(cg.contains("/cpumgr-"), "{} in {cg}", p.name);
                    assert_eq!(by, Some("cpuset"), "{}: {s:?}", p.name);
                }
                Confinement::Affinity => assert_eq!(by, Some("affinity"), "{}: {s:?}", p.name),
            }
        }
    }

    /// Whether `pid` is in the cpuset cgroup Slurm gave it: its step's under `task/cgroup`, one
    /// outside any manager's tree under `task/affinity`.
    fn in_slurms_place(&self, pid: i32) -> bool {
        let cg = cpuset_cgroup(pid);
        match self.confinement {
            Confinement::CgroupV1 => cg.starts_with(&format!("/slurm_{}/", self.host)),
            Confinement::Affinity => !cg.contains("/cpumgr-"),
        }
    }

    /// Waits for job `i`'s `srun` to end; its exit code.
    fn exit_code(&mut self, i: usize) -> Option<i32> {
        let end = Instant::now() + common::DEADLINE;
        loop {
            if let Some(st) = self.jobs[i].try_wait().unwrap() {
                return st.code();
            }
            assert!(Instant::now() < end, "srun {i} did not end\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg("--user=root").env("SLURM_CONF", &self.conf).output();
        let until = Instant::now() + Duration::from_secs(10);
        while !self.slurm("squeue", &["-h"]).trim().is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
        for j in &mut self.jobs {
            end(j);
        }
        if let Some(m) = &mut self.manager {
            end(m);
        }
        for d in self.daemons.iter_mut().rev() {
            end(d);
        }
        if self.confinement == Confinement::CgroupV1 {
            for hierarchy in ["freezer", "cpuset", "memory", "devices"] {
                remove_empty_cgroups(&Path::new("/sys/fs/cgroup").join(hierarchy).join(format!("slurm_{}", self.host)));
            }
        }
    }
}

/// Removes the cgroup directory `dir` and those below it that hold no process (Slurm leaves
/// its `slurm_HOST/uid_U` tree behind); a cgroup still in use stays (`rmdir` refuses it).
fn remove_empty_cgroups(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_empty_cgroups(&e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The job id in a step's name ("job J.S user U").
fn job_id(name: &str) -> String {
    name.split_whitespace().nth(1).and_then(|s| s.split('.').next()).unwrap().to_string()
}

/// `true` when every CPU of the node is in `pid`'s affinity.
fn widened(pid: i32, all: &CpuSet) -> bool {
    allowed(pid).is_some_and(|c| all.is_subset(&c))
}

/// One cluster at a time: two would share the CPUs (and the host's name) with each other.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[cfg_attr(not(all(has_slurm, is_root)), ignore = "needs Slurm (slurm-wlm, munge, libslurm-dev) and root")]
fn two_srun_jobs_sharing_cpus_get_disjoint_cpus_and_nothing_is_left_stopped_or_pinned() {
    assert_eq!(slurm_missing(), None, "the build's probe found Slurm and root");
    let _one = ONE_CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    two_jobs_share_the_node(Cluster::start(Confinement::Affinity));
}

/// Slurm's cgroup v1 plugins need the freezer and cpuset v1 hierarchies mounted.
#[test]
#[cfg_attr(
    not(all(has_slurm, is_root, has_cgroup_v1)),
    ignore = "needs Slurm (slurm-wlm, munge, libslurm-dev), root and the cgroup v1 freezer and cpuset hierarchies"
)]
fn under_slurms_cgroup_v1_plugins_too() {
    assert_eq!(slurm_missing(), None, "the build's probe found Slurm and root");
    assert!(cpumgr_testenv::cgroup_v1(), "the build found the cgroup v1 hierarchies mounted, this run does not");
    let _one = ONE_CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    two_jobs_share_the_node(Cluster::start(Confinement::CgroupV1));
}

/// Two `srun --cpumgr` jobs on the same CPUs, `scancel`, a slurmd restart, `kill -9` of the
/// manager, and no manager at all (the checks are listed in docs/SLURM.md, Test).
fn two_jobs_share_the_node(mut c: Cluster) {
    common::adapter_is_built();
    let all = CpuSet::from_cpus(0..c.cpus);
    let stop = c.dir.path().join("stop");
    let until_stop = |code: i32| format!("while [ ! -e {} ]; do :; done; exit {code}", stop.display());

    // srun, sbatch and salloc know the option and refuse a bad POLICY before submitting.
    for tool in ["srun", "sbatch", "salloc"] {
        let out = Command::new(tool).args(["--cpumgr=bogus", "--wrap", "true"]).env("SLURM_CONF", &c.conf).output();
        let err = String::from_utf8_lossy(&out.unwrap().stderr).into_owned();
        assert!(err.contains("'bogus' is not a cpumgr policy word"), "{tool}: {err}");
    }

    // Two jobs on the same CPUs: disjoint sets while both run; each one program named by Slurm.
    let a = c.srun(&until_stop(0));
    let b = c.srun(&until_stop(3));
    let steps = c.steps(2);
    for (name, pid) in &steps {
        assert!(name.starts_with("job ") && name.ends_with(".0 user root"), "{name}");
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let env = String::from_utf8_lossy(&env);
        assert!(env.contains("libcpumgr_omp.so"), "the OpenMP adapter is preloaded in {name}");
        assert!(env.contains(&format!("CPUMGR_SOCKET={}", c.socket.display())), "{name}");
    }
    let (pa, pb) = (steps[0].1, steps[1].1);
    c.wait_disjoint(pa, pb);
    c.check_inside_slurm(&[pa, pb]);

    // scancel of job a hands its CPUs to job b within a quantum of its end.
    let of_a = |(_, pid): &&(String, i32)| cmdline(*pid).contains("exit 0");
    let (name_a, cancelled) = steps.iter().find(of_a).cloned().expect("job a's step");
    let kept = if cancelled == pa { pb } else { pa };
    c.slurm("scancel", &[&job_id(&name_a)]);
    wait_for("the cancelled step to end", || gone(cancelled));
    let ended = Instant::now();
    wait_for_or("the other step to get every CPU", || widened(kept, &all), || c.logs());
    let handover = ended.elapsed();
    assert!(handover < QUANTUM, "the CPUs came {handover:?} after the step ended: a quantum is {QUANTUM:?}");
    assert_ne!(c.exit_code(a), Some(0), "the cancelled job failed");
    std::fs::write(&stop, "").unwrap();
    assert_eq!(c.exit_code(b), Some(3), "srun exits with its step's exit code");
    wait_for("both steps to be unregistered", || c.status().is_some_and(|s| s.programs.is_empty()));
    assert!(!stopped(kept) && !stopped(cancelled));

    // kill -9 of the manager: the steps' supervisors continue and widen them back.
    std::fs::remove_file(&stop).unwrap();
    let x = c.srun(&until_stop(0));
    let y = c.srun(&until_stop(0));
    let steps = c.steps(2);
    let (px, py) = (steps[0].1, steps[1].1);
    c.wait_disjoint(px, py);
    // A restarted slurmd changes nothing for the steps that run.
    c.restart_slurmd();
    wait_for_or(
        "the node to answer again",
        || matches!(c.slurm("sinfo", &["-h", "-o", "%T"]).trim(), "allocated" | "mixed"),
        || c.logs(),
    );
    assert_eq!(c.steps(2), steps);
    c.wait_disjoint(px, py);
    c.check_inside_slurm(&[px, py]);
    let mut manager = c.manager.take().unwrap();
    manager.kill().unwrap();
    manager.wait().unwrap();
    for p in [px, py] {
        wait_for_or(
            "a step to be widened back, where Slurm put it, after its manager was killed",
            || widened(p, &all) && !stopped(p) && c.in_slurms_place(p),
            || format!("{}\n{}", cpuset_cgroup(p), c.logs()),
        );
    }
    std::fs::write(&stop, "").unwrap();
    assert_eq!(c.exit_code(x), Some(0));
    assert_eq!(c.exit_code(y), Some(0));
    // Without a manager the plugin says so, and the site chooses: run unmanaged, or fail.
    let (code, err) = c.srun_true();
    assert_eq!(code, Some(0), "{err}\n{}", c.logs());
    assert!(err.contains("no cpumgr manager answers on") && err.contains("runs unmanaged"), "{err}");
    c.plugstack("on_missing=fail");
    let (code, err) = c.srun_true();
    assert_ne!(code, Some(0), "{err}\n{}", c.logs());
    assert!(err.contains("no cpumgr manager answers on") && err.contains("failing the step"), "{err}");
    // The supervisors end with their steps.
    wait_for_or("every step supervisor to end", || !supervisors_of(&c.socket), || c.logs());
}

/// The cpuset cgroup of `pid` as `/proc/PID/cgroup` names it (the v1 `cpuset` line, else the
/// unified one); empty when it is gone.
fn cpuset_cgroup(pid: i32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let line = |v1: bool| {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let mine = if v1 { controllers.split(',').any(|c| c == "cpuset") } else { controllers.is_empty() };
            mine.then(|| path.to_string())
        })
    };
    line(true).or_else(|| line(false)).unwrap_or_default()
}

/// The command line of `pid`, its arguments joined by spaces.
fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

/// Whether a `cpumgr step` of the manager on `socket` still runs.
fn supervisors_of(socket: &Path) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    let socket = socket.to_string_lossy();
    dir.flatten().any(|e| {
        let raw = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        args.first().map(String::as_str) == Some(BIN)
            && args.get(1).map(String::as_str) == Some("step")
            && args.iter().any(|a| *a == socket)
    })
}
