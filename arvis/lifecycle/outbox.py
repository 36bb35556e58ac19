"""IntentOutboxService: the intent and its audit receipt, before anything runs."""

from __future__ import annotations

import logging

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.domain.errors import ArvisError
from arvis.lifecycle.errors import AuditSinkFailure, InvalidReceipt
from arvis.lifecycle.ports import AuditSink, LifecycleUnitOfWork

log = logging.getLogger(__name__)


class IntentOutboxService:
    def __init__(self, sink: AuditSink, store_fingerprint: str) -> None:
        self.sink = sink
        self.store_fingerprint = store_fingerprint

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        """Write the intent through the sink and check the receipt names it exactly.

        Any failure aborts the admission transaction: no capability is consumed
        and no tool body runs.
        """
        try:
            receipt = await self.sink.record(uow, intent)
        except ArvisError:
            raise
        except Exception as exc:
            log.exception("audit sink failed for intent %s", intent.intent_id)
            raise AuditSinkFailure("the audit sink failed; nothing was run") from exc
        self.check(receipt, intent)
        return receipt

    def check(self, receipt: AuditReceipt, intent: Intent) -> None:
        """Refuse a receipt that does not name exactly this intent in this store."""
        if not isinstance(receipt, AuditReceipt):
            raise InvalidReceipt("the audit sink answered something that is not a receipt")
        problems = []
        if receipt.intent_commitment != intent.commitment:
            problems.append("it commits to another intent")
        if receipt.run_id != intent.context.run_id or receipt.causal_id != intent.context.causal_id:
            problems.append("it names another run or causal id")
        if receipt.store_fingerprint != self.store_fingerprint:
            problems.append("it comes from another store")
        if receipt.position < 1:
            problems.append("its durable position is not positive")
        if problems:
            raise InvalidReceipt("invalid audit receipt: " + "; ".join(problems))
