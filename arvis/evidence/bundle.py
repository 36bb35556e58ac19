"""Audit bundles: one run's evidence in one file, checked offline (docs/journal-format.md).

``arvis export RUN`` writes the run's entries, the plan definitions in force, its
checkpoints and the public key (with its id); ``arvis verify --bundle FILE`` checks
it on a machine with no database. The file is the RFC 8785 text of one JSON object
and a newline, with a SHA-256 ``digest`` of the rest, so any edited byte fails:
reformatting fails the canonical-form check, a changed value fails the digest, and
a changed value with a recomputed digest fails the chain, a plan's digest or a
checkpoint's signature. The key embedded in a bundle proves nothing by itself
(whoever rewrote the bundle could have signed with a key of their own): an auditor
compares the key id printed with the deployment's published one, or passes
``--public-key``.

What a trusted key covers (DESIGN §10): with ``--public-key``, an entry is verified
only when a checkpoint that key signed covers it (its length is at or past the
entry's position), or when a witness the auditor passes (``--witness``) holds it with
its hash. Entries covered by neither are reported unverified, with how many, and the
bundle does not verify: edited entries under removed checkpoints, or a bundle with no
checkpoints at all, never pass. Witness lines inside a bundle would prove nothing
(whoever edits the bundle edits them too), so a bundle carries none. What no bundle
can show is that the run had no entries after its last signed head: the verifier
prints that head's length and time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, cast

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.checkpoints import Checkpoint, public_key_id, signed_text
from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import ArvisError
from arvis.domain.ids import PlanId, RunId, TenantId
from arvis.evidence.keys import PublicKey, SigningKeyError
from arvis.lifecycle.evidence.crosscheck import ChainFacts, cross_check
from arvis.lifecycle.evidence.report import checkpoints_hold
from arvis.lifecycle.journal import VERIFY_PAGE, recorded_text, walk
from arvis.lifecycle.ports import LifecycleReads
from arvis.lifecycle.records import ChainRow, RunRecord
from arvis.tools.plans import derive_plan_id

BUNDLE_FORMAT = "arvis-bundle-v1"


class BundleInvalid(ArvisError):
    """The bundle is not an intact ARVIS audit bundle."""

    code = "bundle_invalid"


async def build_bundle(
    reads: LifecycleReads,
    tenant_id: TenantId,
    run_id: RunId,
    plans: dict[str, list[dict[str, Any]]],
    checkpoints: list[Checkpoint],
    public_key: PublicKey | None,
) -> bytes:
    """The bundle's bytes, read from one snapshot (``reads``). LookupError: no run."""
    run = await reads.run(tenant_id, run_id)
    if run is None:
        raise LookupError(run_id)
    entries: list[dict[str, Any]] = []
    after = 0
    while True:
        rows = await reads.chain(tenant_id, run_id, after, VERIFY_PAGE)
        entries.extend(_entry(row) for row in rows)
        if len(rows) < VERIFY_PAGE:
            break
        after = rows[-1][0]
    content: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "tenant_id": tenant_id,
        "run_id": run_id,
        "run": {
            "plan_id": run.plan_id,
            "journal_length": run.journal_length,
            "journal_head": run.journal_head,
            "audit_incomplete": run.audit_incomplete,
        },
        "entries": entries,
        "plans": plans,
        "checkpoints": [c.as_record() for c in checkpoints],
        "public_key": None
        if public_key is None
        else {"key_id": public_key.key_id, "ed25519": public_key.raw_b64},
    }
    content["digest"] = sha256_hex(canonical_bytes(content))
    return canonical_bytes(content) + b"\n"


def _entry(row: ChainRow) -> dict[str, Any]:
    position, prev, entry_hash, kind, causal, key, attempt, intent, boundary, at, body = row
    return {
        "position": position,
        "prev_hash": prev,
        "entry_hash": entry_hash,
        "kind": kind,
        "causal_id": causal,
        "idempotency_key": key,
        "attempt": attempt,
        "intent_id": intent,
        "boundary": boundary,
        "recorded_at": recorded_text(at),
        "body": body,
    }


@dataclass(frozen=True)
class BundleReport:
    ok: bool
    run_id: str
    tenant_id: str
    entries: int
    checkpoints: int
    key_id: str | None
    problem: str | None = None
    broken_at: int | None = None
    trusted: bool = False
    """A trusted key was given: ``ok`` means every entry is covered by its checkpoints
    (or the witness given)."""
    signed_length: int = 0
    """The length of the last checkpoint that held (0: none)."""
    signed_at: str | None = None
    """When that checkpoint was signed."""
    unverified: int = 0
    """Entries no checkpoint that held, and no witness given, covers."""

    def as_json(self) -> dict[str, Any]:
        """Every field, in order (``arvis verify --bundle --json``)."""
        return asdict(self)


class _BundleReads:
    """The two reads the chain walk needs, answered from a bundle."""

    def __init__(self, run: RunRecord, rows: list[ChainRow]) -> None:
        self._run = run
        self._rows = rows

    async def run(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None:
        return self._run

    async def chain(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[ChainRow]:
        return [row for row in self._rows if row[0] > after][:limit]


def _parse(data: bytes) -> dict[str, Any]:
    try:
        content = json.loads(data)
    except ValueError:
        raise BundleInvalid("the bundle is not JSON") from None
    if not isinstance(content, dict):
        raise BundleInvalid("the bundle is not a JSON object")
    try:
        canonical = canonical_bytes(content) + b"\n"
    except (ArvisError, ValueError, TypeError):
        raise BundleInvalid("the bundle holds values JSON canonicalisation refuses") from None
    if canonical != data:
        raise BundleInvalid("the bundle's bytes are not its canonical form (edited?)")
    if content.get("format") != BUNDLE_FORMAT:
        raise BundleInvalid(f"the bundle's format is not {BUNDLE_FORMAT}")
    digest = content.pop("digest", None)
    if digest != sha256_hex(canonical_bytes(content)):
        raise BundleInvalid("the bundle's digest does not match its content (edited?)")
    return content


def _rows(entries: list[Any]) -> list[ChainRow]:
    rows: list[ChainRow] = []
    for e in entries:
        at = datetime.fromisoformat(e["recorded_at"])
        if recorded_text(at) != e["recorded_at"]:
            raise ValueError("a recorded_at is not in its canonical form")
        rows.append(
            (
                e["position"],
                e["prev_hash"],
                e["entry_hash"],
                e["kind"],
                e["causal_id"],
                e["idempotency_key"],
                e["attempt"],
                e["intent_id"],
                e["boundary"],
                at,
                e["body"],
            )
        )
    return rows


async def verify_bundle(
    data: bytes,
    trusted: PublicKey | None = None,
    witness: Iterable[Mapping[str, Any]] | None = None,
    *,
    served_at: datetime | None = None,
) -> BundleReport:
    """Check a bundle with nothing but its bytes (and, optionally, the trusted key and
    the records of a witness).

    A bundle is a copy made earlier: what the witness took after it (entries past its end,
    checkpoints signed later) is no disagreement. With ``served_at``, the bundle was served
    at that moment by the deployment, just now, and the witness was read *before* it was
    asked (remote ``arvis verify``): it is the run as it stands, so an entry or checkpoint
    the witness holds past its end is a disagreement (a deleted tail), and a checkpoint
    signed within the witness's grace of ``served_at`` (the head, signed for the bundle)
    may not be there yet.
    """
    content = _parse(data)
    tenant_id, run_id = str(content.get("tenant_id")), str(content.get("run_id"))
    try:
        run_fields = content["run"]
        run = RunRecord(
            tenant_id=TenantId(tenant_id),
            run_id=RunId(run_id),
            plan_id=PlanId(run_fields["plan_id"]),
            journal_length=int(run_fields["journal_length"]),
            journal_head=str(run_fields["journal_head"]),
            audit_incomplete=bool(run_fields["audit_incomplete"]),
        )
        rows = _rows(content["entries"])
        checkpoints = [Checkpoint.from_record(c) for c in content["checkpoints"]]
        plans = content["plans"]
        key_fields = content["public_key"]
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleInvalid(f"the bundle is malformed: {exc!r}") from None

    def report(problem: str | None, **extra: Any) -> BundleReport:
        return BundleReport(
            ok=problem is None,
            run_id=run_id,
            tenant_id=tenant_id,
            entries=len(rows),
            checkpoints=extra.pop("checked", 0),
            key_id=None if key_fields is None else str(key_fields.get("key_id")),
            problem=problem,
            broken_at=extra.pop("broken_at", None),
            trusted=trusted is not None,
            **extra,
        )

    facts = ChainFacts()
    chain = await walk(
        cast(LifecycleReads, _BundleReads(run, rows)), run.tenant_id, run.run_id, facts.visit
    )
    if not chain.ok:
        return report(f"chain broken: {chain.reason}", broken_at=chain.broken_at)
    if facts.unfaithful is not None:
        return report(facts.unfaithful[1], broken_at=facts.unfaithful[0])
    problem = _check_plans(plans, run.plan_id)
    if problem is not None:
        return report(problem)
    key: PublicKey | None = None
    if key_fields is not None:
        try:
            key = PublicKey.from_raw_b64(str(key_fields["ed25519"]))
        except (SigningKeyError, KeyError, TypeError):
            return report("the bundle's public key is not an Ed25519 key")
        if public_key_id(key.raw) != key_fields.get("key_id"):
            return report("the bundle's key id is not its public key's fingerprint")
    if trusted is not None:
        if key is not None and key.key_id != trusted.key_id:
            return report(
                f"the bundle carries key {key.key_id[:16]}, not the trusted {trusted.key_id[:16]}"
            )
        key = trusted
    if checkpoints and key is None:
        return report("the bundle has checkpoints and no key to check them with")
    checked, last = 0, None
    if key is not None:
        held = checkpoints_hold(checkpoints, tenant_id, run_id, chain, facts, key)
        if not held.ok:
            return report(held.problem, checked=held.checked, broken_at=held.rewritten_before)
        checked = held.checked
        last = max(checkpoints, key=lambda c: c.length, default=None)
    signed_length = 0 if last is None else last.length
    signed: dict[str, Any] = {"signed_length": signed_length}
    if last is not None:
        signed["signed_at"] = signed_text(last.signed_at)
    witnessed = 0
    if witness is not None:
        records = list(witness)
        disagreement = cross_check(
            records,
            tenant_id,
            run_id,
            facts,
            checkpoints,
            key,
            length=chain.entries,
            prefix=served_at is None,
            now=served_at,
        )
        if disagreement is not None:
            return report(
                f"the witness disagrees: {disagreement[1]}",
                checked=checked,
                broken_at=disagreement[0],
                **signed,
            )
        witnessed = _witnessed_tail(records, tenant_id, run_id, facts, signed_length)
    covered = signed_length + witnessed
    unverified = chain.entries - covered
    if trusted is not None and unverified > 0:
        by = "the trusted key" + (" or the witness given" if witness is not None else "")
        return report(
            f"{unverified} of {chain.entries} entries (positions {covered + 1} to"
            f" {chain.entries}) are not covered by a checkpoint signed by {by}: unverified",
            checked=checked,
            broken_at=covered + 1,
            unverified=unverified,
            **signed,
        )
    return report(None, checked=checked, unverified=unverified, **signed)


def _witnessed_tail(
    records: list[Mapping[str, Any]],
    tenant_id: str,
    run_id: str,
    facts: ChainFacts,
    signed_length: int,
) -> int:
    """How many entries after ``signed_length`` the witness holds with their hash (the
    cross-check passed, so from its first one to the end, without a gap)."""
    positions = {
        record["position"]
        for record in records
        if record.get("type") == "entry"
        and record.get("tenant_id") == tenant_id
        and record.get("run_id") == run_id
        and facts.hashes.get(record["position"]) == record.get("entry_hash")
    }
    count = 0
    for position in range(signed_length + 1, len(facts.hashes) + 1):
        if position not in positions:
            break
        count += 1
    return count


def _check_plans(plans: Any, bound: str) -> str | None:
    if not isinstance(plans, dict) or bound not in plans:
        return f"the bundle lacks the definitions of plan {bound}"
    for plan_id, records in plans.items():
        try:
            definitions = [ToolDefinition.from_dict(record) for record in records]
        except (ArvisError, KeyError, TypeError, ValueError):
            return f"plan {plan_id}: a definition does not match its fingerprint"
        if derive_plan_id(definitions) != plan_id:
            return f"plan {plan_id}: the definitions do not hash to the plan id"
    return None
