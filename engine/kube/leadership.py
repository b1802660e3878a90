"""Leading and stopping ``atoll run`` (a mixin of ``engine.kube.runner.Runner``: same object, own idea): lead alone
or stand by for the leader Lease, and on SIGTERM/SIGINT (engine.kube.shutdown) stop in order: the loop lets its
writes in flight finish, the watches stop, the Lease's renewal stops, and the Lease is released if this replica
holds it (holderIdentity cleared, as client-go's ReleaseOnCancel does: a standby takes over at its next retry
instead of after a whole lease duration)."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

from engine.kube import metrics

if TYPE_CHECKING:
    from engine.kube.runner import Options

log = logging.getLogger("atoll.run")

LEASE_RELEASE_TIMEOUT = 5.0   # seconds for each of the Lease's read and replace when releasing it


class Leadership:
    opts: "Options"
    identity: str
    stopping: asyncio.Event
    synced: bool
    leading: bool
    api_client: Any
    _lead_task: Optional["asyncio.Task[Any]"]

    async def lead(self) -> None:
        raise NotImplementedError

    async def _until_stopped(self) -> int:
        """Lead (or stand by for the Lease) until that ends or a stop is requested; then stop in order."""
        work = asyncio.create_task(self._elect() if self.opts.leader_elect else self._lead_alone(), name="atoll")
        stop = asyncio.create_task(self.stopping.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done() and not self.stopping.is_set():    # we are being cancelled ourselves
                work.cancel()
        if work.done() and not self.stopping.is_set():
            return work.result()
        return await self._stop(work)

    async def _lead_alone(self) -> int:
        await self.lead()
        return 0

    async def _stop(self, work: asyncio.Task[int]) -> int:
        """Stop in order: the loop (it runs no new cycle and lets its writes finish, see _loop), the watches
        (lead's finally), the Lease's renewal, then release the Lease if we hold it."""
        lead = self._lead_task
        if lead is not None and not lead.done():
            if not self.synced:
                log.info("stopping before the first cycle: nothing in flight")
                lead.cancel()
            done, _ = await asyncio.wait([lead], timeout=self.opts.shutdown_timeout + 1.0)
            if not done:
                log.warning("the controller loop did not stop in time; cancelling it")
                lead.cancel()
            await asyncio.gather(lead, return_exceptions=True)
        if not work.done():
            work.cancel()               # the election: its acquire or renew loop
        await asyncio.gather(work, return_exceptions=True)
        if self.opts.leader_elect:
            await self._release_lease()
        metrics.LEADER.set(0)
        self.leading = False
        return 0

    async def _release_lease(self) -> None:
        """Give the Lease up if this replica holds it: holderIdentity cleared, a 1 s duration and renewTime now,
        as client-go's leader election does on cancel (LeaderElectionReleaseOnCancel). A standby (client-go's or
        kubernetes-asyncio's) takes a Lease without holder at its next retry (2 s) instead of waiting out the
        lease duration (15 s). Replaced at the resourceVersion read, so a Lease another replica took meanwhile
        is never touched."""
        from kubernetes_asyncio import client

        name, namespace = self.opts.lease_name, self.opts.lease_namespace
        api = client.CoordinationV1Api(self.api_client)
        try:
            lease = await asyncio.wait_for(api.read_namespaced_lease(name, namespace), LEASE_RELEASE_TIMEOUT)
            spec = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                log.info("leader Lease %s/%s not held by %s; nothing to release", namespace, name, self.identity)
                return
            now = datetime.now(timezone.utc)
            spec.holder_identity = ""            # as client-go: "" is no holder for it and for kubernetes-asyncio
            spec.lease_duration_seconds = 1
            spec.acquire_time = now
            spec.renew_time = now
            await asyncio.wait_for(api.replace_namespaced_lease(name, namespace, lease), LEASE_RELEASE_TIMEOUT)
        except Exception as exc:     # the API gone, a conflict: the Lease then expires as it would have
            log.warning("could not release the leader Lease %s/%s (%s: %s); a standby takes it when it expires",
                        namespace, name, type(exc).__name__, exc)
            return
        log.info("%s released the leader Lease %s/%s", self.identity, namespace, name)

    async def _elect(self) -> int:
        """Stand by for the Lease, lead while it is held. kubernetes-asyncio runs ``onstarted_leading`` as a task
        nobody awaits: a leader whose ``lead`` failed (a policy refused at start, caches that never listed) kept
        renewing the Lease and did nothing, and no standby could take over. Its error now ends the election,
        the Lease is released, and the error is raised as without leader election (exit status 1)."""
        from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
        from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def lead() -> None:
            try:
                await self.lead()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:     # kept for _elect to raise: the task running this is never awaited
                if not failed.done():
                    failed.set_exception(exc)

        lock = LeaseLock(self.opts.lease_name, self.opts.lease_namespace, self.identity, self.api_client)
        cfg = electionconfig.Config(lock, lease_duration=15, renew_deadline=10, retry_period=2,
                                    onstarted_leading=lead, onstopped_leading=self._lost)
        log.info("%s waiting to lead via Lease %s/%s", self.identity, self.opts.lease_namespace, self.opts.lease_name)
        election = asyncio.create_task(leaderelection.LeaderElection(cfg).run(), name="atoll-election")
        try:
            await asyncio.wait({election, failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not election.done():
                election.cancel()
            await asyncio.gather(election, return_exceptions=True)
        if failed.done():
            log.error("%s: leading failed; giving the leader Lease up", self.identity)
            await self._release_lease()
            failed.result()              # raises lead's error
        return 1                     # leadership lost: exit so a fresh process rebuilds from the API

    async def _lost(self) -> None:
        metrics.LEADER.set(0)
        log.error("%s lost the leader Lease; exiting", self.identity)

