"""One ``arvis.toml`` section validated against its model, the same way everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from arvis.domain.errors import ConfigurationError

M = TypeVar("M", bound=BaseModel)


def parse_section(model: type[M], raw: Mapping[str, Any], name: str) -> M:
    """``raw`` as ``model``, or :class:`ConfigurationError` naming the section
    (``name``, e.g. ``"[audit]"``) and the first field that is wrong, in one line."""
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigurationError(f"{name} {where}: {first['msg']}") from None


def environment_secret(
    environ: Mapping[str, str], variable: str, where: str, *, min_chars: int = 16
) -> str:
    """The secret ``arvis.toml`` names by its environment ``variable``, or
    :class:`ConfigurationError` naming ``where`` and the variable — never a value."""
    secret = environ.get(variable, "")
    if len(secret) < min_chars:
        raise ConfigurationError(
            f"{where}: the environment variable {variable} must hold a secret of at least "
            f"{min_chars} characters"
        )
    return secret
