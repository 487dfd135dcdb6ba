"""cpumgr.sim: records pandas can read, and a policy written in Python run by the simulator."""

import pytest

import cpumgr.sim

SCALAR = (int, float, str)


class EqualSplit:
    """The CPUs split evenly among the programs, the remainder to the first ones, never more
    than a program wants."""

    def __init__(self):
        self.calls = 0

    def decide(self, view):
        self.calls += 1
        n = len(view["programs"])
        share, extra = divmod(view["cpus"], n)
        return [min(p["wants"], share + (i < extra)) for i, p in enumerate(view["programs"])]


def test_records_are_flat_rows_one_per_job_and_policy():
    jobs = cpumgr.sim.run("omp-multiprog:degree=4", policy=["equipartition", "omp-dss"])
    assert len(jobs) == 8
    assert {j["policy"] for j in jobs} == {"equipartition", "omp-dss"}
    keys = set(jobs[0])
    assert {"id", "name", "turnaround", "slowdown", "run", "wait", "policy"} <= keys
    assert all(set(j) == keys and all(isinstance(v, SCALAR) for v in j.values()) for j in jobs)
    runs = cpumgr.sim.summaries("omp-multiprog:degree=4", policy="equipartition")
    assert len(runs) == 1 and runs[0]["policy"] == "equipartition" and runs[0]["jobs"] == 4
    assert all(isinstance(v, SCALAR) for v in runs[0].values()), "summaries are flat rows too"
    assert any(k.startswith("class_cv.") for k in runs[0]), runs[0]


def test_a_python_policy_runs_in_the_simulator_like_its_rust_twin():
    policy = EqualSplit()
    mine = cpumgr.sim.run("omp-multiprog:degree=4", policy=policy)
    theirs = cpumgr.sim.run("omp-multiprog:degree=4", policy="equipartition")
    assert policy.calls > 0
    assert {j["policy"] for j in mine} == {"EqualSplit"}
    assert sorted(j["turnaround"] for j in mine) == pytest.approx(sorted(j["turnaround"] for j in theirs))


def test_a_python_policy_sees_each_request_as_wanted_and_under_now():
    class Recording(EqualSplit):
        def __init__(self):
            super().__init__()
            self.programs = []

        def decide(self, view):
            self.programs.extend(view["programs"])
            return super().decide(view)

    policy = Recording()
    cpumgr.sim.run("omp-multiprog:degree=4", policy=policy)
    assert policy.programs
    assert all(p["wanted"] == p["now"] and 1 <= p["wanted"] <= p["max"] for p in policy.programs)


def test_a_python_policy_sees_the_cpu_time_its_programs_received():
    class Watching(EqualSplit):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def decide(self, view):
            for p in view["programs"]:
                self.seen.setdefault(p["id"], []).append(p["cpu_time"])
            return super().decide(view)

    policy = Watching()
    cpumgr.sim.run("omp-multiprog:degree=4", policy=policy)
    # Every program runs from its first quantum on: the CPU time it is shown grows with it.
    assert policy.seen and all(times[-1] > times[0] for times in policy.seen.values() if len(times) > 2)
    assert any(len(times) > 2 for times in policy.seen.values())


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="no-such-preset"):
        cpumgr.sim.run("no-such-preset", policy="equipartition")
    with pytest.raises(ValueError, match="no-such-policy"):
        cpumgr.sim.run("omp-multiprog", policy="no-such-policy")

    class Greedy:
        def decide(self, view):
            return [view["cpus"]] * len(view["programs"])

    with pytest.raises(ValueError, match="handed out"):
        cpumgr.sim.run("omp-multiprog", policy=Greedy())

    class Broken:
        def decide(self, view):
            raise KeyError("oops")

    with pytest.raises(KeyError, match="oops"):
        cpumgr.sim.run("omp-multiprog", policy=Broken())


class SwitchAt:
    """Equal shares until `at` seconds, then every CPU to the first program: a policy of the
    clock, which the fast-forward must not skip."""

    def __init__(self, at):
        self.at = at
        self.times = []

    def decide(self, view):
        self.times.append(view["now"])
        n = len(view["programs"])
        if view["now"] < self.at:
            return [min(p["wants"], view["cpus"] // n) for p in view["programs"]]
        return [min(view["programs"][0]["wants"], view["cpus"])] + [0] * (n - 1)


def test_a_python_policy_is_asked_at_every_quantum():
    policy = SwitchAt(20.0)
    runs = cpumgr.sim.summaries("omp-multiprog:degree=3", policy=policy)
    quantum = 0.1
    gaps = [b - a for a, b in zip(policy.times, policy.times[1:])]
    assert max(gaps) <= quantum + 1e-9, "no quantum skipped"
    assert any(t >= 20.0 for t in policy.times), "it saw the switch"
    assert runs[0]["skipped_quanta"] == 0


class FailsAt:
    """Equal shares, then an exception at `at` seconds."""

    def __init__(self, at):
        self.at = at
        self.calls_after = 0

    def decide(self, view):
        if view["now"] >= self.at:
            self.calls_after += 1
            raise RuntimeError("the policy failed")
        return [min(p["wants"], view["cpus"] // len(view["programs"])) for p in view["programs"]]


def test_the_first_exception_of_a_python_policy_stops_the_run():
    policy = FailsAt(1.0)
    with pytest.raises(RuntimeError, match="the policy failed"):
        cpumgr.sim.run("scs-mpl:jobs=2000", policy=policy)
    assert policy.calls_after == 1, "not asked again after it failed"


def test_a_quantum_outside_the_simulators_bounds_is_refused():
    for q in (1e-7, 1e30, 0.0, float("nan")):
        with pytest.raises(ValueError, match="quantum_ms"):
            cpumgr.sim.run("omp-multiprog:degree=2", policy="equipartition", quantum_ms=q)
