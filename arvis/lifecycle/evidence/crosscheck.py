"""The witness's account and the database's, compared (DESIGN §10, issue 23).

:class:`ChainFacts` is what a verified walk of the chain saw — each position's hash, the
intent each entry settles, and whether each entry still settles the intent its receipt
commits to; :func:`cross_check` holds it against the witness's records of the run and
names the first disagreement (rules: docs/journal-format.md, "Witness lines"). Used by
:mod:`arvis.lifecycle.evidence.verify` and by the offline bundle verifier.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.checkpoints import Checkpoint, signed_text
from arvis.domain.errors import ArvisError
from arvis.domain.intent import intent_commitment
from arvis.lifecycle.records import ChainRow

WITNESS_GRACE_S = 10.0
"""How long an entry another process appended may be in the database before the
witness has it (the witness takes it just after its journal statement committed), an
intent in the witness before the database has it (taken just before its admission
statement commits) and a checkpoint stored before the witness has it, without any of
them being a disagreement. Entries this process appended are never in this window: a
verify hands them to the witness first, and counts those still pending by the hash
their append returned."""

_RECENT = 1024
# Recorded times kept of the chain's last entries: only a tail not yet witnessed needs them.


class TrustedKey(Protocol):
    """The public key checkpoints are checked with."""

    key_id: str

    def verifies(self, checkpoint: Checkpoint) -> bool: ...


@dataclass
class ChainFacts:
    """What a verified walk of the chain saw."""

    hashes: dict[int, str] = field(default_factory=dict)
    """position → entry hash."""
    commitments: dict[str, tuple[int, str]] = field(default_factory=dict)
    """intent id → (position, intent commitment in the entry's receipt)."""
    settled: dict[str, int] = field(default_factory=dict)
    """intent id → the position of the (last) entry that carries it."""
    recorded: OrderedDict[int, datetime] = field(default_factory=OrderedDict)
    """position → recorded time, for the chain's last entries only."""
    unfaithful: tuple[int, str] | None = None
    """The first entry whose receipt does not commit to the entry's own intent."""

    def visit(self, row: ChainRow) -> None:
        position, entry_hash, kind, intent_id, body = row[0], row[2], row[3], row[7], row[10]
        self.hashes[position] = entry_hash
        self.recorded[position] = row[9]
        if len(self.recorded) > _RECENT:
            self.recorded.popitem(last=False)
        if intent_id is None:
            return
        self.settled[intent_id] = position
        if '"receipt"' not in body:
            return
        try:
            fields = json.loads(body)
        except ValueError:
            fields = None
        if not isinstance(fields, dict):
            # Only a writer who recomputed the hashes gets here: bodies ARVIS writes are JSON.
            if self.unfaithful is None:
                self.unfaithful = (position, "entry altered: its body is not a JSON object")
            return
        receipt = fields.get("receipt")
        if not isinstance(receipt, dict) or not isinstance(receipt.get("intent_commitment"), str):
            return
        commitment = receipt["intent_commitment"]
        self.commitments[intent_id] = (position, commitment)
        if self.unfaithful is None and kind in ("execution", "recovery"):
            problem = _unfaithful(row, fields, commitment)
            if problem is not None:
                self.unfaithful = (position, problem)


def _unfaithful(row: ChainRow, body: Mapping[str, Any], commitment: str) -> str | None:
    """Why the entry does not settle the intent its receipt commits to; None when it does
    (or when the entry predates the fields that say so)."""
    payload = body.get("payload")
    if payload is not None:
        try:
            digest = sha256_hex(canonical_bytes(payload))
        except ArvisError:
            digest = None
        if digest != body.get("payload_digest"):
            return "entry altered: its payload is not the one its digest names"
    context, capability = body.get("context"), body.get("capability")
    if not isinstance(context, dict) or not isinstance(capability, dict) or row[6] is None:
        return None
    try:
        recomputed = intent_commitment(
            intent_id=str(row[7]),
            tenant_id=str(context["tenant_id"]),
            run_id=str(context["run_id"]),
            causal_id=row[4],
            principal_id=str(context["principal_id"]),
            tool=str(body["tool"]),
            plan_id=str(body["plan_id"]),
            payload_digest=str(body["payload_digest"]),
            idempotency_key=row[5],
            attempt=row[6],
            capability_id=str(capability["id"]),
        )
    except (KeyError, TypeError):
        return None
    if recomputed != commitment:
        return "entry altered: it does not settle the intent its receipt commits to"
    return None


def cross_check(
    records: Iterable[Mapping[str, Any]],
    tenant_id: str,
    run_id: str,
    facts: ChainFacts,
    checkpoints: Sequence[Checkpoint],
    key: TrustedKey | None,
    *,
    length: int,
    in_flight: set[str] | None = None,
    now: datetime | None = None,
    grace_s: float = WITNESS_GRACE_S,
    prefix: bool = False,
) -> tuple[int, str] | None:
    """The first (lowest position) disagreement between the database and the witness.

    ``in_flight`` and ``now`` let an intent the witness has and no entry settles pass
    while it is in flight or younger than ``grace_s``; without them (offline, a bundle)
    such an intent is not judged. An entry the witness does not have yet passes when it
    is after the last witnessed one and younger than ``grace_s``. ``prefix``: the chain
    is a copy made earlier (a bundle), so what the witness took after it — entries past
    its end, checkpoints signed later — is no disagreement; what it took of the copy's
    own positions still must agree.
    """
    intents: dict[str, Mapping[str, Any]] = {}
    entries: dict[int, Mapping[str, Any]] = {}
    witnessed: dict[int, Checkpoint] = {}
    seen = False
    for record in records:
        if record.get("tenant_id") != tenant_id or record.get("run_id") != run_id:
            continue
        seen = True
        kind = record.get("type")
        if kind == "intent":
            # The last record of an intent is what was admitted: an earlier one may be
            # of a round the store answered 'stale' (decided again, same intent id).
            intents[str(record.get("intent_id"))] = record
        elif kind == "intent_void":
            intents[str(record.get("intent_id"))] = record
        elif kind == "entry":
            position = record.get("position")
            if not isinstance(position, int) or isinstance(position, bool) or position < 1:
                return 0, "the witness holds an unreadable entry record"
            entries[position] = record
        elif kind == "checkpoint":
            try:
                checkpoint = Checkpoint.from_record(record)
            except ValueError as exc:
                return 0, f"the witness holds an unreadable checkpoint: {exc}"
            witnessed[checkpoint.length] = checkpoint
    if not seen:
        # Entries reach the witness just after they commit: a run this young may have
        # none there yet (a run of refusals has no intents).
        young = now is not None and all(
            _recent(facts.recorded.get(p), now, grace_s) for p in facts.hashes
        )
        if facts.hashes and not young:
            return 1, f"the witness has no record of run {run_id}"
        return None
    problems: list[tuple[int, str]] = []
    if prefix:
        entries = {p: record for p, record in entries.items() if p <= length}
        witnessed = {n: c for n, c in witnessed.items() if n in facts.hashes}
    problems += _intent_problems(intents, facts, length, in_flight, now, grace_s)
    problems += _entry_problems(entries, facts, length, now, grace_s)
    problems += _checkpoint_problems(witnessed, checkpoints, facts, key, prefix, now, grace_s)
    return min(problems) if problems else None


def _recent(moment: datetime | None, now: datetime | None, grace_s: float) -> bool:
    """``moment`` is within ``grace_s`` of ``now`` (either way: clocks differ a little)."""
    if moment is None or now is None:
        return False
    return abs((now - moment).total_seconds()) < grace_s


def _intent_problems(
    intents: Mapping[str, Mapping[str, Any]],
    facts: ChainFacts,
    length: int,
    in_flight: set[str] | None,
    now: datetime | None,
    grace_s: float,
) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    for intent_id, (position, commitment) in facts.commitments.items():
        record = intents.get(intent_id)
        if record is None or record.get("type") != "intent":
            problems.append(
                (position, f"position {position}: the witness has no intent {intent_id}")
            )
        elif record.get("intent_commitment") != commitment:
            theirs = str(record.get("intent_commitment"))
            problems.append(
                (
                    position,
                    f"position {position}: intent {intent_id} commits to {commitment[:16]} in the"
                    f" database, to {theirs[:16]} in the witness",
                )
            )
    if in_flight is None or now is None:
        return problems
    for intent_id, record in intents.items():
        if record.get("type") != "intent" or intent_id in facts.settled or intent_id in in_flight:
            continue
        admitted = _moment(record.get("admitted_at"))
        if admitted is not None and now - admitted < timedelta(seconds=grace_s):
            continue  # its admission may not have committed yet
        problems.append(
            (
                length + 1,
                f"the witness holds intent {intent_id} (admitted {record.get('admitted_at')}),"
                " which no entry settles and which is not in flight (its entry deleted?)",
            )
        )
    return problems


def _moment(text: object) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _entry_problems(
    entries: Mapping[int, Mapping[str, Any]],
    facts: ChainFacts,
    length: int,
    now: datetime | None,
    grace_s: float,
) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    for position, record in entries.items():
        ours = facts.hashes.get(position)
        if ours is None:
            problems.append(
                (
                    position,
                    f"position {position}: the witness holds an entry the database does not have"
                    " (deleted?)",
                )
            )
        elif ours != record.get("entry_hash"):
            problems.append(
                (
                    position,
                    f"position {position}: the entry's hash differs from the witness's"
                    " (rewritten?)",
                )
            )
    if not entries:
        return problems
    # The witness took entries from its first one on (earlier ones predate entry records).
    first, last = min(entries), max(entries)
    for position in range(first, length + 1):
        if position in entries:
            continue
        if not (position > last and _recent(facts.recorded.get(position), now, grace_s)):
            problems.append(
                (
                    position,
                    f"position {position}: the witness has no record of this entry (inserted, or"
                    " the process stopped before the witness took it)",
                )
            )
            break
    return problems


def _checkpoint_problems(
    witnessed: Mapping[int, Checkpoint],
    checkpoints: Sequence[Checkpoint],
    facts: ChainFacts,
    key: TrustedKey | None,
    prefix: bool,
    now: datetime | None,
    grace_s: float,
) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    stored = {c.length: c for c in checkpoints}
    for length, checkpoint in witnessed.items():
        at = signed_text(checkpoint.signed_at)
        if key is not None and not key.verifies(checkpoint):
            problems.append(
                (length, f"the witness's checkpoint of {length} entries at {at} is not signed")
            )
        elif facts.hashes.get(length) != checkpoint.head_hash:
            problems.append(
                (
                    length,
                    f"position {length}: the chain differs from the witness's"
                    f" checkpoint of {length} entries at {at}",
                )
            )
        elif (length not in stored and not prefix) or stored.get(length, checkpoint) != checkpoint:
            problems.append(
                (
                    length,
                    f"the witness's checkpoint of {length} entries at {at} is not here (deleted?)",
                )
            )
    for length in stored.keys() - witnessed.keys():
        # The witness takes a checkpoint just after it is stored.
        if not _recent(stored[length].signed_at, now, grace_s):
            problems.append((length, f"the checkpoint of {length} entries is not in the witness"))
    return problems
