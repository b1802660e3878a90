"""Evaluate a CEL expression over (job, cluster) pairs only when its inputs change.

cel-python costs ~70-250 us per evaluation, so a result is cached under a key made of
exactly what the expression can see:

* the job part is the value of every ``job.<field>`` the expression reads (so jobs
  that differ only in fields it ignores share results: ``job.labels['tier']`` is
  evaluated once per distinct label set, not once per job). An expression that uses
  ``job`` other than as ``job.<field>`` is keyed on (job.id, job.generation, job.attempts).
* the cluster part is the cluster object and its generation (a cluster removed and added
  again is a new object), plus the cluster's current free capacity when the expression
  reads ``cluster.free`` (free capacity moves with every admission without a new generation).
  An expression that reads only the cluster's name, labels and readiness is keyed on their
  values instead: every status report makes a new Cluster object, and with the object as key
  each report re-evaluated every (job key, cluster) pair (a quarter of a saturated simulation's
  CPU under the no-preemption policy) although nothing it reads had changed.

CEL activations are built lazily, once per job per call and once per cluster state.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Hashable

from engine.policy.cel import CelExpression, CelRuntimeError, to_cel
from engine.policy.cel_vars import CelCache, cluster_vars, job_vars
from engine.core.state import FleetState
from engine.model import Cluster, Job
from plugins._celjob import FIELDS, key_getter, referenced_fields


def _frozen(mapping: dict[str, Any]) -> frozenset[tuple[str, Any]]:
    return frozenset(mapping.items())


class PairCel:
    """One compiled (job, cluster) expression and its result cache."""

    def __init__(self, expression: CelExpression) -> None:
        self.expression = expression
        job_fields = referenced_fields(expression.text, "job")
        if job_fields is not None and not job_fields <= set(FIELDS):    # kept equal to job_vars by a test
            job_fields = None
        self._job_getters = None if job_fields is None else [key_getter(expression.text, f)
                                                             for f in sorted(job_fields)]
        cluster_fields = referenced_fields(expression.text, "cluster")
        self.uses_free = cluster_fields is None or "free" in cluster_fields
        # only the cluster's name, labels and readiness: what the engine's ("ready",) read covers (engine.core.wake)
        self.reads_labels_only = cluster_fields is not None and cluster_fields <= {"name", "labels", "ready"}
        self._results: CelCache[Hashable] = CelCache()
        self._clusters: CelCache[Hashable] = CelCache(limit=10_000)
        self._rows: dict[Hashable, dict[str, tuple[Cluster, int, tuple[bool, Any]]]] = {}
        self.evaluations = 0            # real CEL evaluations so far (tests and benchmarks read it)

    @property
    def keys_shared_by_jobs(self) -> bool:
        """True when the job part of the key is the fields the expression reads (jobs share results),
        False when it is the job's identity (each job has results of its own)."""
        return self._job_getters is not None

    def job_key(self, job: Job) -> Hashable:
        if self._job_getters is None:
            return ("job", job.id, job.generation, job.attempts)
        return tuple([getter(job) for getter in self._job_getters])

    def cluster_key(self, cluster: Cluster, state: FleetState) -> Hashable:
        if self.reads_labels_only:          # what it reads, not the object: a status report makes a new one
            return (cluster.name, _frozen(cluster.labels), cluster.ready)
        if self.uses_free:
            return (cluster.name, cluster.generation, id(cluster), _frozen(state.free(cluster.name)))
        return (cluster.name, cluster.generation, id(cluster))

    def evaluate(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, tuple[bool, Any]]:
        """{cluster name: (ok, value or error message)} for every cluster."""
        job_key = self.job_key(job)
        job_cel: list[Any] = []
        out: dict[str, tuple[bool, Any]] = {}
        if not self.uses_free:
            # fast path: one row of results per distinct job key, checked against each cluster's object
            # and generation (a few hundred nanoseconds per cluster instead of building a key)
            row = self._rows.get(job_key)
            if row is None:
                if len(self._rows) >= 50_000:
                    self._rows.clear()
                row = self._rows[job_key] = {}
            labels_only = self.reads_labels_only
            for cluster in clusters:
                entry = row.get(cluster.name)
                if entry is None or entry[0] is not cluster or entry[1] != cluster.generation:
                    if labels_only and entry is not None and entry[0].ready == cluster.ready and \
                            entry[0].labels == cluster.labels:
                        result = entry[2]     # a new report of the same labels and readiness: the same result
                    else:
                        result = self._compute(job, job_cel, cluster, state)
                    entry = row[cluster.name] = (cluster, cluster.generation, result)
                out[cluster.name] = entry[2]
            return out
        for cluster in clusters:
            compute: Callable[[], tuple[bool, Any]] = partial(self._compute, job, job_cel, cluster, state)
            out[cluster.name] = self._results.get((job_key, self.cluster_key(cluster, state)), compute)
        return out

    def _compute(self, job: Job, job_cel: list[Any], cluster: Cluster, state: FleetState) -> tuple[bool, Any]:
        if not job_cel:
            job_cel.append(to_cel(job_vars(job)))
        cluster_cel = self._clusters.get(self.cluster_key(cluster, state),
                                         lambda: to_cel(cluster_vars(cluster, state)))
        self.evaluations += 1
        try:
            return True, self.expression.evaluate_cel({"job": job_cel[0], "cluster": cluster_cel})
        except CelRuntimeError as exc:
            return False, str(exc)
