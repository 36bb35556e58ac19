"""The Python client agent runtimes use to talk to ARVIS (docs/client.md).

It depends on httpx and pydantic only — never on the kernel — so an agent runtime can
use it without running ARVIS::

    from arvis.client import ArvisClient, Executed

    with ArvisClient.from_env() as arvis:  # ARVIS_URL, ARVIS_API_KEY
        answer = arvis.execute("run-1", "step-1", "echo", {"hello": "world"})
        if isinstance(answer, Executed):
            print(answer.boundary, answer.result)
"""

from arvis.client._admin import ApiKey, CreatedKey, RunsPage, RunSummary
from arvis.client._base import KEY_VARIABLE, URL_VARIABLE
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
    Bundle,
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
    Resolution,
    ToolInfo,
    ToolPlan,
    Verification,
)
from arvis.client.retry import NO_RETRY, RetryPolicy
from arvis.client.sync import ArvisClient

__all__ = [
    "KEY_VARIABLE",
    "NO_RETRY",
    "URL_VARIABLE",
    "AlreadyApproved",
    "AnswerLost",
    "ApiKey",
    "ArvisClient",
    "ArvisClientError",
    "ArvisProblem",
    "AsyncArvisClient",
    "AttemptInFlight",
    "Boundary",
    "Bundle",
    "CausalIdConflict",
    "ChainBroken",
    "Confirmation",
    "ConfirmationPage",
    "ConfirmationRef",
    "ConfirmationRequired",
    "Conflict",
    "ConnectFailed",
    "CreatedKey",
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
    "Resolution",
    "RetryExhausted",
    "RetryPolicy",
    "RunSummary",
    "RunsPage",
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
