"""The engine's books as plain data: what each cluster and queue holds and which jobs hold it. Pure.

Served by ``atoll run`` on ``/debug/accounting`` so a person (or a fault test) can compare the engine's view with
the API's truth after a fault: the clusters Karmada reports, the in-flight reservations still counted on each,
and the jobs holding resources (admitted and not finished), which must be exactly the resumed, unfinished
bindings.
"""

from __future__ import annotations

from typing import Any

from engine.kube.controller import Controller


def accounting(ctl: Controller) -> dict[str, Any]:
    state = ctl.engine.state
    clusters = {}
    for name, c in sorted(state.clusters.items()):
        clusters[name] = {"ready": c.ready, "allocatable": dict(c.allocatable), "allocated": dict(c.allocated),
                          "allocating": dict(c.allocating), "free": dict(state.free(name)),
                          "reserved_for": sorted(state.inflight(name))}
    holding = {job_id: {"state": job.state.value, "queue": job.queue, "clusters": sorted(job.placement or {}),
                        "demand": dict(job.demand)}
               for job_id, job in sorted(state.jobs.items()) if job.state.holds_resources}
    queues = {name: dict(q.allocated) for name, q in sorted(state.queues.items())}
    return {"clusters": clusters, "holding": holding, "queues": queues}
