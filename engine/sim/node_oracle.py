"""Measurement only: a bind-mode simulation in which the engine's fit checks see every member's exact nodes.

No Karmada status can give the engine this (it is what a fresh karmada-scheduler-estimator per pod shape would
approach); it is the ceiling for any node-shape information: the attempts that still wait in a member are waits
no placement could avoid, and its makespan says what perfect node knowledge is worth on a scenario.
docs/node-shapes.md ("What the engine could have known") quotes it.

    python -m engine.sim.node_oracle scenarios/fair-share.yaml [--policy policies/default.yaml]
    python -m engine.sim.node_oracle scenarios/fair-share.yaml --why   # no oracle: why attempts stalled

``--why`` runs the engine as it is and sorts every bind-mode attempt that started by job-name prefix, by whether
it waited in its member (none / up to / beyond two status periods), by whether its pods fitted the member's free
nodes when it was placed (``fit-nodes``), fitted them only before the pods already waiting there took their turn
(``queued-behind``) or did not fit (``no-node``), and by what Karmada's default cpu/memory models (counted fresh
from the real nodes) would have said (``default-models-fit`` / ``-no``).

How: the engine's ``FleetState`` keeps its own checks (totals, reported node shapes) and, on top, first-fits a
gang's pods on the member's free nodes after the pods already waiting there and the pods of jobs it admitted that
the member has not received yet (the same cycle's admissions). Its instance methods are replaced on this one run;
nothing in the engine changes.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

from engine.core.nodefit import DEFAULT_GRADES, UNBOUNDED, PerPod, count_grades, pairs, shapes_of
from engine.core.nodefit import fits as nodefit_fits
from engine.model import Cluster, Pods
from engine.resources import PODS, Resources, add_into, fits
from engine.sim.cli import load_pipeline, resolve_policy
from engine.sim.driver import Simulation
from engine.sim.report import build_report
from engine.sim.scenario import load_scenario


def first_fit(free: Sequence[Resources], requests: Sequence[Resources]) -> bool:
    """Whether ``requests`` fit on copies of the nodes ``free``, each on the first node with room."""
    nodes = [dict(f) for f in free]
    for request in requests:
        for node in nodes:
            if fits(request, node):
                add_into(node, request, -1)
                break
        else:
            return False
    return True


def oracle(sim: Simulation) -> None:
    """Make ``sim``'s engine check fits on the members' real nodes."""
    state = sim.engine.state
    own_fits_tasks, own_replicas_fit = state.fits_tasks, state.replicas_fit

    def exact(cluster: str, pods: Sequence[tuple[PerPod, int]]) -> bool:
        member = sim.members[cluster]
        queue: list[Resources] = [p.request for mj in member.jobs.values() for p in mj.pods
                                  if p.node is None and not p.gone]
        for job_id in state.inflight(cluster):
            if job_id not in member.jobs and job_id in state.jobs:
                queue += [dict(pairs(pp)) for pp, n in state.jobs[job_id].placed_pods(cluster) for _ in range(n)]
        queue += [dict(pairs(pp)) for pp, n in pods for _ in range(n)]
        return first_fit(member.free, [{k: v for k, v in request.items() if k != PODS} for request in queue])

    def fits_tasks(cluster: str, pods: Sequence[tuple[PerPod, int]]) -> bool:
        return own_fits_tasks(cluster, pods) and exact(cluster, pods)

    def replicas_fit(cluster: str, per_pod: PerPod) -> int:
        low, high = 0, min(own_replicas_fit(cluster, per_pod), 100_000)
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if exact(cluster, [(per_pod, mid)]) else (low, mid - 1)
        return low if high < UNBOUNDED else UNBOUNDED

    def clusters_fitting_pods(need: Resources, pods: Pods, clusters: list[Cluster]) -> list[Cluster]:
        return [c for c in clusters if fits_tasks(c.name, pods)]

    def fits_somewhere(need: Resources, pods: Pods) -> bool:
        return any(fits_tasks(c.name, pods) for c in state.ready_clusters())

    setattr(state, "fits_tasks", fits_tasks)
    setattr(state, "replicas_fit", replicas_fit)
    setattr(state, "clusters_fitting_pods", clusters_fitting_pods)
    setattr(state, "fits_somewhere", fits_somewhere)
    setattr(state, "fits_one_somewhere", lambda per_pod, count: fits_somewhere({}, ((per_pod, count),)))
    setattr(state, "fits_tasks_on", lambda pods: lambda cluster: fits_tasks(cluster, pods))
    setattr(state, "replica_counts_for", lambda pods: None)     # no counts: every fit goes through fits_tasks_on
    state._shaped.add("<node oracle>")      # node-aware paths everywhere (any_node_shapes); no cluster has this name


def why(sim: Simulation) -> dict[str, dict[str, int]]:
    """Run ``sim`` recording, per placement, how the member's real nodes stood (see the module doc)."""
    seen: dict[tuple[str, int], tuple[str, str]] = {}
    create = sim._create_pods

    def recorded(job_id: str, placement: Any) -> None:
        tasks = {t.name: t for t in sim.engine.state.jobs[job_id].tasks}
        for cluster, replicas in placement.items():
            member = sim.members[cluster]
            own = [member._request(tasks[t]) for t, n in sorted(replicas.items()) for _ in range(n)]
            waiting = [p.request for mj in member.jobs.values() for p in mj.pods if p.node is None and not p.gone]
            nodes = ("fit-nodes" if first_fit(member.free, waiting + own) else
                     "queued-behind" if first_fit(member.free, own) else "no-node")
            coarse = shapes_of(list(DEFAULT_GRADES), count_grades(list(DEFAULT_GRADES), member.free))
            pods = [(dict(tasks[t].resources), n) for t, n in replicas.items() if n]
            seen[(job_id, len(sim.jobs[job_id].attempts))] = (
                nodes, "default-models-fit" if nodefit_fits(coarse, pods) else "default-models-no")
        create(job_id, placement)

    setattr(sim, "_create_pods", recorded)
    result = sim.run()
    period = sim.scenario.status_period
    out: dict[str, dict[str, int]] = {}
    for job_id, job in result.jobs.items():
        for number, attempt in enumerate(job.attempts, 1):
            if attempt.start_time is None or (job_id, number) not in seen:
                continue
            waited = attempt.start_time - (attempt.placed_time or attempt.admit_time)
            stall = "stalled>2p" if waited > 2 * period else "stalled" if waited > 0 else "started"
            key = " ".join((stall, *seen[(job_id, number)]))
            prefix = job.spec.name.rsplit("-", 1)[0]
            out.setdefault(prefix, {})[key] = out.setdefault(prefix, {}).get(key, 0) + 1
    return {p: dict(sorted(v.items())) for p, v in sorted(out.items())}


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--policy")
    parser.add_argument("--seed", type=int, help="overrides spec.seed, as atoll simulate --seed")
    parser.add_argument("--why", action="store_true", help="no oracle: why attempts stalled")
    args = parser.parse_args(argv)
    pipeline, name, _ = load_pipeline(resolve_policy(args.policy))
    sim = Simulation(load_scenario(args.scenario, seed=args.seed), pipeline, name, placement_mode="bind")
    if args.why:
        print(json.dumps(why(sim), indent=1))
        return
    oracle(sim)
    summary = build_report(sim.run(), jobs=False)["summary"]
    print(json.dumps({k: summary[k] for k in ("jobs", "makespanRatio", "stalled")}))


if __name__ == "__main__":
    main()
