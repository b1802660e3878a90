"""The running policy of ``atoll run``, part of the Runner (a mixin: same state, own idea).

Loaded once at start (``--policy-configmap`` NS/NAME, ``--policy FILE`` or the shipped default), then
followed through a watch on that one ConfigMap. An edit that fails in any way is refused with a
PolicyRejected Warning Event on the ConfigMap, the reload-error metric and one log line, and the running
policy stays; a deleted ConfigMap leaves the policy running (PolicyDeleted). Events raised before the
controller exists are kept and sent with its first step, or before exiting when no policy is valid.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any, Optional

from engine._data import data_path
from engine.dashboard.source import PolicyLog
from engine.errors import InputError, UsageError
from engine.kube import access, metrics, plan, policy_source
from engine.kube.cache import WatchCache
from engine.kube.controller import Controller
from engine.kube.plan import Event
from engine.kube.writer import KubeApi

log = logging.getLogger("atoll.run")


class PolicyWatch:
    opts: Any
    wake: asyncio.Event
    controller: Optional[Controller]
    policy: Optional[policy_source.RunningPolicy]
    policy_text: Optional[str]
    policy_deleted: bool
    policy_log: PolicyLog
    caches: list[WatchCache]
    api_client: Any
    kube: Optional[KubeApi]
    early_events: list[Event]

    async def _load_initial_policy(self) -> None:
        if self.opts.policy_configmap:
            from kubernetes_asyncio import client

            ns, _, name = self.opts.policy_configmap.partition("/")
            if not ns or not name:
                raise UsageError("expected NAMESPACE/NAME", "--policy-configmap")
            core = client.CoreV1Api(self.api_client)
            fn = functools.partial(core.list_namespaced_config_map, ns, field_selector=f"metadata.name={name}")
            cm_cache = WatchCache("policy-configmap", fn, self._on_configmap, timeout_seconds=self.opts.watch_timeout)
            self.caches.append(cm_cache)
            with access.api_errors(f"reading the policy ConfigMap {self.opts.policy_configmap}"):
                await cm_cache.relist()
            if not cm_cache.objects:
                self._reject(None, f"ConfigMap {self.opts.policy_configmap} does not exist")
            if self.policy is None:
                await self._send_early_events()
                raise InputError(f"no valid policy in ConfigMap {self.opts.policy_configmap} (key policy.yaml)",
                                 "--policy-configmap")
            asyncio.create_task(cm_cache.run(), name="policy-configmap")
        elif self.opts.policy_file:
            try:
                with open(self.opts.policy_file, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise InputError(f"cannot read policy: {exc.strerror}", self.opts.policy_file) from None
            self.policy = policy_source.load(text, self.opts.policy_file)
            self._log_loaded(text, self.opts.policy_file)
            metrics.POLICY_GENERATION.inc()
        else:
            default = data_path("policies", "default.yaml")
            if not default.exists():
                raise InputError("no policy given: use --policy-configmap NS/NAME or --policy FILE", "atoll run")
            self.policy = policy_source.load(default.read_text(), str(default))
            self._log_loaded(default.read_text(), str(default))
            metrics.POLICY_GENERATION.inc()

    def _on_configmap(self, event: str, new: Any, old: Any) -> None:
        """Every way an edit can fail ends in ``_reject``: the PolicyRejected Event, the reload-error metric,
        one log line, and the running policy untouched. A deleted ConfigMap is a PolicyDeleted Warning (the
        policy keeps running); recreated with the same text, a PolicyLoaded Event says so."""
        if new is None:
            self.policy_deleted = True
            running = (f"policy {self.policy.name} ({self.policy.digest[:12]}) keeps running"
                       if self.policy is not None else "no policy is running yet")
            self._warn(old, "PolicyDeleted", f"policy ConfigMap deleted; {running}", count_error=False)
            return
        data = new.get("data")
        text = data.get("policy.yaml") if isinstance(data, dict) else None
        if not isinstance(text, str):
            keys = ", ".join(sorted(map(str, data))) if isinstance(data, dict) and data else "none"
            self._reject(new, f"ConfigMap {self.opts.policy_configmap} has no key policy.yaml (keys: {keys})")
            self.policy_text = None
            return
        if text == self.policy_text and self.policy_deleted:
            self.policy_deleted = False
            if self.controller is not None and self.policy is not None:
                self.controller.retry_later(Event(_involved(new), "PolicyLoaded", f"policy ConfigMap recreated; "
                                                  f"policy {self.policy.name} ({self.policy.digest[:12]}) is "
                                                  "running, unchanged"))
                self.wake.set()
            return
        if text == self.policy_text:
            return
        self.policy_deleted = False
        source = f"configmap {self.opts.policy_configmap}: policy.yaml"
        self.policy_text = text
        try:
            loaded = policy_source.load(text, source)
        except (InputError, ValueError) as exc:
            self.policy_log.refused(text, str(exc))
            self._reject(new, f"invalid policy: {exc}")
            return
        except Exception as exc:   # a plugin's bug or an exhausted resource must not stop the controller
            log.exception("loading the edited policy failed unexpectedly")
            self.policy_log.refused(text, f"{type(exc).__name__}: {exc}")
            self._reject(new, f"invalid policy: {source}: cannot be loaded ({type(exc).__name__}: {exc})"[:1000])
            return
        self.policy = loaded
        self._log_loaded(text, source)
        metrics.POLICY_GENERATION.inc()
        log.info("policy %s (%s) loaded from %s; mode %s", loaded.name, loaded.digest[:12], source, loaded.mode)
        if self.controller is not None:
            self.controller.set_pipeline(loaded.pipeline, loaded.selector, loaded.mode)
            self.controller.retry_later(Event(_involved(new), "PolicyLoaded", f"policy {loaded.name} "
                                                                        f"({loaded.digest[:12]}) is running"))
            self.wake.set()

    def _log_loaded(self, text: str, source: str) -> None:
        assert self.policy is not None
        self.policy_log.loaded(self.policy.name, self.policy.digest, text, source, self.policy.mode)

    def _reject(self, configmap: Any, why: str) -> None:
        """A policy edit is refused: Event, metric, log; the policy stays."""
        running = "the previous policy keeps running" if self.policy is not None else "no policy is running yet"
        self._warn(configmap, "PolicyRejected", f"{why}; {running}")

    def _warn(self, configmap: Any, reason: str, message: str, count_error: bool = True) -> None:
        """A Warning Event on the policy ConfigMap (queued until the controller exists), the reload-error
        metric (for refusals) and one log line."""
        if count_error:
            metrics.RELOAD_ERRORS.inc()
        log.error("%s: %s", reason, message)
        event = Event(_involved(configmap or {}, self.opts.policy_configmap), reason, message, "Warning")
        if self.controller is not None:
            self.controller.retry_later(event)
            self.wake.set()
        else:
            self.early_events.append(event)      # before the first cycle: sent with it, or at exit

    async def _send_early_events(self) -> None:
        """The controller will not start (no valid policy): say why on the ConfigMap before exiting."""
        if self.kube is None:
            return
        for ev in self.early_events:
            try:
                await self.kube.create_event(ev.involved["namespace"] or "default", plan.event_body(ev, time.time()))
            except Exception as exc:      # best effort: the error is also on stderr and in the metric
                log.warning("could not post the %s Event: %s", ev.reason, exc)
        self.early_events.clear()


def _involved(configmap: dict[str, Any], ref: Optional[str] = None) -> dict[str, str]:
    """The policy ConfigMap as an Event's involvedObject (``ref`` NS/NAME when the object is gone)."""
    meta = configmap.get("metadata") or {}
    ns, _, name = (ref or "").partition("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": str(meta.get("name") or name),
            "namespace": str(meta.get("namespace") or ns), "uid": str(meta.get("uid") or "")}
