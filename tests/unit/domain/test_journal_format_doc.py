"""docs/journal-format.md's test vector is what the code computes, from the doc's values."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arvis.domain.checkpoints import Checkpoint, checkpoint_preimage
from arvis.evidence.keys import SigningKey
from arvis.lifecycle.journal import chain_hash

DOC = (Path(__file__).resolve().parents[3] / "docs" / "journal-format.md").read_text()


def _table(heading: str) -> dict[str, str]:
    section = DOC.split(heading, 1)[1]
    rows = re.findall(r"^\| (?:\*\*)?([a-z_ ()A-Z,0-9]+?)(?:\*\*)? \| `([^`]*)` \|$", section, re.M)
    return dict(rows)


def test_the_documented_entry_hash_is_recomputed_from_the_documented_fields() -> None:
    f = _table("Entry fields:")
    computed = chain_hash(
        prev_hash=f["prev_hash"],
        tenant_id=f["tenant_id"],
        run_id=f["run_id"],
        position=int(f["position"]),
        kind=f["kind"],
        causal_id=f["causal_id"],
        idempotency_key=f["idempotency_key"],
        attempt=int(f["attempt"]),
        intent_id=f["intent_id"],
        boundary=f["boundary"],
        recorded_at=f["recorded_at"],
        body_text=f["body"],
    )
    assert computed == f["entry_hash"]


def test_the_documented_checkpoint_signature_and_key_id_are_recomputed() -> None:
    entry = _table("Entry fields:")
    f = _table("Checkpoint of that one-entry run")
    seed = re.search(r"32-byte seed is\n?`([0-9a-f]{64})`", DOC)
    assert seed is not None
    key = SigningKey(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed.group(1))))
    assert key.public.raw.hex() == f["public key (raw, hex)"]
    assert key.key_id == f["key_id"]
    preimage = checkpoint_preimage(
        tenant_id=entry["tenant_id"],
        run_id=entry["run_id"],
        length=int(f["length"]),
        head_hash=entry["entry_hash"],
        signed_at=f["signed_at"],
    )
    assert key.sign(preimage) == f["signature"]
    checkpoint = Checkpoint(
        tenant_id=entry["tenant_id"],
        run_id=entry["run_id"],
        length=1,
        head_hash=entry["entry_hash"],
        signed_at=datetime.fromisoformat(f["signed_at"]),
        key_id=f["key_id"],
        signature=f["signature"],
    )
    assert key.public.verifies(checkpoint)
    # One changed field and the signature no longer covers it.
    assert not key.public.verifies(dataclasses.replace(checkpoint, length=2))
