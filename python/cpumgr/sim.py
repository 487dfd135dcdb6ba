"""The cpumgr simulator from Python: the same policies as the live manager, on modelled jobs.

``run(workload, policy=[...])`` returns one record (a flat dict) per finished job and policy, so
``pandas.DataFrame(run(...))`` is a table; ``summaries(...)`` returns one record per policy.

A workload is a preset spec (``"omp-multiprog:degree=4"``, see ``cpumgr sim --list-presets``) or
the path of a workload file. A policy is a spec (``"equipartition"``, ``"pdpa:min_eff=0.7"``) or a
Python object with ``decide(view)``: ``view`` is a dict with ``now`` and ``quantum`` (seconds),
``cpus`` and ``programs`` (a list of dicts: ``id``, ``name``, ``wants``, ``wanted`` (also under
``now``), ``min``, ``max``, ``weight``, ``arrival``, ``cpu_time``, ``speedup``, ``running``,
``threads``), and ``decide`` returns one CPU count per program (0: it does not run this quantum). A
Python policy is asked at every quantum (the fast-forward that skips repeating quanta of the
built-in policies trusts them to decide the same on the same view, which Python code need not); the
first exception it raises stops the run and is raised here. Runs of built-in policies let other
Python threads run.
"""

import json

from ._cpumgr import simulate

__all__ = ["run", "summaries"]


def _flat(record):
    """``record`` with each nested dict spread into keys of its own (``class_cv`` with a class
    ``swim`` becomes ``class_cv.swim``): a record is a table row."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def _simulate(workload, policy, cpus, quantum_ms, mpl):
    policies = [policy] if isinstance(policy, str) or hasattr(policy, "decide") else list(policy)
    jobs, runs = simulate(str(workload), policies, cpus=cpus, quantum_ms=quantum_ms, mpl=mpl)
    return [_flat(j) for j in json.loads(jobs)], [_flat(r) for r in json.loads(runs)]


def run(workload, policy, cpus=None, quantum_ms=None, mpl=None):
    """Per-job records of ``workload`` under each policy (a spec, an object, or a list of them)."""
    return _simulate(workload, policy, cpus, quantum_ms, mpl)[0]


def summaries(workload, policy, cpus=None, quantum_ms=None, mpl=None):
    """One summary record per policy (makespan, mean slowdown, utilisation, fairness, ...)."""
    return _simulate(workload, policy, cpus, quantum_ms, mpl)[1]
