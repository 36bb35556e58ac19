"""Signed checkpoints of a run's chain head (docs/journal-format.md).

A checkpoint says: at ``signed_at``, run ``run_id`` of tenant ``tenant_id`` had
``length`` entries and its last entry's hash was ``head_hash``. It is signed with
an Ed25519 key the database never holds, so whoever can write the database can
rewrite a run and recompute every hash, but cannot sign a checkpoint for the
rewritten chain; the old checkpoints no longer match it.

The signed bytes (version 1) are the UTF-8 text of ``arvis-checkpoint-v1``, the
tenant, the run, the length in decimal, the head hash and the UTC time (ISO 8601,
microseconds), joined by newlines. No field can hold a newline, so the preimage
is unambiguous. The key id is the SHA-256 (hex) of the raw 32-byte public key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

CHECKPOINT_VERSION = "arvis-checkpoint-v1"


def signed_text(moment: datetime) -> str:
    """A checkpoint's time as it is signed: UTC, microseconds, ISO 8601."""
    if moment.tzinfo is None:
        raise ValueError("a checkpoint time must be timezone-aware")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def checkpoint_preimage(
    *, tenant_id: str, run_id: str, length: int, head_hash: str, signed_at: str
) -> bytes:
    """The exact bytes a checkpoint's signature covers."""
    return "\n".join(
        (CHECKPOINT_VERSION, tenant_id, run_id, str(length), head_hash, signed_at)
    ).encode()


def public_key_id(raw_public_key: bytes) -> str:
    """The key id recorded with every checkpoint: SHA-256 of the raw public key, hex."""
    return hashlib.sha256(raw_public_key).hexdigest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One signed chain head."""

    tenant_id: str
    run_id: str
    length: int
    head_hash: str
    signed_at: datetime
    key_id: str
    signature: str
    """Base64 (standard alphabet, padded) of the 64-byte Ed25519 signature."""

    @property
    def preimage(self) -> bytes:
        return checkpoint_preimage(
            tenant_id=self.tenant_id,
            run_id=self.run_id,
            length=self.length,
            head_hash=self.head_hash,
            signed_at=signed_text(self.signed_at),
        )

    def as_record(self) -> dict[str, object]:
        """The checkpoint as JSON: what the API, the witness and a bundle carry."""
        return {
            "tenant_id": self.tenant_id,
            "run_id": self.run_id,
            "length": self.length,
            "head_hash": self.head_hash,
            "signed_at": signed_text(self.signed_at),
            "key_id": self.key_id,
            "signature": self.signature,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> Checkpoint:
        """Read back :meth:`as_record`; ``ValueError`` for anything else."""
        try:
            length = record["length"]
            if not isinstance(length, int) or isinstance(length, bool):
                raise ValueError("length is not an integer")
            fields = {
                name: record[name]
                for name in ("tenant_id", "run_id", "head_hash", "signed_at", "key_id", "signature")
            }
        except KeyError as exc:
            raise ValueError(f"a checkpoint lacks {exc.args[0]!r}") from None
        if not all(isinstance(value, str) for value in fields.values()):
            raise ValueError("a checkpoint field is not text")
        signed_at = datetime.fromisoformat(str(fields["signed_at"]))
        if signed_at.tzinfo is None:
            raise ValueError("a checkpoint time lacks its offset")
        return cls(
            tenant_id=str(fields["tenant_id"]),
            run_id=str(fields["run_id"]),
            length=length,
            head_hash=str(fields["head_hash"]),
            signed_at=signed_at,
            key_id=str(fields["key_id"]),
            signature=str(fields["signature"]),
        )


SignatureCheck = Callable[[Checkpoint], bool]
"""True when a checkpoint's signature is good under the key the auditor trusts."""


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    ok: bool
    checked: int
    problem: str | None = None
    rewritten_before: int | None = None
    """The run was rewritten somewhere before this position (a checkpoint disagrees)."""


def check_checkpoints(
    checkpoints: Sequence[Checkpoint],
    *,
    tenant_id: str,
    run_id: str,
    hashes: Mapping[int, str],
    length: int,
    key_id: str,
    signature_ok: SignatureCheck,
) -> CheckpointReport:
    """Check every checkpoint of a run against the chain as read.

    ``hashes`` maps each checkpointed position to the entry hash the (already
    verified) chain has there; ``length`` is how many entries the chain has. A
    checkpoint whose signature fails, or that was signed by another key, is a
    problem; one whose head the chain does not have means the run was rewritten
    before the position after it — even when every hash of the chain links.
    """
    checked = 0
    for checkpoint in sorted(checkpoints, key=lambda c: c.length):
        at = signed_text(checkpoint.signed_at)
        if checkpoint.tenant_id != tenant_id or checkpoint.run_id != run_id:
            return CheckpointReport(False, checked, f"checkpoint at {at} names another run")
        if checkpoint.key_id != key_id:
            return CheckpointReport(
                False,
                checked,
                f"checkpoint of {checkpoint.length} entries at {at} was signed by key"
                f" {checkpoint.key_id[:16]}, not by the key given ({key_id[:16]})",
            )
        if not signature_ok(checkpoint):
            return CheckpointReport(
                False,
                checked,
                f"checkpoint of {checkpoint.length} entries at {at}: signature does not verify",
            )
        if checkpoint.length > length or hashes.get(checkpoint.length) != checkpoint.head_hash:
            before = checkpoint.length + 1
            return CheckpointReport(
                False,
                checked,
                f"rewritten before position {before} (checkpoint of {checkpoint.length}"
                f" entries at {at})",
                rewritten_before=before,
            )
        checked += 1
    return CheckpointReport(True, checked)
