"""Declared audit sinks for tests: a faithful one, and ones that each break one promise.

The built-in sink is the store's own admission statement; a declared sink records
an intent before that statement and answers its own receipt (DESIGN §1).
"""

from __future__ import annotations

import itertools

from arvis.domain.errors import StoreUnavailable
from arvis.domain.intent import AuditReceipt, Intent
from arvis.store.audit import AuditHost

_POSITIONS = itertools.count(1)


class RecordingSink:
    """Keeps every intent it was asked to record, in order, and answers a faithful
    receipt; positions grow across every run (one log for the whole deployment)."""

    def __init__(self, store_fingerprint: str) -> None:
        self.store_fingerprint = store_fingerprint
        self.recorded: list[Intent] = []

    async def record(self, intent: Intent) -> AuditReceipt:
        self.recorded.append(intent)
        return AuditReceipt(
            intent_commitment=intent.commitment,
            run_id=intent.context.run_id,
            causal_id=intent.context.causal_id,
            position=next(_POSITIONS),
            store_fingerprint=self.store_fingerprint,
        )


class RaisingSink(RecordingSink):
    async def record(self, intent: Intent) -> AuditReceipt:
        await super().record(intent)
        raise RuntimeError("the audit backend fell over")


class ForeignReceiptSink(RecordingSink):
    """Answers a receipt that commits to some other intent."""

    async def record(self, intent: Intent) -> AuditReceipt:
        receipt = await super().record(intent)
        return receipt.model_copy(update={"intent_commitment": "f" * 64})


class ReusedPositionSink(RecordingSink):
    """Answers every receipt with the durable position of its first one."""

    def __init__(self, store_fingerprint: str) -> None:
        super().__init__(store_fingerprint)
        self.first: int | None = None

    async def record(self, intent: Intent) -> AuditReceipt:
        receipt = await super().record(intent)
        if self.first is None:
            self.first = receipt.position
        return receipt.model_copy(update={"position": self.first})


class UnreachableStoreSink(RecordingSink):
    """The audit backend's own store went away while the intent was being recorded."""

    async def record(self, intent: Intent) -> AuditReceipt:
        raise StoreUnavailable("the audit store is unreachable (test)")


# Factories for ``[audit] sink = "tests.support.sinks:…"`` in arvis.toml.

RECORDED: list[Intent] = []
"""Every intent the declared recording sink was asked to record, in order."""


class _SharedRecordingSink(RecordingSink):
    def __init__(self, store_fingerprint: str) -> None:
        super().__init__(store_fingerprint)
        self.recorded = RECORDED


def recording_sink(host: AuditHost) -> RecordingSink:
    return _SharedRecordingSink(host.store_fingerprint)


def foreign_receipt_sink(host: AuditHost) -> ForeignReceiptSink:
    return ForeignReceiptSink(host.store_fingerprint)
