"""The client reads what the server writes: both sides' models are the one definition."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from arvis.api import schemas
from arvis.client import models
from arvis.domain.boundary import EffectBoundary


@pytest.mark.parametrize(
    ("server", "client"),
    [
        (schemas.ToolOut, models.ToolInfo),
        (schemas.JournalEntryOut, models.JournalEntry),
        (schemas.VerifyOut, models.Verification),
        (schemas.ConfirmationOut, models.Confirmation),
    ],
)
def test_every_field_the_client_reads_is_one_the_server_writes(
    server: type[BaseModel], client: type[BaseModel]
) -> None:
    assert set(client.model_fields) <= set(server.model_fields)
    for name, field in client.model_fields.items():
        assert field.annotation == server.model_fields[name].annotation, name


def test_the_server_answers_only_its_fields_the_client_tolerates_more() -> None:
    assert schemas.VerifyOut.model_config.get("extra") != "allow"
    read = models.Verification.model_validate(
        {"ok": True, "entries": 1, "broken_at": None, "newer": 1}
    )
    assert read.model_extra == {"newer": 1}


def test_the_client_boundary_is_the_domain_boundary() -> None:
    assert models.Boundary is EffectBoundary
    assert [b for b in EffectBoundary if b.uncertain] == [
        EffectBoundary.EFFECT_STARTED,
        EffectBoundary.EFFECT_STATE_UNKNOWN,
    ]
