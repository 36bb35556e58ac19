"""Witnesses: a copy of every intent, journal entry and checkpoint outside the database.

A witness is written before the admission statement commits (the intent's record),
after the admission statement answered that it did not admit an intent it was told
of (an ``intent_void`` record), after each journal statement committed (the entry's
position and hash, batched by :class:`arvis.lifecycle.evidence.witnessing.WitnessFeed`) and
after each checkpoint is stored. An intent the witness cannot take fails the
admission closed (``503 audit_unavailable``: no tool body runs); an entry it cannot
take is retried in the background (the effect already happened, docs/journal-format.md).

- :class:`FileWitness` appends JSON lines to a file opened ``O_APPEND`` and fsyncs
  them before it returns (a batch of entries: one write, one fsync); it takes an
  exclusive ``flock`` around the write, so several processes may share one file. It
  never truncates or rewrites: when the file passes ``max_bytes`` it is renamed to
  the next free ``<path>.<n>`` (``.1`` is the oldest) and a new file is begun.
- :class:`HttpWitness` POSTs each record as JSON; a timeout, a transport error or
  a status other than 2xx is a failure.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import mmap
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.canonical import canonical_bytes
from arvis.domain.checkpoints import Checkpoint
from arvis.domain.errors import ConfigurationError
from arvis.domain.intent import AuditReceipt, Intent
from arvis.domain.sections import parse_section
from arvis.lifecycle.journal import recorded_text
from arvis.lifecycle.records import JournalEntry

WITNESS_FORMAT = "arvis-witness-v1"


class WitnessConfig(BaseModel):
    """``[audit.witness]``: where receipts and checkpoints are also written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["file", "http"]
    path: Path | None = None
    """``kind = "file"``: the JSON-lines file (relative: to ``arvis.toml``'s directory)."""
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=4096)
    """``kind = "file"``: rotate when the file has grown past this."""
    url: str | None = None
    """``kind = "http"``: where each record is POSTed."""
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    """``kind = "http"``: one POST's deadline."""


def _record(
    record_type: str, tenant_id: str, run_id: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """One witness record of ``record_type`` about a run (canonical JSON: key order is moot)."""
    return {
        "format": WITNESS_FORMAT,
        "type": record_type,
        "tenant_id": tenant_id,
        "run_id": run_id,
        **fields,
    }


def intent_record(intent: Intent, commitment: str, receipt: AuditReceipt | None) -> dict[str, Any]:
    """What the witness keeps of an intent about to be admitted."""
    context = intent.context
    return _record(
        "intent",
        context.tenant_id,
        context.run_id,
        {
            "causal_id": context.causal_id,
            "intent_id": intent.intent_id,
            "idempotency_key": intent.idempotency_key,
            "attempt": intent.attempt,
            "intent_commitment": commitment,
            "receipt_position": None if receipt is None else receipt.position,
            "admitted_at": recorded_text(intent.admitted_at),
        },
    )


def void_record(intent: Intent, status: str) -> dict[str, Any]:
    """The admission statement did not admit the intent last witnessed under this id."""
    context = intent.context
    fields = {"intent_id": intent.intent_id, "status": status}
    return _record("intent_void", context.tenant_id, context.run_id, fields)


def entry_record(entry: JournalEntry) -> dict[str, Any]:
    """What the witness keeps of an entry just appended: enough to tell it was deleted,
    moved or rewritten."""
    return _record(
        "entry",
        entry.tenant_id,
        entry.run_id,
        {
            "position": entry.position,
            "prev_hash": entry.prev_hash,
            "entry_hash": entry.entry_hash,
            "kind": entry.kind,
            "causal_id": entry.causal_id,
            "intent_id": entry.intent_id,
            "recorded_at": recorded_text(entry.recorded_at),
        },
    )


def checkpoint_record(checkpoint: Checkpoint) -> dict[str, Any]:
    return {"format": WITNESS_FORMAT, "type": "checkpoint", **checkpoint.as_record()}


def _line(record: Mapping[str, Any]) -> bytes:
    return canonical_bytes(dict(record)) + b"\n"


class FileWitness:
    """An append-only JSON-lines witness, fsynced before it answers."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        path.parent.mkdir(parents=True, exist_ok=True)

    async def witness_intent(
        self, intent: Intent, commitment: str, receipt: AuditReceipt | None
    ) -> None:
        await asyncio.to_thread(self._append, _line(intent_record(intent, commitment, receipt)))

    async def witness_void(self, intent: Intent, status: str) -> None:
        await asyncio.to_thread(self._append, _line(void_record(intent, status)))

    async def witness_entries(self, entries: Sequence[JournalEntry]) -> None:
        """One write and one fsync for the whole batch."""
        lines = b"".join(_line(entry_record(entry)) for entry in entries)
        await asyncio.to_thread(self._append, lines)

    async def witness_checkpoint(self, checkpoint: Checkpoint) -> None:
        await asyncio.to_thread(self._append, _line(checkpoint_record(checkpoint)))

    async def records(self, tenant_id: str, run_id: str) -> list[dict[str, Any]]:
        """The run's records in this file and its rotations, oldest first (read off
        the event loop)."""
        try:
            return await asyncio.to_thread(run_records, self.path, tenant_id, run_id)
        except FileNotFoundError:  # rotated between listing the files and opening one
            return await asyncio.to_thread(run_records, self.path, tenant_id, run_id)

    def _append(self, line: bytes) -> None:
        while True:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                # Another process may have rotated the file while this one waited.
                if os.fstat(fd).st_ino != _inode(self.path):
                    continue
                if os.fstat(fd).st_size >= self.max_bytes:
                    os.rename(self.path, self._next_rotation())
                    continue
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError("the witness file took a partial line")
                os.fsync(fd)
                return
            finally:
                os.close(fd)

    def _next_rotation(self) -> Path:
        n = 1
        while self.path.with_name(f"{self.path.name}.{n}").exists():
            n += 1
        return self.path.with_name(f"{self.path.name}.{n}")


def _inode(path: Path) -> int:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return -1


class HttpWitness:
    """POSTs each record; anything but a 2xx in time is a failure."""

    def __init__(self, url: str, timeout_s: float, client: httpx.AsyncClient | None = None):
        self.url = url
        self.timeout_s = timeout_s
        self._client = client or httpx.AsyncClient()

    async def witness_intent(
        self, intent: Intent, commitment: str, receipt: AuditReceipt | None
    ) -> None:
        await self._post(intent_record(intent, commitment, receipt))

    async def witness_void(self, intent: Intent, status: str) -> None:
        await self._post(void_record(intent, status))

    async def witness_entries(self, entries: Sequence[JournalEntry]) -> None:
        """One POST per entry, in order (each record is one JSON object, as ever)."""
        for entry in entries:
            await self._post(entry_record(entry))

    async def witness_checkpoint(self, checkpoint: Checkpoint) -> None:
        await self._post(checkpoint_record(checkpoint))

    async def _post(self, record: dict[str, Any]) -> None:
        response = await self._client.post(
            self.url,
            content=canonical_bytes(record),
            headers={"content-type": "application/json"},
            timeout=self.timeout_s,
        )
        if not 200 <= response.status_code < 300:
            raise OSError(f"the witness answered {response.status_code}")


Witness = FileWitness | HttpWitness


def parse_witness_config(raw: Mapping[str, Any] | None) -> WitnessConfig | None:
    if raw is None:
        return None
    config = parse_section(WitnessConfig, raw, "[audit.witness]")
    if config.kind == "file" and config.path is None:
        raise ConfigurationError('[audit.witness] kind = "file" needs a path')
    if config.kind == "http" and not (config.url or "").startswith(("http://", "https://")):
        raise ConfigurationError('[audit.witness] kind = "http" needs an http(s) url')
    return config


def load_witness(
    config: WitnessConfig | None, base_dir: Path, http: httpx.AsyncClient | None = None
) -> Witness | None:
    """The configured witness, or None."""
    if config is None:
        return None
    if config.kind == "file":
        assert config.path is not None
        path = config.path if config.path.is_absolute() else base_dir / config.path
        return FileWitness(path, config.max_bytes)
    assert config.url is not None
    return HttpWitness(config.url, config.timeout_s, http)


def witness_files(path: Path) -> list[Path]:
    """The file witness at ``path`` and its rotations, oldest first."""
    rotated = []
    n = 1
    while (candidate := path.with_name(f"{path.name}.{n}")).exists():
        rotated.append(candidate)
        n += 1
    return [*rotated, path] if path.exists() else rotated


def read_witness(path: Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Every record of a file witness and its rotations: (file, line number, record).

    A line that is not a JSON object raises ``ValueError`` naming file and line.
    """
    for file in witness_files(path):
        with file.open("rb") as lines:
            for number, line in enumerate(lines, start=1):
                try:
                    record = json.loads(line)
                except ValueError:
                    raise ValueError(f"{file}:{number} is not a JSON line") from None
                if not isinstance(record, dict):
                    raise ValueError(f"{file}:{number} is not a JSON object")
                yield str(file), number, record


def run_records(path: Path, tenant_id: str, run_id: str) -> list[dict[str, Any]]:
    """The records of one run in a file witness and its rotations, oldest first.

    Lines are canonical JSON, so a run's records hold ``"run_id":"<id>"`` byte for
    byte: each file is searched for that text first and only the lines holding it are
    parsed (a witness of many runs is read at the speed of a byte search).
    """
    needle = b'"run_id":' + json.dumps(run_id).encode()
    found: list[dict[str, Any]] = []
    for file in witness_files(path):
        with file.open("rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                continue
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                found += _matching(data, needle, file, tenant_id, run_id)
    return found


def _matching(
    data: mmap.mmap, needle: bytes, file: Path, tenant_id: str, run_id: str
) -> Iterator[dict[str, Any]]:
    at = data.find(needle)
    while at != -1:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end == -1 else end
        try:
            record = json.loads(data[start:end])
        except ValueError:
            raise ValueError(f"{file}: the line at byte {start} is not a JSON line") from None
        if (
            isinstance(record, dict)
            and record.get("tenant_id") == tenant_id
            and record.get("run_id") == run_id
        ):
            yield record
        at = data.find(needle, end)
