"""The one contract between Atoll's engine and its plugins, built-in or pip-installed.

Modelled on pytest's ``hookspec.py``. Two kinds of hooks:

* **Discovery** (``DiscoverySpecs``): a plugin *module* (built-in ``plugins`` or a
  package registered under the ``atoll.plugins`` entry-point group) implements
  ``atoll_plugin_classes`` to announce its ``engine.plugin.Plugin`` subclasses.
* **Stage hooks** (``StageSpecs``): implemented as methods of a ``Plugin`` instance.
  A policy lists plugins per stage; the engine registers each instance only in the
  stages it is listed in and calls them in the policy's order. A plugin listed in
  ``admit`` but not in ``order`` never has its order hooks called.

All calls pass keyword arguments; an implementation may accept any subset of the
documented arguments (pluggy matches them by name). Hooks marked *stops at the first
non-None result* are ``firstresult`` hooks: the first plugin (in policy order) that
returns something decides. The other hooks collect every plugin's result in policy
order. Hooks run on the engine's hot path: keep them free of I/O; cache anything that
costs more than a few microseconds on the job/cluster ``generation``.

An exception raised by ``atoll_admit``, ``atoll_filter``, ``atoll_score``, ``atoll_place`` or a
preempt hook fails only the job being judged: it waits with a refusal naming the plugin and
the error and is examined again within a minute (``engine.core.contain``). Raise nothing on
purpose: return a ``Refusal``. An exception from any other hook ends the cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

import pluggy

if TYPE_CHECKING:
    from engine.core.preempt import PreemptRule
    from engine.core.state import FleetState
    from engine.model import Cluster, Failure, Job, Placement, Queue, Recovery, Refusal
    from engine.plugin import Plugin

PROJECT = "atoll"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

STAGES = ("enqueue", "order", "admit", "place", "preempt", "recover")

SortKey = Union[int, float, str, tuple[Any, ...]]


class DiscoverySpecs:
    """Hooks of plugin modules (entry points), called once at start-up."""

    @hookspec
    def atoll_plugin_classes(self) -> list[type["Plugin"]]:
        """Return the Plugin classes this module provides. Names must be unique fleet-wide."""
        raise NotImplementedError


class StageSpecs:
    """Hooks of Plugin instances, grouped by pipeline stage."""

    # -- any stage -------------------------------------------------------------
    @hookspec
    def atoll_cycle_start(self, state: "FleetState", now: float) -> None:
        """A scheduling cycle begins (called for every plugin of the policy). Reset per-cycle counters here."""

    # -- enqueue ---------------------------------------------------------------
    @hookspec(firstresult=True)
    def atoll_enqueue(self, job: "Job", state: "FleetState") -> Optional["Refusal"]:
        """A job arrived or changed. May set ``job.queue`` / ``job.priority``; return a Refusal
        to reject it (it is kept, as Rejected, with the reason). Stops at the first non-None result."""

    # -- order -----------------------------------------------------------------
    @hookspec
    def atoll_job_order(self, job: "Job", state: "FleetState") -> SortKey:
        """Sort key of a job inside its queue (smaller first). Keys of all order plugins are
        joined in policy order. Called when the job is enqueued or changes, never per comparison.
        Must not return None."""
        raise NotImplementedError

    @hookspec
    def atoll_queue_order(self, queue: "Queue", state: "FleetState", candidate: Optional["Job"]) -> SortKey:
        """Sort key of a queue (smaller is served first). Must not return None.

        :param queue: the queue; ``queue.allocated`` includes every descendant's usage.
        :param state: the fleet as it is now.
        :param candidate: the job this queue would serve next in this cycle (the next one the engine
            examines from it; jobs of a verdict key already refused in the same state are passed
            over), or None when it has none left (or outside a cycle). Key by the share the
            queue would have *after* it (progressive filling, as the ``drf`` plugin does), and equal
            shares go to the queue whose next job adds less.

        Called when the queue's usage, spec or next job changes: after each admission (fair-share keys
        stay current) and, only when some order plugin of the policy takes ``candidate`` (pluggy passes
        an implementation the arguments it names), after each refusal too, since the next job then
        differs. A plugin without ``candidate`` costs what it always did. Keys are cached per queue
        and candidate shape until the next admission; when every order plugin declares
        ``Plugin.keys_queues_by_line`` (the key reads only the queue's line, the queue set, the fleet's
        allocatable and the candidate's shape), until one of those changes, across cycles. The key may depend on the candidate only through
        ``candidate.shape`` (its tasks: replicas, minimum and per-replica resources, so its demand):
        jobs of one verdict key then give their queue one key, and the engine need not key the queue
        by each of them to stay exact (``Engine._serve_by_candidate``). A plugin whose key reads the
        candidate only through its demand and never falls when it grows may declare
        ``Plugin.keys_rise_with_demand``: a queue refusing job after job is then keyed once per bound over
        its next jobs instead of once per job (``Engine._bound_turn``)."""
        raise NotImplementedError

    # -- admit -----------------------------------------------------------------
    @hookspec(firstresult=True)
    def atoll_admit(self, job: "Job", state: "FleetState") -> Optional["Refusal"]:
        """May this job take capacity now? Return a Refusal with a human reason to keep it pending.
        Every admit plugin must agree: stops at the first Refusal."""

    # -- place -----------------------------------------------------------------
    @hookspec
    def atoll_filter(self, job: "Job", clusters: list["Cluster"], state: "FleetState") -> dict[str, str]:
        """Return {cluster name: reason} for the clusters this job must not use. Called once per
        job with every candidate (not once per cluster)."""
        raise NotImplementedError

    @hookspec
    def atoll_score(self, job: "Job", clusters: list["Cluster"], state: "FleetState") -> dict[str, int]:
        """Return {cluster name: score}; scores of all score plugins are summed, higher is preferred."""
        raise NotImplementedError

    @hookspec(firstresult=True)
    def atoll_place(
        self, job: "Job", clusters: list["Cluster"], state: "FleetState"
    ) -> Union["Placement", "Refusal", None]:
        """Choose replicas per cluster from ``clusters`` (feasible ones, best score first).
        Return a Placement, a Refusal (the job stays pending), or None to let the next plugin
        decide. If no plugin decides, the engine puts the whole job in the first cluster where
        all of it fits. Stops at the first non-None result."""

    # -- preempt ---------------------------------------------------------------------
    @hookspec
    def atoll_preempt_rule(self, job: "Job", state: "FleetState", now: float) -> Optional["PreemptRule"]:
        """``job`` was refused for lack of capacity (``Refusal.capacity``). Return a
        ``engine.core.preempt.PreemptRule`` saying which admitted jobs it may evict (per queue, a
        rank bound; optionally a test per victim) and with which protections, or None if this
        plugin lets it evict nothing. Rules of all plugins are tried in policy order; the first
        under which the job then fits decides. The engine adds the rules every policy shares
        (useful, minimal, whole jobs, guarantees kept, no cycles; see ``engine.core.preempt``).
        Called at most once per refused job per capacity change: keep it O(queues) at most."""

    @hookspec(firstresult=True)
    def atoll_protect(self, preemptor: "Job", victim: "Job", rule: "PreemptRule", state: "FleetState",
                      now: float) -> Optional[str]:
        """May ``victim`` be evicted for ``preemptor`` under ``rule``? Return a reason to protect it
        (e.g. a CEL ``preemptable`` filter says no), or None. Stops at the first reason."""

    @hookspec(firstresult=True)
    def atoll_victim_rank(self, job: "Job", state: "FleetState") -> Optional[int]:
        """The job's rank as a victim: lower ranks are evicted first, and rules bound victims by rank
        (e.g. strictly lower priority). Called once when the job is admitted (and for a preemptor
        when it is refused), never per comparison. Default ``job.priority``. Stops at the first answer."""

    # -- recover ---------------------------------------------------------------
    @hookspec(firstresult=True)
    def atoll_recover(self, job: "Job", failure: "Failure", state: "FleetState", now: float) -> Optional["Recovery"]:
        """The job failed (see FailureKind). Decide: requeue (delay, clusters to avoid) or give up.
        If no plugin decides, the job is given up as Failed. Stops at the first non-None result."""
