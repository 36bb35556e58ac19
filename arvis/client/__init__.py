"""The Python client agent runtimes use to talk to ARVIS (docs/client.md).

It depends on httpx and pydantic only — never on the kernel — so an agent runtime can
use it without running ARVIS::

    from arvis.client import ArvisClient, Executed

    with ArvisClient("http://127.0.0.1:8000", agent_key) as arvis:
        answer = arvis.execute("run-1", "step-1", "echo", {"hello": "world"})
        if isinstance(answer, Executed):
            print(answer.boundary, answer.result)
"""

from arvis.client._calls import SyscallAnswer
from arvis.client.aio import AsyncArvisClient
from arvis.client.errors import (
    AlreadyApproved,
    AnswerLost,
    ArvisClientError,
    ArvisProblem,
    AttemptInFlight,
    CausalIdConflict,
    ChainBroken,
    Conflict,
    ConnectFailed,
    ForbiddenRole,
    InternalError,
    InvalidRequest,
    NotFound,
    PayloadInvalid,
    RequestTimeout,
    RetryExhausted,
    SelfApproval,
    ServiceUnavailable,
    ShuttingDown,
    StoreUnavailable,
    TransportError,
    Unauthenticated,
    UnexpectedAnswer,
    ValidationFailed,
)
from arvis.client.models import (
    Boundary,
    Confirmation,
    ConfirmationPage,
    ConfirmationRef,
    ConfirmationRequired,
    Deduplicated,
    Executed,
    JournalEntry,
    JournalPage,
    Receipt,
    Refused,
    ReplayPage,
    ToolInfo,
    ToolPlan,
    Verification,
)
from arvis.client.retry import NO_RETRY, RetryPolicy
from arvis.client.sync import ArvisClient

__all__ = [
    "NO_RETRY",
    "AlreadyApproved",
    "AnswerLost",
    "ArvisClient",
    "ArvisClientError",
    "ArvisProblem",
    "AsyncArvisClient",
    "AttemptInFlight",
    "Boundary",
    "CausalIdConflict",
    "ChainBroken",
    "Confirmation",
    "ConfirmationPage",
    "ConfirmationRef",
    "ConfirmationRequired",
    "Conflict",
    "ConnectFailed",
    "Deduplicated",
    "Executed",
    "ForbiddenRole",
    "InternalError",
    "InvalidRequest",
    "JournalEntry",
    "JournalPage",
    "NotFound",
    "PayloadInvalid",
    "Receipt",
    "Refused",
    "ReplayPage",
    "RequestTimeout",
    "RetryExhausted",
    "RetryPolicy",
    "SelfApproval",
    "ServiceUnavailable",
    "ShuttingDown",
    "StoreUnavailable",
    "SyscallAnswer",
    "ToolInfo",
    "ToolPlan",
    "TransportError",
    "Unauthenticated",
    "UnexpectedAnswer",
    "ValidationFailed",
    "Verification",
]
