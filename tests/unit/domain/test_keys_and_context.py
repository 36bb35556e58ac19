"""The idempotency key, the sealed context and effect boundaries (DESIGN §1)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from arvis.domain.boundary import EffectBoundary
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.ids import CausalId, RunId, TenantId
from tests.support.fakes import context

T, R, C = TenantId("t"), RunId("r"), CausalId("c")


def test_the_idempotency_key_is_deterministic() -> None:
    assert derive_idempotency_key(T, R, C, "echo", "d" * 64) == derive_idempotency_key(
        T, R, C, "echo", "d" * 64
    )
    assert len(derive_idempotency_key(T, R, C, "echo", "d" * 64)) == 64


@pytest.mark.parametrize("position", range(5))
def test_every_field_of_the_idempotency_key_changes_it(position: int) -> None:
    fields = ["t", "r", "c", "echo", "d" * 64]
    changed = list(fields)
    changed[position] += "x"
    assert derive_idempotency_key(*fields) != derive_idempotency_key(*changed)  # type: ignore[arg-type]


def test_idempotency_key_fields_cannot_bleed_into_each_other() -> None:
    assert derive_idempotency_key(TenantId("a:b"), RunId("c"), C, "echo", "d") != (
        derive_idempotency_key(TenantId("a"), RunId("b:c"), C, "echo", "d")
    )


def test_the_effect_context_is_sealed() -> None:
    sealed = context()
    with pytest.raises(ValidationError):
        sealed.tenant_id = TenantId("other")  # type: ignore[misc]
    with pytest.raises(ValidationError):
        AuthorizedEffectContext(**sealed.model_dump(), session="leak")


def test_there_are_exactly_the_six_effect_boundaries() -> None:
    assert [b.value for b in EffectBoundary] == [
        "PRE_EFFECT_REFUSAL",
        "EFFECT_NOT_STARTED",
        "EFFECT_STARTED",
        "EFFECT_COMPLETED",
        "EFFECT_FAILED",
        "EFFECT_STATE_UNKNOWN",
    ]
