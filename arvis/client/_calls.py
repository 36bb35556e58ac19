"""The requests of the API and how their answers are read, shared by both clients.

A :class:`Call` is one request, described: method, path, query, body, how to read a
success, and whether repeating it is harmless. The sync and async clients only send
calls; everything about the wire format lives here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from arvis.client.errors import (
    AnswerLost,
    ConnectFailed,
    TransportError,
    UnexpectedAnswer,
    problem_error,
)
from arvis.client.models import (
    ANSWER,
    HEAD_SIGNED_HEADER,
    Bundle,
    Confirmation,
    ConfirmationPage,
    ConfirmationRequired,
    ConfirmationState,
    Deduplicated,
    Executed,
    JournalEntry,
    JournalPage,
    Refused,
    ReplayPage,
    Resolution,
    ToolPlan,
    Verification,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
I_co = TypeVar("I_co", covariant=True)

SyscallAnswer = Executed | Deduplicated | Refused | ConfirmationRequired


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API, and how to read its answer."""

    method: str
    path: str
    read: Callable[[Any], T]
    """Turns the decoded JSON of a 2xx answer into the typed value."""
    params: Mapping[str, str | int] | None = None
    body: Any = None
    idempotent: bool = True
    """Repeating it after a lost answer cannot change what happened."""
    raw: bool = False
    """``read`` gets the 2xx ``httpx.Response`` itself, not its decoded JSON (a bundle's
    bytes are the evidence: they are handed on as they came)."""


class Page(Protocol):
    @property
    def next_after(self) -> int | str | None:
        """The cursor of the next page; None on the last."""
        ...


P = TypeVar("P", bound=Page)


@dataclass(frozen=True)
class Pages(Generic[P, I_co]):
    """A read in pages: the call for the page after a cursor, and the items of a page.

    A client walks it from ``first`` until a page has no ``next_after``."""

    call: Callable[[Any], Call[P]]
    items: Callable[[P], Sequence[I_co]]
    first: int | str | None


def _segment(value: str) -> str:
    # Ids are validated by ARVIS; quoting only keeps an odd one from changing the route.
    return quote(value, safe="")


def _model(model: type[M]) -> Callable[[Any], M]:
    return model.model_validate


def syscall(
    run_id: str, causal_id: str, tool: str, payload: Mapping[str, Any]
) -> Call[SyscallAnswer]:
    """``POST /v1/syscalls`` with one ``tool.execute``. Repeating it is the designed retry."""
    body = {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": causal_id,
        "decision": {"tool": tool, "payload": dict(payload)},
    }
    return Call("POST", "/v1/syscalls", ANSWER.validate_python, body=body)


def tools() -> Call[ToolPlan]:
    return Call("GET", "/v1/tools", _model(ToolPlan))


def journal(run_id: str, after: int, limit: int) -> Call[JournalPage]:
    path = f"/v1/runs/{_segment(run_id)}/journal"
    return Call("GET", path, _model(JournalPage), params={"after": after, "limit": limit})


def verify(run_id: str) -> Call[Verification]:
    return Call("GET", f"/v1/runs/{_segment(run_id)}/verify", _model(Verification))


def replay(run_id: str, after: int, limit: int) -> Call[ReplayPage]:
    # A POST, but it runs nothing: repeating it is harmless.
    path = f"/v1/runs/{_segment(run_id)}/replay"
    return Call("POST", path, _model(ReplayPage), params={"after": after, "limit": limit})


def confirmations(
    state: ConfirmationState | None, limit: int, after: str | None
) -> Call[ConfirmationPage]:
    params: dict[str, str | int] = {"limit": limit}
    if state is not None:
        params["state"] = state
    if after is not None:
        params["after"] = after
    return Call("GET", "/v1/confirmations", _model(ConfirmationPage), params=params)


def decide(confirmation_id: str, verdict: str, reason: str | None) -> Call[Confirmation]:
    """Approve or deny. Not idempotent: a repeat after a lost answer is a 409 ``conflict``."""
    path = f"/v1/confirmations/{_segment(confirmation_id)}/{verdict}"
    body = {"reason": reason} if reason is not None else None
    return Call("POST", path, _model(Confirmation), body=body, idempotent=False)


def resolve(
    run_id: str, idempotency_key: str, attempt: int, as_: str, evidence: str
) -> Call[Resolution]:
    """Resolve an uncertain attempt. Not idempotent: a repeat is a 409 ``conflict``."""
    path = f"/v1/runs/{_segment(run_id)}/attempts/{_segment(idempotency_key)}/{attempt}/resolve"
    body = {"as": as_, "evidence": evidence}
    return Call("POST", path, _model(Resolution), body=body, idempotent=False)


def bundle(run_id: str) -> Call[Bundle]:
    """``GET /v1/runs/{id}/bundle``: the run's audit bundle, bytes as served."""
    return Call("GET", f"/v1/runs/{_segment(run_id)}/bundle", _bundle, raw=True)


def _bundle(response: httpx.Response) -> Bundle:
    signed = response.headers.get(HEAD_SIGNED_HEADER, "true").lower() != "false"
    return Bundle(data=response.content, head_signed=signed)


def journal_pages(run_id: str, page_size: int) -> Pages[JournalPage, JournalEntry]:
    return Pages(lambda after: journal(run_id, after, page_size), lambda page: page.entries, 0)


def replay_pages(run_id: str, page_size: int) -> Pages[ReplayPage, SyscallAnswer]:
    return Pages(lambda after: replay(run_id, after, page_size), lambda page: page.results, 0)


def confirmation_pages(
    state: ConfirmationState | None, page_size: int
) -> Pages[ConfirmationPage, Confirmation]:
    return Pages(
        lambda after: confirmations(state, page_size, after),
        lambda page: page.confirmations,
        None,
    )


def request(client: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    return client.build_request(call.method, call.path, params=call.params, json=call.body)


def transport_error(exc: httpx.TransportError) -> TransportError:
    """The client's error for an httpx failure; the httpx error stays its ``__cause__``."""
    name = type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        error: TransportError = ConnectFailed(
            f"could not connect to ARVIS: {exc or name}", refused=True
        )
    elif isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        error = ConnectFailed(f"could not connect to ARVIS ({name})")
    elif isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError):
        error = AnswerLost(f"the answer was lost ({name}); the request may have reached ARVIS")
    else:
        error = TransportError(f"the request could not be sent ({name})")
    error.__cause__ = exc
    return error


def read(call: Call[T], response: httpx.Response) -> T:
    """The typed value of a 2xx answer, or raise the typed error for anything else."""
    if call.raw and response.is_success:
        return call.read(response)
    try:
        decoded = json.loads(response.content) if response.content else None
    except ValueError:
        decoded = None
        if response.is_success:
            raise UnexpectedAnswer(response.status_code, "the answer is not JSON") from None
    if not response.is_success:
        if isinstance(decoded, dict) and isinstance(decoded.get("code"), str):
            raise problem_error(response.status_code, decoded)
        raise UnexpectedAnswer(response.status_code, "not an ARVIS problem answer")
    try:
        return call.read(decoded)
    except ValidationError as exc:
        raise UnexpectedAnswer(response.status_code, f"unreadable answer: {_where(exc)}") from None


def _where(exc: ValidationError) -> str:
    # Names and error types only: the values stay out of messages.
    parts = []
    for error in exc.errors()[:3]:
        loc = ".".join(map(str, error["loc"]))
        tag = (error.get("ctx") or {}).get("discriminator")
        parts.append(f"{error['type']} at {loc or tag or '(root)'}")
    return "; ".join(parts)
