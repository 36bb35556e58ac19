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


class ArvisClientError(ArvisError):
    """Base of everything the ARVIS client raises."""

    code = "client_error"
    retryable: ClassVar[bool] = False
    """Whether re-posting the identical request may get a different answer."""


class TransportError(ArvisClientError):
    """No HTTP answer came back. The httpx error is ``__cause__``."""

    code = "transport_error"


class ConnectFailed(TransportError):
    """The connection was never made: the request did not reach ARVIS."""

    code = "connect_failed"
    retryable = True


class AnswerLost(TransportError):
    """The request may have reached ARVIS, but its answer did not come back (a timeout, a
    reset connection). What happened is unknown here; re-posting the same syscall learns it."""

    code = "answer_lost"
    retryable = True


class UnexpectedAnswer(ArvisClientError):
    """An HTTP answer that is not ARVIS's wire format (say, a proxy's HTML error page, or a
    body this client cannot read). 502, 503 and 504 from something in between are
    retryable."""

    code = "unexpected_answer"

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.reason = reason

    @property
    def gateway(self) -> bool:
        return self.status in (502, 503, 504)


class RetryExhausted(ArvisClientError):
    """The retry budget ran out. ``last`` is the final error (also ``__cause__``).

    ``outcome_unknown`` is True when some attempt may have been admitted and its answer
    never arrived: ARVIS may have run it. Re-post the identical syscall later to learn
    what happened; never decide again under a new causal id."""

    code = "retry_exhausted"

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


class ArvisProblem(ArvisClientError):
    """An RFC 9457 problem answer. ``code`` is the stable code (docs/http.md); ``status``,
    ``title`` and ``detail`` come from the answer, ``body`` is the whole problem."""

    code = "problem"

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        detail = str(body.get("detail") or body.get("title") or self.code)
        super().__init__(f"{status} {self.code}: {detail}")
        self.status = status
        self.detail = detail
        self.title = str(body.get("title", ""))
        self.body = body


class Unauthenticated(ArvisProblem):
    """No usable API key: missing, malformed, unknown, wrong or revoked."""

    code = "unauthenticated"


class ForbiddenRole(ArvisProblem):
    """The key lacks the route's role."""

    code = "forbidden_role"


class SelfApproval(ArvisProblem):
    """An approver tried to approve their own request (four eyes)."""

    code = "self_approval"


class NotFound(ArvisProblem):
    """No such run or confirmation in this key's tenant (another tenant's is 404 too)."""

    code = "not_found"


class Conflict(ArvisProblem):
    """The confirmation is not in a state that allows this (already decided, expired)."""

    code = "conflict"


class AlreadyApproved(Conflict):
    """This principal has approved the confirmation already. Also the answer to an
    approval re-sent after its answer was lost: the first approval stands."""

    code = "already_approved"


class AttemptInFlight(ArvisProblem):
    """An attempt of the same decision is running; its outcome is not known yet.
    Re-posting later gets its recorded result."""

    code = "attempt_in_flight"
    retryable = True


class CausalIdConflict(ArvisProblem):
    """The causal id already names another decision of the run (another tool or payload).
    A corrected decision needs a new causal id."""

    code = "causal_id_conflict"


class ChainBroken(ArvisProblem):
    """The run's journal does not verify; nothing was replayed. ``broken_at`` names the
    first position that breaks."""

    code = "chain_broken"

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        broken_at = body.get("broken_at")
        self.broken_at: int | None = broken_at if isinstance(broken_at, int) else None


class InternalError(ArvisProblem):
    """A bug in ARVIS; the answer never carries the cause."""

    code = "internal_error"


class InvalidRequest(ArvisProblem):
    """The request itself is wrong; the same request will be refused again."""

    code = "invalid_request"


class ValidationFailed(InvalidRequest):
    """The body or a parameter does not match the schema; ``errors`` says where."""

    code = "validation_error"

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        errors = body.get("errors")
        self.errors: list[dict[str, Any]] = (
            [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []
        )


class PayloadInvalid(InvalidRequest):
    """The payload is not plain JSON (NaN, too deep, too large)."""

    code = "payload_invalid"


class MalformedBody(InvalidRequest):
    code = "malformed_body"


class BodyTooLarge(InvalidRequest):
    code = "body_too_large"


class UnsupportedMediaType(InvalidRequest):
    code = "unsupported_media_type"


class ServiceUnavailable(ArvisProblem):
    """ARVIS cannot answer right now; nothing ran (except after ``request_timeout``, where
    an admitted call runs on). Re-posting the identical request is safe."""

    code = "service_unavailable"
    retryable = True


class StoreUnavailable(ServiceUnavailable):
    code = "store_unavailable"


class ShuttingDown(ServiceUnavailable):
    """This instance is stopping; another one (or this one, restarted) will answer."""

    code = "shutting_down"


class RequestTimeout(ServiceUnavailable):
    """No answer within the server's deadline. The call is not cancelled: an admitted
    syscall runs on and is journaled; re-post it to learn its outcome."""

    code = "request_timeout"


class AuditUnavailable(ServiceUnavailable):
    code = "audit_unavailable"


class SerializationConflict(ServiceUnavailable):
    code = "serialization_conflict"


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
