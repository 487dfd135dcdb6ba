//! Who owns a process's cpuset cgroup, and so whether the cpuset backend may move it.
//!
//! The manager's tree lies below its own cgroup (`<own>/cpumgr-PID-N/prog-ID`). Moving a process
//! there keeps it inside its cgroup only when that cgroup holds the manager's own: the hierarchy's
//! root, the manager's cgroup, or one between (limits, accounting and a kill of a cgroup reach
//! its descendants). A process in a cgroup someone else made (Slurm's
//! `/slurm/uid_U/job_J/step_S`, a container's, a systemd slice with `AllowedCPUs`) would leave
//! it, and with it that owner's accounting, memory limit and kill: it is confined by affinity
//! instead, which the kernel intersects with its cgroup's CPUs. Directories named
//! `cpumgr-PID-N` are managers' trees (this one's, or one a dead manager left).

use std::path::Path;

/// Prefix of every directory a manager creates in a cpuset hierarchy.
pub const PREFIX: &str = "cpumgr-";

/// Who owns a process's cpuset cgroup, as the manager sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The cgroup holds the manager's own (the root, the manager's cgroup, one between): the
    /// manager's tree is inside it.
    Above,
    /// A manager's tree (`cpumgr-PID-N` below the manager's own cgroup).
    Manager,
    /// Someone else's: the process stays where it is.
    Foreign,
}

impl Owner {
    /// Whether the cpuset backend may move a process of this cgroup into the manager's tree.
    pub fn may_move(self) -> bool {
        self != Owner::Foreign
    }
}

/// Who owns the cgroup at `cgroup` (a directory of the mounted hierarchy), for a manager whose
/// own cgroup is at `own` (the same hierarchy).
pub fn owner(cgroup: &Path, own: &Path) -> Owner {
    if own.starts_with(cgroup) {
        return Owner::Above;
    }
    let first = cgroup.strip_prefix(own).ok().and_then(|rel| rel.components().next());
    match first.and_then(|c| manager_pid(&c.as_os_str().to_string_lossy())) {
        Some(_) => Owner::Manager,
        None => Owner::Foreign,
    }
}

/// The pid of the manager whose directory is named `name` (`cpumgr-PID-N`, digits only); `None`
/// for any other name (`cpumgr-test-foreign-7` is someone else's).
pub fn manager_pid(name: &str) -> Option<i32> {
    let (pid, n) = name.strip_prefix(PREFIX)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n)).then(|| pid.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(cgroup: &str, own: &str) -> Owner {
        owner(Path::new(cgroup), Path::new(own))
    }

    #[test]
    fn the_root_and_the_managers_own_cgroup_and_those_between_hold_its_tree() {
        let own = "/sys/fs/cgroup/cpuset/svc/cpumgr";
        assert_eq!(of("/sys/fs/cgroup/cpuset", own), Owner::Above);
        assert_eq!(of("/sys/fs/cgroup/cpuset/svc", own), Owner::Above);
        assert_eq!(of(own, own), Owner::Above);
        assert_eq!(of("/sys/fs/cgroup/cpuset/", "/sys/fs/cgroup/cpuset"), Owner::Above);
    }

    #[test]
    fn managers_trees_are_movable_and_everything_else_is_foreign() {
        let own = "/sys/fs/cgroup/cpuset";
        assert_eq!(of("/sys/fs/cgroup/cpuset/cpumgr-12-0/prog-3", own), Owner::Manager);
        assert_eq!(of("/sys/fs/cgroup/cpuset/cpumgr-99999-4", own), Owner::Manager);
        for foreign in [
            "/sys/fs/cgroup/cpuset/slurm/uid_0/job_7/step_0",
            "/sys/fs/cgroup/cpuset/slurm_node1/uid_0/job_7/step_0/task_0",
            "/sys/fs/cgroup/cpuset/docker/0123abcd",
            "/sys/fs/cgroup/cpuset/cpumgr-test-foreign-12",
            "/sys/fs/cgroup/cpuset/slurm/cpumgr-12-0/prog-1",
            "/sys/fs/cgroup/cpuset2",
        ] {
            assert_eq!(of(foreign, own), Owner::Foreign, "{foreign}");
            assert!(!Owner::Foreign.may_move());
        }
        // A sibling of the manager's cgroup is someone else's.
        assert_eq!(of("/sys/fs/cgroup/cpuset/user.slice", "/sys/fs/cgroup/cpuset/system.slice/cpumgr"), Owner::Foreign);
    }

    #[test]
    fn only_cpumgr_pid_n_names_a_managers_directory() {
        assert_eq!(manager_pid("cpumgr-123-0"), Some(123));
        assert_eq!(manager_pid("cpumgr-123-17"), Some(123));
        for other in
            ["cpumgr-123", "cpumgr-123-watchdog-test", "cpumgr-test-foreign-1", "cpumgr--0", "cpumgr-1-", "x-1-0"]
        {
            assert_eq!(manager_pid(other), None, "{other}");
        }
    }
}
