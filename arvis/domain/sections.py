"""One ``arvis.toml`` section validated against its model, the same way everywhere, and
how a pydantic error reads in one line."""

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
        where, message = first_error(exc)
        raise ConfigurationError(f"{name} {where}: {message}") from None


# What pydantic puts before the text of an exception a validator raised: the text is
# ours and says what is wrong; the prefix only says it came from a validator.
_VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")


def error_message(message: str) -> str:
    """A pydantic error's ``msg`` without the prefix of a validator's own message."""
    for prefix in _VALIDATOR_PREFIXES:
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def first_error(exc: ValidationError) -> tuple[str, str]:
    """Where the first error is (``a.b.0``) and what it says, for a one-line message."""
    first = exc.errors()[0]
    return ".".join(str(part) for part in first["loc"]), error_message(first["msg"])


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
