"""Prometheus metrics of the controller (served on --metrics-port with /healthz and /explain)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

PENDING = Gauge("atoll_pending_jobs", "Jobs waiting for admission, per queue.", ["queue"])
ADMISSIONS = Counter("atoll_admissions_total", "Jobs admitted (bindings resumed or bound), per queue.", ["queue"])
CYCLE = Histogram("atoll_cycle_duration_seconds", "One controller step: sync changes + engine cycle.",
                  buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
POLICY_GENERATION = Gauge("atoll_policy_generation", "Policies loaded successfully since start (1 = initial).")
RELOAD_ERRORS = Counter("atoll_policy_reload_errors_total", "Policy edits rejected as invalid.")
WRITE_ERRORS = Counter("atoll_api_write_errors_total", "Failed binding patches / events, by what.", ["what"])
RESUME_LATENCY = Histogram("atoll_resume_latency_seconds",
                           "Binding paused by the webhook -> resumed by the controller (gate mode).",
                           buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300))
FAILURES = Counter("atoll_job_failures_total", "Failure signals handed to the recover stage, by kind.", ["kind"])
LEADER = Gauge("atoll_leader", "1 while this replica leads.")
CACHE_OBJECTS = Gauge("atoll_cache_objects", "Objects held by each watch cache (set when scraped), so a test or an "
                      "operator can see the controller has caught up with the API server.", ["cache"])
PREEMPTIONS = Counter("atoll_preemptions_total", "Jobs evicted so that another could start (one per victim), by the "
                      "victim's queue and the preemption reason (e.g. priority, reclaim).", ["queue", "reason"])
NODE_VIEW = Gauge("atoll_cluster_node_view", "1 when a cluster's fit is checked per node (resource models reported and "
                  "usable), 0 when on summed totals (set when scraped).", ["cluster"])
PLUGIN_ERRORS = Counter("atoll_plugin_errors_total", "Exceptions a plugin raised while judging one job, contained "
                        "as that job's refusal (engine/core/contain.py), by plugin.", ["plugin"])
NOT_GATED = Counter("atoll_bindings_not_gated_total", "Bindings the webhook did not pause (it was down, or they "
                    "predate Atoll), each counted once: adopted (usage counted, placed without Atoll's admission) "
                    "or ignored (bind mode, left to karmada-scheduler).", ["handling"])
