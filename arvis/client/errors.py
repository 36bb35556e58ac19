"""What the client raises: every problem answer as a typed exception carrying its ``code``.

The tree::

    ArvisClientError
    ├── TransportError             no HTTP answer (ConnectFailed: the request never left;
    │                              AnswerLost: it may have reached ARVIS)
    ├── UnexpectedAnswer           an answer that is not ARVIS's wire format
    ├── RetryExhausted             the retry budget ran out; ``last`` is the final error
    └── ArvisProblem               an RFC 9457 problem with a stable ``code``
        ├── Unauthenticated, ForbiddenRole, SelfApproval, NotFound, Conflict,
        │   AttemptInFlight, CausalIdConflict, ChainBroken, InternalError
        ├── InvalidRequest         ValidationFailed, PayloadInvalid, MalformedBody, …
        └── ServiceUnavailable     retryable: StoreUnavailable, ShuttingDown, RequestTimeout, …

A code this client does not know (from a newer server) still gets a class of its own,
made once per code under the family its status implies, so ``exc.code`` is always the
server's code and ``except ServiceUnavailable`` still catches an unknown 503.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from arvis.domain.errors import ArvisError

__all__ = [
    "AnswerLost",
    "ArvisClientError",
    "ArvisProblem",
    "AttemptInFlight",
    "AuditUnavailable",
    "BodyTooLarge",
    "CausalIdConflict",
    "ChainBroken",
    "Conflict",
    "ConnectFailed",
    "ForbiddenRole",
    "InternalError",
    "InvalidRequest",
    "MalformedBody",
    "NotFound",
    "PayloadInvalid",
    "RequestTimeout",
    "RetryExhausted",
    "SelfApproval",
    "SerializationConflict",
    "ServiceUnavailable",
    "ShuttingDown",
    "StoreUnavailable",
    "TransportError",
    "Unauthenticated",
    "UnexpectedAnswer",
    "UnsupportedMediaType",
    "ValidationFailed",
    "problem_error",
]


class ArvisClientError(ArvisError, code="client_error"):
    """Base of everything the ARVIS client raises."""

    retryable: ClassVar[bool] = False
    """Whether re-posting the identical request may get a different answer."""

    def __init_subclass__(cls, *, retryable: bool | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if retryable is not None:
            cls.retryable = retryable


class TransportError(ArvisClientError, code="transport_error"):
    """No HTTP answer came back. The httpx error is ``__cause__``."""


class ConnectFailed(TransportError, code="connect_failed", retryable=True):
    """The connection was never made: the request did not reach ARVIS.

    ``refused`` is True when the connection failed outright (refused: nothing listens
    there; or the host cannot be reached or resolved), False when it timed out or no
    pooled connection came free. A refused connection is raised at once unless the
    policy says ``RetryPolicy(retry_refused=True)``."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class AnswerLost(TransportError, code="answer_lost", retryable=True):
    """The request may have reached ARVIS, but its answer did not come back (a timeout, a
    reset connection). What happened is unknown here; re-posting the same syscall learns it."""


class UnexpectedAnswer(ArvisClientError, code="unexpected_answer"):
    """An HTTP answer that is not ARVIS's wire format (say, a proxy's HTML error page, or a
    body this client cannot read). 502, 503 and 504 from something in between are
    retryable."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason

    @property
    def gateway(self) -> bool:
        return self.status in (502, 503, 504)


class RetryExhausted(ArvisClientError, code="retry_exhausted"):
    """The retry budget ran out. ``last`` is the final error (also ``__cause__``).

    ``outcome_unknown`` is True when some attempt may have been admitted and its answer
    never arrived: ARVIS may have run it. Re-post the identical syscall later to learn
    what happened; never decide again under a new causal id."""

    def __init__(
        self, last: ArvisClientError, *, attempts: int, elapsed_s: float, outcome_unknown: bool
    ) -> None:
        unknown = "; the outcome is unknown, re-post the same call later" if outcome_unknown else ""
        super().__init__(
            f"gave up after {attempts} attempt(s) in {elapsed_s:.1f}s: {last.code}{unknown}"
        )
        self.last = last
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.outcome_unknown = outcome_unknown


class ArvisProblem(ArvisClientError, code="problem"):
    """An RFC 9457 problem answer. ``code`` is the stable code (docs/http.md); ``status``,
    ``title`` and ``detail`` come from the answer, ``body`` is the whole problem."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        detail = str(body.get("detail") or body.get("title") or self.code)
        super().__init__(f"{status} {self.code}: {detail}")
        self.status = status
        self.detail = detail
        self.title = str(body.get("title", ""))
        self.body = body


class Unauthenticated(ArvisProblem, code="unauthenticated"):
    """No usable API key: missing, malformed, unknown, wrong or revoked."""


class ForbiddenRole(ArvisProblem, code="forbidden_role"):
    """The key lacks the route's role."""


class SelfApproval(ArvisProblem, code="self_approval"):
    """An approver tried to approve their own request (four eyes)."""


class NotFound(ArvisProblem, code="not_found"):
    """No such run or confirmation in this key's tenant (another tenant's is 404 too)."""


class Conflict(ArvisProblem, code="conflict"):
    """The confirmation is not in a state that allows this (already decided, expired)."""


class AlreadyApproved(Conflict, code="already_approved"):
    """This principal has approved the confirmation already. Also the answer to an
    approval re-sent after its answer was lost: the first approval stands."""


class AttemptInFlight(ArvisProblem, code="attempt_in_flight", retryable=True):
    """An attempt of the same decision is running; its outcome is not known yet.
    Re-posting later gets its recorded result."""


class CausalIdConflict(ArvisProblem, code="causal_id_conflict"):
    """The causal id already names another decision of the run (another tool or payload).
    A corrected decision needs a new causal id."""


class ChainBroken(ArvisProblem, code="chain_broken"):
    """The run's journal does not verify; nothing was replayed. ``broken_at`` names the
    first position that breaks."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        broken_at = body.get("broken_at")
        self.broken_at: int | None = broken_at if isinstance(broken_at, int) else None


class InternalError(ArvisProblem, code="internal_error"):
    """A bug in ARVIS; the answer never carries the cause."""


class InvalidRequest(ArvisProblem, code="invalid_request"):
    """The request itself is wrong; the same request will be refused again."""


class ValidationFailed(InvalidRequest, code="validation_error"):
    """The body or a parameter does not match the schema; ``errors`` says where."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        errors = body.get("errors")
        self.errors: list[dict[str, Any]] = (
            [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []
        )


class PayloadInvalid(InvalidRequest, code="payload_invalid"):
    """The payload is not plain JSON (NaN, too deep, too large)."""


class MalformedBody(InvalidRequest, code="malformed_body"):
    """The body is not JSON."""


class BodyTooLarge(InvalidRequest, code="body_too_large"):
    """The body is larger than the server takes."""


class UnsupportedMediaType(InvalidRequest, code="unsupported_media_type"):
    """The body is not ``application/json``."""


class ServiceUnavailable(ArvisProblem, code="service_unavailable", retryable=True):
    """ARVIS cannot answer right now; nothing ran (except after ``request_timeout``, where
    an admitted call runs on). Re-posting the identical request is safe."""


class StoreUnavailable(ServiceUnavailable, code="store_unavailable"):
    """The server's database cannot be reached right now."""


class ShuttingDown(ServiceUnavailable, code="shutting_down"):
    """This instance is stopping; another one (or this one, restarted) will answer."""


class RequestTimeout(ServiceUnavailable, code="request_timeout"):
    """No answer within the server's deadline. The call is not cancelled: an admitted
    syscall runs on and is journaled; re-post it to learn its outcome."""


class AuditUnavailable(ServiceUnavailable, code="audit_unavailable"):
    """The server's audit sink failed; nothing ran."""


class SerializationConflict(ServiceUnavailable, code="serialization_conflict"):
    """Two writes collided on the server; nothing was recorded."""


_KNOWN: dict[str, type[ArvisProblem]] = {
    cls.code: cls
    for cls in (
        Unauthenticated,
        ForbiddenRole,
        SelfApproval,
        NotFound,
        Conflict,
        AlreadyApproved,
        AttemptInFlight,
        CausalIdConflict,
        ChainBroken,
        InternalError,
        ValidationFailed,
        PayloadInvalid,
        MalformedBody,
        BodyTooLarge,
        UnsupportedMediaType,
        StoreUnavailable,
        ShuttingDown,
        RequestTimeout,
        AuditUnavailable,
        SerializationConflict,
    )
}


# Codes are snake case (docs/http.md); anything else gets its family's class, so a
# confused answer cannot mint classes without bound.
_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _family(status: int) -> type[ArvisProblem]:
    if status == 503:
        return ServiceUnavailable
    if status in (400, 413, 415, 422):
        return InvalidRequest
    return ArvisProblem


def problem_class(code: str, status: int) -> type[ArvisProblem]:
    """The exception class for a problem ``code``: a known one, or one made (once) for a
    code this client does not know, under the family its ``status`` implies."""
    known = _KNOWN.get(code)
    if known is not None:
        return known
    family = _family(status)
    if not _CODE.fullmatch(code):
        return family
    name = "".join(part.capitalize() for part in code.split("_"))
    made = type(name, (family,), {"code": code, "__doc__": f"Problem ``{code}``."})
    _KNOWN[code] = made
    return made


def problem_error(status: int, body: dict[str, Any]) -> ArvisProblem:
    """The typed exception for one problem answer."""
    code = body.get("code")
    return problem_class(code if isinstance(code, str) else "", status)(status, body)
