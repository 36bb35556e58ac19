"""IntentOutboxService: the intent's audit receipt, checked on every path (DESIGN §1).

The built-in sink is the store: the admission statement records the intent and
assigns the receipt's durable position (the run's next receipt number). A
declared sink records the intent first, before the admission statement runs, and
answers its own receipt. Either way the receipt is checked: it must commit to
exactly this intent, name its run and causal id and this store, and carry a
positive durable position; the admission statement also refuses a position that
is not past the run's last one. A declared sink's failure or bad receipt stops
the admission before anything is written.

A witness (``[audit.witness]``, issue 19) is told of every intent before the
admission statement runs, after a declared sink answered; one that cannot take
it fails the admission closed like a failing sink: nothing is admitted, no tool
body runs. When the statement then does not admit the intent (``stale``, a plan
to rebind, a spent budget, a reused receipt position) the witness is told so
(:meth:`IntentOutboxService.not_admitted`), so ``verify`` does not look for an
entry settling it (issue 23).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from arvis.domain.errors import ArvisError
from arvis.domain.intent import AuditReceipt, Intent
from arvis.lifecycle.errors import AuditSinkFailure, InvalidReceipt
from arvis.lifecycle.ports import AuditSink

log = logging.getLogger(__name__)


class IntentWitness(Protocol):
    async def witness_intent(
        self, intent: Intent, commitment: str, receipt: AuditReceipt | None
    ) -> None:
        """Keep the intent (and a declared sink's receipt) durably, or raise."""
        ...

    async def witness_void(self, intent: Intent, status: str) -> None:
        """Keep that the admission statement answered ``status`` and did not admit it."""
        ...


@dataclass(eq=False)
class IntentOutboxService:
    sink: AuditSink | None
    """A declared sink; None: the store's own (built-in) sink."""
    store_fingerprint: str
    witness: IntentWitness | None = None

    async def declared_receipt(self, intent: Intent, commitment: str) -> AuditReceipt | None:
        """The declared sink's checked receipt for ``intent``; None for the built-in sink.

        Called just before the admission statement: the witness, if any, has the
        intent durably when this returns."""
        receipt = await self._declared(intent, commitment)
        if self.witness is not None:
            try:
                await self.witness.witness_intent(intent, commitment, receipt)
            except ArvisError:
                raise
            except Exception as exc:
                log.error("the witness failed for intent %s: %r", intent.intent_id, exc)
                raise AuditSinkFailure("the audit witness failed; nothing was run") from exc
        return receipt

    async def not_admitted(self, intent: Intent, status: str) -> None:
        """The admission statement answered ``status`` for ``intent``: nothing was
        admitted. A witness that cannot take it is logged, never an error (nothing ran;
        ``verify`` then names the witnessed intent that no entry settles)."""
        if self.witness is None:
            return
        try:
            await self.witness.witness_void(intent, status)
        except Exception as exc:
            log.error("the witness did not take the void of intent %s: %r", intent.intent_id, exc)

    async def _declared(self, intent: Intent, commitment: str) -> AuditReceipt | None:
        if self.sink is None:
            return None
        try:
            receipt = await self.sink.record(intent)
        except ArvisError:
            raise
        except Exception as exc:
            log.exception("audit sink failed for intent %s", intent.intent_id)
            raise AuditSinkFailure("the audit sink failed; nothing was run") from exc
        self.check(receipt, intent, commitment)
        return receipt

    def builtin_receipt(self, intent: Intent, commitment: str, position: int) -> AuditReceipt:
        """The built-in sink's receipt at the position the store assigned, checked."""
        # Built from values ARVIS made itself: no validation to repeat.
        receipt = AuditReceipt.model_construct(
            intent_commitment=commitment,
            run_id=intent.context.run_id,
            causal_id=intent.context.causal_id,
            position=position,
            store_fingerprint=self.store_fingerprint,
        )
        self.check(receipt, intent, commitment)
        return receipt

    def check(self, receipt: AuditReceipt, intent: Intent, commitment: str) -> None:
        """Refuse a receipt that does not name exactly this intent (whose commitment is
        ``commitment``) in this store."""
        if not isinstance(receipt, AuditReceipt):
            raise InvalidReceipt("the audit sink answered something that is not a receipt")
        problems = []
        if receipt.intent_commitment != commitment:
            problems.append("it commits to another intent")
        if receipt.run_id != intent.context.run_id or receipt.causal_id != intent.context.causal_id:
            problems.append("it names another run or causal id")
        if receipt.store_fingerprint != self.store_fingerprint:
            problems.append("it comes from another store")
        if receipt.position < 1:
            problems.append("its durable position is not positive")
        if problems:
            raise InvalidReceipt("invalid audit receipt: " + "; ".join(problems))
