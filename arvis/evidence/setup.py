"""What ``[audit]`` and ``ARVIS_SIGNING_KEY_FILE`` ask of the evidence, loaded once.

Checkpoints are on when the process has a signing key; without one nothing is
noted or signed (no cost). The public key auditors trust for ``verify`` is
``[audit.checkpoints] public_key_file`` when set, else the signing key's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.sections import parse_section
from arvis.evidence.keys import PublicKey, SigningKey
from arvis.evidence.witness import Witness, load_witness, parse_witness_config
from arvis.lifecycle.evidence.checkpoints import CheckpointPolicy


class CheckpointsConfig(BaseModel):
    """``[audit.checkpoints]``: how often a run's head is signed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    every: int = Field(default=100, ge=0, le=1_000_000)
    """Sign when an entry's position is a multiple of this; 0: never on count."""
    idle_s: float = Field(default=30.0, ge=0, le=86_400)
    """Sign a run quiet this long whose head is unsigned; 0: never on idleness."""
    public_key_file: Path | None = None
    """The public key ``GET /v1/runs/{id}/verify`` checks checkpoints with; unset:
    the signing key's."""


def parse_checkpoints_config(raw: dict[str, Any] | None) -> CheckpointsConfig:
    return parse_section(CheckpointsConfig, raw or {}, "[audit.checkpoints]")


@dataclass
class Evidence:
    """The deployment's signing key, trusted public key, witness and checkpoint policy."""

    signing_key: SigningKey | None = None
    public_key: PublicKey | None = None
    witness: Witness | None = None
    policy: CheckpointPolicy = field(default_factory=CheckpointPolicy)


def load_evidence(
    signing_key_file: Path | None,
    checkpoints: dict[str, Any] | None,
    witness: dict[str, Any] | None,
    base_dir: Path,
    http: httpx.AsyncClient | None = None,
) -> Evidence:
    """Load and check everything; a bad key file or section raises ConfigurationError.
    An HTTP witness posts through ``http`` (the kernel's client, closed with it)."""
    config = parse_checkpoints_config(checkpoints)
    signing = None if signing_key_file is None else SigningKey.load(signing_key_file)
    public: PublicKey | None = None
    if config.public_key_file is not None:
        path = config.public_key_file
        public = PublicKey.load(path if path.is_absolute() else base_dir / path)
    elif signing is not None:
        public = signing.public
    return Evidence(
        signing_key=signing,
        public_key=public,
        witness=load_witness(parse_witness_config(witness), base_dir, http),
        policy=CheckpointPolicy(every=config.every, idle_s=config.idle_s),
    )
