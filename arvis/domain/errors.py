"""The ARVIS error tree.

Every error carries a class-level, stable ``code``. HTTP status codes live in one
table in ``arvis.api``, never on the exceptions.

A class is declarative: its ``code``, and, when it carries fields, the fields as
annotations under :func:`fields` with a ``template`` its message is filled in from.
The one constructor shape (fields in, message out) lives here, not in each class::

    @fields
    class UnknownTool(ArvisError, code="tool_not_declared"):
        template = "tool {tool!r} is not declared in this tool plan"
        tool: str
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar, dataclass_transform

_E = TypeVar("_E", bound=type["ArvisError"])


@dataclass_transform(eq_default=False)
def fields(cls: _E) -> _E:
    """Make an error class's annotated fields its constructor, in their order."""
    dataclasses.dataclass(eq=False, repr=False)(cls)  # in place: no slots, same class
    return cls


class ArvisError(Exception):
    """Base of every error ARVIS raises on purpose."""

    code: ClassVar[str] = "arvis_error"
    template: ClassVar[str] = ""
    """The message of a :func:`fields` class, ``str.format``-ed with its fields."""

    def __init_subclass__(cls, *, code: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __post_init__(self) -> None:
        self.message = self.describe(vars(self))
        self.args = (self.message,)

    def describe(self, values: dict[str, Any]) -> str:
        """The message of a :func:`fields` class; override where it is computed."""
        return self.template.format_map(values)


class ConfigurationError(ArvisError, code="configuration_error"):
    """A setting, a declared tool or a policy is unusable; start-up stops."""


@fields
class DefinitionError(ArvisError, code="definition_invalid"):
    """A tool definition contradicts a rule of DESIGN §3."""

    template = "tool {tool!r}: {rule}"
    tool: str
    rule: str


@fields
class PayloadError(ArvisError, code="payload_invalid"):
    """A payload is not plain JSON, or is too large or too deep."""

    template = "payload {path}: {reason}"
    reason: str
    path: str = "$"


@fields
class ForbiddenRoute(ArvisError, code="forbidden_route"):
    """A public call that would skip the governed lifecycle (DESIGN §2)."""

    template = "{route} is not a route to a tool body; submit a tool.execute syscall instead"
    route: str


# Storage failures, as the lifecycle sees them; arvis.store maps SQLSTATEs to these.


class StoreError(ArvisError, code="store_error"):
    """The store failed; a subclass says how."""


class StoreUnavailable(StoreError, code="store_unavailable"):
    """PostgreSQL cannot be reached or refuses connections right now."""


class SerializationConflict(StoreError, code="serialization_conflict"):
    """Two transactions collided; the one refused may be repeated."""


@fields
class IntegrityConflict(StoreError, code="integrity_conflict"):
    """A constraint refused the write; ``constraint`` names which."""

    template = "{message}"
    message: str
    constraint: str | None


class SchemaNotReady(StoreError, code="schema_not_ready"):
    """The database is not at the revision this code expects."""
