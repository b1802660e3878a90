"""A simulated member cluster: nodes, pods, and the member's own scheduler (level two).

Atoll decides *which cluster*; inside each member a node-level scheduler decides *which
node*, and the fleet engine never sees nodes — only the totals Karmada reports
(``status.resourceSummary``: allocatable, allocated = bound pods, allocating = pods not
yet bound). Two member schedulers:

* ``volcano``: gang-aware. A job's pods on this member bind only when minAvailable of
  every task fits on nodes at once; otherwise they wait, holding nothing.
* ``kube-default``: pod by pod, first fit. Pods created by many job controllers at once
  interleave; a pod that fits binds and HOLDS its node while its siblings wait — the
  fragmentation deadlock of the KubeCon 2024 test (seed 004).

Cost follows what changed: a pass looks only at jobs with waiting pods, and first fit
remembers, per pod shape, the first node that may still fit (``NodePool``): nodes before it
did not fit, and only a node that frees something can fit again, so a saturated member
answers "no node fits" in O(1) instead of scanning every node for every pod.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from engine.core.nodefit import NodeShapes, grade_of, shapes_of
from engine.model import Cluster, Task
from engine.resources import PODS, Resources, add_into, fits

_Shape = tuple[tuple[str, int], ...]


class NodePool:
    """Free capacity per node, with first fit that does not rescan nodes known not to fit.

    ``_start[shape]`` is a node index before which no node fits ``shape``: it moves forward as first
    fit finds nothing earlier, and back to a node whose capacity is returned (the only way an earlier
    node can fit again). Taking capacity never makes a node fit, so it leaves every start valid."""

    def __init__(self, nodes: list[Resources]) -> None:
        self.free: list[Resources] = [dict(n) for n in nodes]
        self._start: dict[_Shape, int] = {}
        self.touched: set[int] = set()      # nodes whose free capacity changed since Member last graded them

    def first_fit(self, request: Resources) -> Optional[int]:
        shape = _shape(request)
        free = self.free
        i = self._start.get(shape, 0)
        while i < len(free):
            if fits(request, free[i]):
                break
            i += 1
        if len(self._start) >= 4096:
            self._start.clear()
        self._start[shape] = i
        return i if i < len(free) else None

    def take(self, node: int, request: Resources) -> None:
        add_into(self.free[node], request, -1)
        self.touched.add(node)

    def give(self, node: int, request: Resources) -> None:
        add_into(self.free[node], request)
        self.touched.add(node)
        starts = self._start
        for shape, start in starts.items():
            if start > node:
                starts[shape] = node


@dataclass(eq=False)
class Pod:
    job_id: str
    task: str
    request: Resources
    node: Optional[int] = None
    gone: bool = False               # the job was removed while the pod waited


@dataclass(eq=False)
class MemberJob:
    job_id: str
    pods: list[Pod]
    gang: dict[str, int]             # task -> pods that must bind together here (volcano)
    seq: int
    bound: dict[str, int] = field(default_factory=dict)


class Member:
    def __init__(self, name: str, labels: dict[str, str], nodes: list[Resources], mode: str,
                 rng: random.Random, ready: bool = True, grades: Optional[list[Resources]] = None) -> None:
        self.name = name
        self.grades = grades             # spec.resourceModels lower edges; None: no models
        self.labels = dict(labels)
        self.mode = mode
        self.ready = ready
        self.rng = rng
        self.capacity: list[Resources] = [dict(n) for n in nodes]
        self.nodes = NodePool(nodes)
        self.free = self.nodes.free
        # per node, its grade when last counted (None: not counted, as a pod-full node); every node is due at first
        self._node_grades: list[Optional[int]] = [None] * len(nodes)
        self._grade_counts: list[int] = [0] * len(grades or ())
        self.nodes.touched.update(range(len(nodes)))
        self.count_pods = any(PODS in n for n in nodes)
        self.allocatable: Resources = {}
        for n in nodes:
            add_into(self.allocatable, n)
        self.allocated: Resources = {}
        self.allocating: Resources = {}
        self.jobs: dict[str, MemberJob] = {}
        self._unbound: dict[str, MemberJob] = {}      # jobs with pods not bound yet, in arrival (seq) order
        self._could_fit: dict[tuple[object, ...], bool] = {}
        self._waiting_pods: list[Pod] = []       # kube-default queue, in scheduling order
        self._new_pods: list[Pod] = []           # created since the last pass (interleaved at the pass)
        self._dirty = False
        self._seq = 0

    # -- what Karmada sees -------------------------------------------------------------
    def snapshot(self, now: float) -> Cluster:
        """Cluster.status.resourceSummary as the status controller would report it now."""
        if not self.ready:
            return Cluster(self.name, dict(self.labels), ready=False, allocatable=dict(self.allocatable),
                           status_time=now)
        return Cluster(self.name, dict(self.labels), ready=True, allocatable=dict(self.allocatable),
                       allocated=dict(self.allocated), allocating=dict(self.allocating), status_time=now,
                       node_shapes=self.node_shapes())

    def allocatable_modelings(self) -> Optional[list[int]]:
        """Nodes per grade as Karmada's status controller counts them: per node, allocatable minus its
        bound pods' requests (pending pods are not on a node; NotReady/cordoned nodes would count too);
        a pod-full node is skipped (see nodefit.allocatable_modelings on Karmada's ``break``).
        Kept per node and updated for the nodes whose free capacity changed since the last report
        (``NodePool.touched``), not recounted over every node at every report."""
        grades = self.grades
        if grades is None:
            return None
        counts, node_grades = self._grade_counts, self._node_grades
        for i in self.nodes.touched:
            old, new = node_grades[i], self._grade(i)
            if old != new:
                if old is not None:
                    counts[old] -= 1
                if new is not None:
                    counts[new] += 1
                node_grades[i] = new
        self.nodes.touched.clear()
        return list(self._grade_counts)

    def _grade(self, node: int) -> Optional[int]:
        """The grade of the node's free capacity; None for a pod-full node (not counted)."""
        free = self.free[node]
        if PODS in self.capacity[node] and free.get(PODS, 0) <= 0:
            return None
        assert self.grades is not None
        return grade_of(free, self.grades)

    def node_shapes(self) -> Optional[NodeShapes]:
        counts = self.allocatable_modelings()
        return None if counts is None or self.grades is None else shapes_of(self.grades, counts)

    def signature(self) -> tuple[bool, _Shape, _Shape]:
        """Everything a snapshot reports except its time: unchanged means no news for the engine."""
        return (self.ready, tuple(sorted(self.allocated.items())), tuple(sorted(self.allocating.items())))

    # -- pods arrive and leave -----------------------------------------------------------
    def could_ever_fit(self, replicas: dict[str, int], tasks: dict[str, Task]) -> bool:
        """Whether the portion would fit on this member's nodes were they all empty (else it is
        Unschedulable here, whatever the fleet-level totals said). Memoised: the nodes never change."""
        key = tuple((t, n, _shape(tasks[t].resources)) for t, n in sorted(replicas.items()))
        known = self._could_fit.get(key)
        if known is None:
            known = self._could_fit[key] = self._could_ever_fit(replicas, tasks)
        return known

    def _could_ever_fit(self, replicas: dict[str, int], tasks: dict[str, Task]) -> bool:
        """First fit of each pod on empty nodes, in O(nodes + replicas) per task: free capacity only falls while
        the portion is laid out, so a node that cannot take one of a task's pods cannot take a later one either,
        and the search goes on from there (starting again at the first node for each pod was O(nodes x replicas):
        a 60,000-pod job on 100,000 nodes did not end)."""
        free = [dict(n) for n in self.capacity]
        for t, n in sorted(replicas.items()):
            request = self._request(tasks[t])
            node = 0
            for _ in range(n):
                while node < len(free) and not fits(request, free[node]):
                    node += 1
                if node == len(free):
                    return False
                add_into(free[node], request, -1)
        return True

    def add(self, job_id: str, replicas: dict[str, int], tasks: dict[str, Task]) -> None:
        """The job's pods for this member were created (pending, not yet bound)."""
        pods = [Pod(job_id, t, self._request(tasks[t])) for t, n in sorted(replicas.items()) for _ in range(n)]
        gang = {}
        for t, n in replicas.items():
            task = tasks[t]
            # the least this member must host if every other member hosts all of its share
            gang[t] = max(0, task.min_available - (task.replicas - n))
        self._seq += 1
        self.jobs[job_id] = self._unbound[job_id] = MemberJob(job_id, pods, gang, self._seq)
        for pod in pods:
            add_into(self.allocating, pod.request)
        self._new_pods.extend(pods)
        self._dirty = True

    def remove(self, job_id: str) -> None:
        """Delete the job's pods here (finished, failed, or killed): bound pods free their nodes."""
        mj = self.jobs.pop(job_id, None)
        if mj is None:
            return
        self._unbound.pop(job_id, None)
        for pod in mj.pods:
            if pod.node is not None:
                self.nodes.give(pod.node, pod.request)
                add_into(self.allocated, pod.request, -1)
            elif not pod.gone:
                add_into(self.allocating, pod.request, -1)
            pod.gone = True
        self._dirty = True

    def kill_all(self) -> list[str]:
        """The member went NotReady: every job with pods here is lost. Returns their ids."""
        lost = sorted(self.jobs, key=lambda j: self.jobs[j].seq)
        for job_id in lost:
            self.remove(job_id)
        self._waiting_pods = []
        self._new_pods = []
        return lost

    def bound(self, job_id: str) -> dict[str, int]:
        mj = self.jobs.get(job_id)
        return mj.bound if mj is not None else {}

    # -- the member scheduler ----------------------------------------------------------------
    def schedule(self) -> set[str]:
        """One scheduling pass; returns the ids of jobs that got new pods bound."""
        if not self._dirty or not self.ready:
            return set()
        self._dirty = False
        if self._new_pods:
            fresh = [p for p in self._new_pods if not p.gone]
            self._new_pods = []
            if self.mode == "kube-default":
                self.rng.shuffle(fresh)     # many job controllers create pods concurrently
            self._waiting_pods.extend(fresh)
        if self.mode == "volcano":
            return self._schedule_gangs()
        return self._schedule_pods()

    def _schedule_pods(self) -> set[str]:
        changed: set[str] = set()
        failed: set[_Shape] = set()
        still: list[Pod] = []
        for pod in self._waiting_pods:
            if pod.gone:
                continue
            shape = _shape(pod.request)
            if shape in failed or not self._bind(pod):
                failed.add(shape)
                still.append(pod)
                continue
            changed.add(pod.job_id)
        self._waiting_pods = still
        return changed

    def _schedule_gangs(self) -> set[str]:
        changed: set[str] = set()
        failed: set[tuple[_Shape, ...]] = set()
        for mj in list(self._unbound.values()):          # arrival (seq) order
            waiting = [p for p in mj.pods if p.node is None]
            if not waiting:
                del self._unbound[mj.job_id]
                continue
            short = {t: n - mj.bound.get(t, 0) for t, n in mj.gang.items() if n > mj.bound.get(t, 0)}
            if short:
                gang: list[Pod] = []
                for pod in waiting:
                    if short.get(pod.task, 0) > 0:
                        gang.append(pod)
                        short[pod.task] -= 1
                key = tuple(sorted(_shape(p.request) for p in gang))
                if key in failed or not self._bind_all(gang):
                    failed.add(key)
                    continue
                changed.add(mj.job_id)
            for pod in mj.pods:            # beyond the gang: best effort, pod by pod
                if pod.node is None and self._bind(pod):
                    changed.add(mj.job_id)
            if all(p.node is not None for p in mj.pods):
                del self._unbound[mj.job_id]
        self._waiting_pods = [p for p in self._waiting_pods if p.node is None and not p.gone]
        return changed

    def _bind_all(self, pods: list[Pod]) -> bool:
        done: list[Pod] = []
        for pod in pods:
            if not self._bind(pod):
                for undo in done:
                    self._unbind(undo)
                return False
            done.append(pod)
        return True

    def _bind(self, pod: Pod) -> bool:
        node = self.nodes.first_fit(pod.request)
        if node is None:
            return False
        self.nodes.take(node, pod.request)
        pod.node = node
        add_into(self.allocating, pod.request, -1)
        add_into(self.allocated, pod.request)
        mj = self.jobs[pod.job_id]
        mj.bound[pod.task] = mj.bound.get(pod.task, 0) + 1
        return True

    def _unbind(self, pod: Pod) -> None:
        assert pod.node is not None
        self.nodes.give(pod.node, pod.request)
        pod.node = None
        add_into(self.allocated, pod.request, -1)
        add_into(self.allocating, pod.request)
        mj = self.jobs[pod.job_id]
        mj.bound[pod.task] -= 1

    def _request(self, task: Task) -> Resources:
        """What a pod of ``task`` takes on a node: its requests and one pod slot (the engine's jobs carry
        that slot already, as the controller's do: ``scenario.pod_request``)."""
        request = {k: v for k, v in task.resources.items() if k != PODS}
        if self.count_pods:
            request[PODS] = 1
        return request


def _shape(request: Resources) -> _Shape:
    return tuple(sorted(request.items()))
