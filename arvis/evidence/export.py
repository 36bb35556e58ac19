"""``arvis export``: one run as a self-contained audit bundle (:mod:`arvis.evidence.bundle`),
read through the lifecycle's ports, wired once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from arvis.domain.ids import RunId, TenantId
from arvis.evidence.bundle import build_bundle
from arvis.evidence.keys import PublicKey
from arvis.lifecycle.errors import NotFound
from arvis.lifecycle.evidence.checkpoints import Checkpointer
from arvis.lifecycle.ports import LifecycleStore
from arvis.tools.plans import PlanStore


@dataclass(frozen=True)
class Exported:
    data: bytes
    """The bundle's bytes."""
    head_signed: bool
    """False when this deployment signs checkpoints but could not sign the run's head
    now: its last entries will not verify with the public key."""


@dataclass(eq=False)
class BundleExporter:
    """Exports runs with the deployment's public key embedded (or one given)."""

    store: LifecycleStore
    plans: PlanStore
    public_key: PublicKey | None
    checkpointer: Checkpointer | None

    async def export(
        self, tenant_id: TenantId, run_id: RunId, public_key: PublicKey | None = None
    ) -> Exported:
        """The bundle of the run. NotFound: no such run in the tenant."""
        # With the signing key here, the bundle's last entry is signed too (when the
        # chain descends from the head signed last), so nothing in it is unverified.
        signed_head = True
        if self.checkpointer is not None:
            signed_head = await self.checkpointer.sign_head(tenant_id, run_id)
        async with self.store.reading() as reads:
            record = await reads.run(tenant_id, run_id)
            if record is None:
                raise NotFound(f"no run {run_id} in tenant {tenant_id}")
            signed = await reads.checkpoints(tenant_id, run_id)
            definitions = await self.plans.load_plan(record.plan_id)
            plans = {} if definitions is None else {str(record.plan_id): definitions}
            key = public_key or self.public_key
            data = await build_bundle(reads, tenant_id, run_id, plans, signed, key)
        return Exported(data, signed_head)
