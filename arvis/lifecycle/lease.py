"""The lease every admitting process holds (DESIGN §6).

A process that can admit a syscall — each ``serve`` worker, ``arvis turn``, a
per-turn instance, a test harness — holds its own heartbeat lease from before
its first admission until after its last settle. The lease name is the owner
recorded on every intent the process admits, and recovery settles an intent
only once its owner's lease has expired or been released: a live process's
in-flight call is never settled by anyone else.

Names are ``<instance id>/<slot>``. A process claims the lowest slot that is
free — never held, released, or expired, by database time — in one
conditional statement, and stamps it with a random holder token; it beats only
while it is still that holder. So the workers of one ``ARVIS_INSTANCE_ID`` get
distinct names, a restarted worker never takes a sibling's live name, and two
processes can never both believe they hold one. Whatever a free slot's earlier
holder left unsettled is provably abandoned, so the claimer settles it at once.

The holder text also says where and when its process runs
(:mod:`arvis.lifecycle.holder`). Before it claims, a process takes over the
slots of its instance id whose holder provably died on this host — a crash of
this process's predecessor, not yet expired — by releasing each in one
statement conditional on that exact holder, so it settles its own crash at
start-up, at once (DESIGN §10). A live process's slot, or another host's, is
never taken over: it is left to expire (DESIGN §6).

The process also keeps a local deadline: a successful claim or beat sent at
monotonic time *t* makes the lease good until *t + ttl* less a margin, which is
never later than the database's own expiry. The handler admits only before that
deadline, so a process whose heartbeats stopped reaching the database stops
admitting before anyone may sweep its calls.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from arvis.domain.errors import ArvisError, StoreUnavailable
from arvis.lifecycle.holder import Holder, ProcessProbe, ProcProbe, provably_gone
from arvis.lifecycle.ports import LifecycleStore

log = logging.getLogger(__name__)

# Slots tried by one claim. More than this many live processes under one
# instance id is a misconfiguration worth a clear error.
MAX_SLOTS = 256
# Leave this fraction of the ttl unused locally: a beat's answer may arrive late.
_MARGIN = 0.1


class LeaseNotHeld(ArvisError):
    """This process holds no live lease, so it may not admit (DESIGN §6)."""

    code = "lease_not_held"


class InstanceLease:
    """One process's heartbeat lease under a deployment's instance id."""

    def __init__(
        self,
        store: LifecycleStore,
        instance_id: str,
        ttl_s: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        probe: ProcessProbe | None = None,
    ) -> None:
        self.store = store
        self.instance_id = instance_id
        self.ttl_s = ttl_s
        self._probe = probe or ProcProbe()
        # The pid tells an operator which process holds a name; the random part
        # keeps two lives of one pid apart; the rest says where and when it runs.
        self.identity = Holder.of_this_process(uuid.uuid4().hex, self._probe)
        self.holder = self.identity.text()
        self._slot = re.compile(re.escape(instance_id) + r"/[0-9]+")
        self._monotonic = monotonic
        self._name: str | None = None
        self._good_until = 0.0
        self._unreachable = False

    @property
    def name(self) -> str:
        """The claimed lease name: the owner of every intent this process admits."""
        if self._name is None:
            raise LeaseNotHeld("this process has not claimed a lease yet")
        return self._name

    @property
    def claimed(self) -> bool:
        return self._name is not None

    def held(self) -> bool:
        """True while the lease is certainly live in the database."""
        return self._name is not None and self._monotonic() < self._good_until

    def require(self) -> str:
        """The lease name, or :class:`LeaseNotHeld` when the lease may have lapsed —
        :class:`StoreUnavailable` when it lapsed because the database could not be
        reached to renew it, so a caller sees one answer for the whole outage."""
        if not self.held():
            if self._name is not None and self._unreachable:
                raise StoreUnavailable(
                    "the database is unreachable, so this instance's lease could not be "
                    "renewed; nothing ran, retry later"
                )
            raise LeaseNotHeld(
                "this instance's lease is not live (the database may be unreachable); "
                "retry on another instance"
            )
        return self.name

    async def take_over(self) -> list[str]:
        """Release the slots of this instance id whose holder provably died on this
        host (:func:`~arvis.lifecycle.holder.provably_gone`); answer their names.

        Each release is one statement conditional on the exact holder read, so a slot
        claimed by someone else meanwhile is left alone. What the dead holder left in
        flight is then abandoned: the start-up sweep settles it at once.
        """
        taken = []
        for name, text in await self.store.live_leases(self.instance_id):
            holder = Holder.parse(text)
            if not self._slot.fullmatch(name) or holder is None:
                continue
            if not provably_gone(holder, self.identity, self._probe):
                continue
            if await self.store.release_lease(name, text):
                log.warning("took over lease %s: its holder %s is gone", name, text)
                taken.append(name)
        return taken

    async def claim(self) -> str:
        """Take the lowest free slot under the instance id; answer its name."""
        for slot in range(1, MAX_SLOTS + 1):
            name = f"{self.instance_id}/{slot}"
            sent = self._monotonic()
            if await self.store.claim_lease(name, self.holder, self.ttl_s):
                self._name = name
                self._extend(sent)
                return name
        raise LeaseNotHeld(
            f"all {MAX_SLOTS} lease slots of instance {self.instance_id!r} are held by live "
            "processes; give this process another ARVIS_INSTANCE_ID"
        )

    async def beat(self) -> None:
        """Extend the lease. If another process took the name (ours had expired),
        claim a fresh slot: this process's old intents are that process's to settle."""
        if self._name is None:
            await self.claim()
            return
        sent = self._monotonic()
        try:
            beaten = await self.store.beat_lease(self._name, self.holder, self.ttl_s)
        except StoreUnavailable:
            self._unreachable = True
            raise
        self._unreachable = False
        if beaten:
            self._extend(sent)
            return
        self._good_until = 0.0
        self._name = None
        await self.claim()

    async def release(self) -> None:
        """Give the name back: anything still unsettled under it may now be swept."""
        if self._name is None:
            return
        name, self._name, self._good_until = self._name, None, 0.0
        await self.store.release_lease(name, self.holder)

    def _extend(self, sent: float) -> None:
        self._good_until = sent + self.ttl_s * (1 - _MARGIN)
