"""Signing key files and the file witness, on the local disk."""

from __future__ import annotations

import asyncio
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from arvis.domain.checkpoints import Checkpoint
from arvis.evidence.keys import PublicKey, SigningKey, SigningKeyError
from arvis.evidence.witness import FileWitness, read_witness, witness_files


def test_a_created_signing_key_is_owner_only_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "signing.pem"
    key = SigningKey.create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert SigningKey.load(path).key_id == key.key_id
    assert PublicKey.from_pem(key.public.pem.encode()).key_id == key.key_id
    first = path.read_bytes()
    with pytest.raises(SigningKeyError, match="never overwritten"):
        SigningKey.create(path)
    assert path.read_bytes() == first
    assert "PRIVATE" not in repr(key)
    assert key.key_id[:16] in repr(key)


def test_a_public_key_is_not_a_signing_key(tmp_path: Path) -> None:
    path = tmp_path / "public.pem"
    path.write_text(SigningKey.create(tmp_path / "k.pem").public.pem)
    path.chmod(0o600)
    with pytest.raises(SigningKeyError, match="not an unencrypted PEM key"):
        SigningKey.load(path)


def _checkpoint(length: int) -> Checkpoint:
    return Checkpoint("acme", "run-1", length, "a" * 64, datetime.now(UTC), "k" * 64, "s" * 88)


def test_the_file_witness_rotates_by_size_and_keeps_every_line_in_order(tmp_path: Path) -> None:
    path = tmp_path / "witness.jsonl"
    witness = FileWitness(path, max_bytes=4096)

    async def write() -> None:
        for n in range(1, 61):
            await witness.witness_checkpoint(_checkpoint(n))

    asyncio.run(write())
    files = witness_files(path)
    assert len(files) > 1
    assert files[-1] == path
    assert all(f.stat().st_size < 4096 + 400 for f in files)
    lengths = [record["length"] for _, _, record in read_witness(path)]
    assert lengths == list(range(1, 61))


@pytest.mark.parametrize(
    ("status", "fails"), [(200, False), (204, False), (500, True), (404, True)]
)
def test_the_http_witness_posts_each_record_and_fails_on_anything_but_2xx(
    status: int, fails: bool
) -> None:
    import httpx

    from arvis.evidence.witness import HttpWitness

    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(status)

    async def post() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            await HttpWitness("https://witness.test/", 1.0, client).witness_checkpoint(
                _checkpoint(3)
            )

    if fails:
        with pytest.raises(OSError, match=str(status)):
            asyncio.run(post())
    else:
        asyncio.run(post())
    assert b'"type":"checkpoint"' in seen[0]
