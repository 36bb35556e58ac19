"""Faulty audit sinks: each wraps the real PostgreSQL sink and breaks one promise."""

from __future__ import annotations

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.lifecycle.ports import LifecycleUnitOfWork
from arvis.store.audit import AuditHost, PgAuditSink


class RaisingSink(PgAuditSink):
    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        await super().record(uow, intent)
        raise RuntimeError("the audit backend fell over")


class ForeignReceiptSink(PgAuditSink):
    """Answers a receipt that commits to some other intent."""

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        receipt = await super().record(uow, intent)
        return receipt.model_copy(update={"intent_commitment": "f" * 64})


class ReusedPositionSink(PgAuditSink):
    """Answers every receipt with the durable position of its first one."""

    def __init__(self, store_fingerprint: str) -> None:
        super().__init__(store_fingerprint)
        self.first: int | None = None

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        receipt = await super().record(uow, intent)
        if self.first is None:
            self.first = receipt.position
        return receipt.model_copy(update={"position": self.first})


class UnreachableStoreSink(PgAuditSink):
    """The database went away while the intent was being written."""

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        from arvis.domain.errors import StoreUnavailable

        raise StoreUnavailable("the database is unreachable (test)")


# Factories for ``[audit] sink = "tests.support.sinks:…"`` in arvis.toml.

RECORDED: list[Intent] = []
"""Every intent the recording sink was asked to record, in order."""


class RecordingSink:
    """Records through the built-in sink, and remembers what it recorded."""

    def __init__(self, host: AuditHost) -> None:
        self.inner = host.default

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        receipt = await self.inner.record(uow, intent)
        RECORDED.append(intent)
        return receipt


def recording_sink(host: AuditHost) -> RecordingSink:
    return RecordingSink(host)


def foreign_receipt_sink(host: AuditHost) -> ForeignReceiptSink:
    return ForeignReceiptSink(host.store_fingerprint)
