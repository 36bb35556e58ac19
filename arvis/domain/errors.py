"""The ARVIS error tree.

Every error carries a class-level, stable ``code``. HTTP status codes live in one
table in ``arvis.api``, never on the exceptions.
"""

from __future__ import annotations

from typing import ClassVar


class ArvisError(Exception):
    """Base of every error ARVIS raises on purpose."""

    code: ClassVar[str] = "arvis_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(ArvisError):
    """A setting, a declared tool or a policy is unusable; start-up stops."""

    code = "configuration_error"


class DefinitionError(ArvisError):
    """A tool definition contradicts a rule of DESIGN §3."""

    code = "definition_invalid"

    def __init__(self, tool: str, rule: str) -> None:
        super().__init__(f"tool {tool!r}: {rule}")
        self.tool = tool
        self.rule = rule


class PayloadError(ArvisError):
    """A payload is not plain JSON, or is too large or too deep."""

    code = "payload_invalid"

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(f"payload {path}: {reason}")
        self.reason = reason
        self.path = path


class ForbiddenRoute(ArvisError):
    """A public call that would skip the governed lifecycle (DESIGN §2)."""

    code = "forbidden_route"

    def __init__(self, route: str) -> None:
        super().__init__(
            f"{route} is not a route to a tool body; submit a tool.execute syscall instead"
        )
        self.route = route


# Storage failures, as the lifecycle sees them; arvis.store maps SQLSTATEs to these.


class StoreError(ArvisError):
    code = "store_error"


class StoreUnavailable(StoreError):
    """PostgreSQL cannot be reached or refuses connections right now."""

    code = "store_unavailable"


class SerializationConflict(StoreError):
    code = "serialization_conflict"


class IntegrityConflict(StoreError):
    """A constraint refused the write; ``constraint`` names which."""

    code = "integrity_conflict"

    def __init__(self, message: str, constraint: str | None) -> None:
        super().__init__(message)
        self.constraint = constraint


class SchemaNotReady(StoreError):
    """The database is not at the revision this code expects."""

    code = "schema_not_ready"
