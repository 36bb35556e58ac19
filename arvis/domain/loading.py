"""Loading one object named ``package.module:attribute`` — exactly that, nothing scanned.

``arvis.toml`` names the audit sink and the tool factories this way; both load through
:func:`load_attribute`, so a bad name stops start-up with the same one line.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from arvis.domain.errors import ConfigurationError

ATTRIBUTE_SPEC = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$"
)
"""``package.module:attribute``, the attribute possibly dotted (``module:Class.make``)."""


def is_attribute_spec(spec: str) -> bool:
    return ATTRIBUTE_SPEC.fullmatch(spec) is not None


def load_attribute(spec: str, where: str, *, callable_only: bool = False) -> Any:
    """Import the module of ``spec`` and walk to its attribute. ``where`` opens every
    message (``"[audit] 'm:x'"``); a failed import, or no such attribute (no callable
    one, with ``callable_only``), raises :class:`ConfigurationError`."""
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"{where}: cannot import: {exc}") from exc
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if target is None or (callable_only and not callable(target)):
        kind = "callable " if callable_only else ""
        raise ConfigurationError(f"{where}: no {kind}{attribute!r} there")
    return target
