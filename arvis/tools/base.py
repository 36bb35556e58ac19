"""The tool contract (DESIGN §3): what a tool is, receives, reports and returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from arvis.domain.canonical import check_json
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import PayloadError
from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.ids import CallId, IdempotencyKey
from arvis.domain.payload import DEFAULT_MAX_PAYLOAD_DEPTH, FrozenEffectPayload
from arvis.tools.limits import FAILURE_CODE, MAX_MESSAGE_CHARS


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation:
    """Everything a tool body receives about one call — and nothing else.

    Never the request, the session or the pipeline's context (DESIGN §1).
    """

    tool: str
    payload: FrozenEffectPayload
    context: AuthorizedEffectContext
    idempotency_key: IdempotencyKey
    """Deterministic per logical action; send it to downstream systems so they dedupe."""
    call_id: CallId
    """Correlates progress reports and a :class:`ToolExecutionError` with this call."""

    @classmethod
    def create(
        cls,
        *,
        tool: str,
        payload: FrozenEffectPayload,
        context: AuthorizedEffectContext,
        call_id: CallId,
    ) -> ToolInvocation:
        """Build an invocation whose idempotency key is derived from its own fields."""
        key = derive_idempotency_key(
            context.tenant_id, context.run_id, context.causal_id, tool, payload.digest
        )
        return cls(
            tool=tool, payload=payload, context=context, idempotency_key=key, call_id=call_id
        )


class ToolProblem(BaseModel):
    """A model-visible failure that is still a completed outcome of the call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(pattern=FAILURE_CODE.pattern)
    detail: str = Field(max_length=MAX_MESSAGE_CHARS)
    effect_started: bool = True
    """``False`` only when the effect provably did not start (e.g. a refused path)."""


class ToolResult(BaseModel):
    """What a tool returns: a JSON ``value``, or a ``problem`` (never both).

    A value is normally the completed outcome (``EFFECT_COMPLETED``). Built with
    :meth:`accepted`, it is work the tool has started and that completes after the
    call returns (``EFFECT_STARTED``, what an HTTP ``202 Accepted`` means).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: JsonValue = None
    problem: ToolProblem | None = None
    pending: bool = False
    """``True``: accepted work, started and not yet complete; ``value`` (e.g. the
    remote's receipt or job id) is journaled as the result. Never with a problem;
    a read-only tool answering it violates the tool contract."""

    @field_validator("value")
    @classmethod
    def _plain_json(cls, value: JsonValue) -> JsonValue:
        # Results are journaled with RFC 8785; refuse what JCS cannot encode now,
        # inside the tool's call, rather than at journal time.
        try:
            check_json(value, max_depth=DEFAULT_MAX_PAYLOAD_DEPTH)
        except PayloadError as exc:
            raise ValueError(exc.message) from None
        return value

    @model_validator(mode="after")
    def _one_of(self) -> ToolResult:
        if self.problem is not None and self.value is not None:
            raise ValueError("a tool result carries a value or a problem, not both")
        if self.problem is not None and self.pending:
            raise ValueError("accepted work carries a value, not a problem")
        return self

    @classmethod
    def ok(cls, value: JsonValue) -> ToolResult:
        """A completed outcome."""
        return cls(value=value)

    @classmethod
    def accepted(cls, value: JsonValue) -> ToolResult:
        """Work the tool has started and that completes asynchronously (HTTP 202).

        Its boundary is ``EFFECT_STARTED``: known to have started, completion not
        observed, so a retry treats it as uncertain. ``value`` is kept.
        """
        return cls(value=value, pending=True)

    @classmethod
    def fail(cls, code: str, detail: str, *, effect_started: bool = True) -> ToolResult:
        """A problem result; pass ``effect_started=False`` only when provably nothing ran."""
        return cls(problem=ToolProblem(code=code, detail=detail, effect_started=effect_started))

    @property
    def is_problem(self) -> bool:
        return self.problem is not None


ReconcileOutcome = Literal["completed", "failed", "not_started", "unknown"]


class Reconciliation(BaseModel):
    """What a reconcile hook found in the external system about one invocation.

    ``unknown`` changes nothing; any other outcome is journaled as a resolution of
    the uncertain attempt by ``reconciler:<tool>`` (issue 16).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: ReconcileOutcome
    evidence: str = Field(default="", max_length=MAX_MESSAGE_CHARS)


class Reconcile(Protocol):
    """A tool's optional ``reconcile(invocation)``: asked, with the same idempotency key
    and call id the tool saw, what became of an invocation whose outcome is uncertain.

    Answers a :class:`Reconciliation` or its outcome alone. It must only look (never
    perform the effect); a hook that raises or times out changes nothing.
    """

    async def __call__(self, invocation: ToolInvocation) -> Reconciliation | ReconcileOutcome: ...


class Canonical(Protocol):
    """A tool's optional ``canonical(value)``: the payload in the form the tool acts on.

    A tool kind that rewrites its input before acting (a file tool normalises its
    path and resolves it inside the sandbox) exposes that rewrite here, so policy,
    the capability gate and the egress gate decide on what the tool will really do
    (DESIGN §10), not on one spelling of it. Given the schema-valid payload value
    (a fresh copy), it answers the canonical value; the tool must then act on
    exactly that (the built-in file tools open the path this same function
    computes). It must be deterministic, fast and free of effects: it runs on the
    event loop during admission, before anything is recorded. It may read the
    state it rewrites against (the sandbox's symlinks), never change anything.

    Raising refuses the call ``payload_invalid`` before admission: an
    :class:`~arvis.domain.errors.ArvisError` is shown with its message and code
    (write them for the caller), any other exception as a fixed text. The
    idempotency key stays over the payload as the agent sent it.
    """

    def __call__(self, value: Any) -> Any: ...


@runtime_checkable
class Reporter(Protocol):
    """Progress of a call, correlated by call id.

    The lifecycle passes one to the dispatcher; a tool receives a per-call
    reporter with the same methods that checks the call id, remembers
    ``effect_started`` and never lets a failing sink break the tool.
    """

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None: ...

    async def effect_started(self, call_id: CallId) -> None:
        """The point of no return: from here on the effect may have happened.

        The dispatcher awaits the reporter it was given once per call, on the
        tool's first report and before the tool continues — whatever the layers
        passed down — so its owner can make the start durable first. Dispatch
        layers cannot report a start on the tool's behalf.
        """


class NullReporter:
    """A reporter that discards everything."""

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
        return None

    async def effect_started(self, call_id: CallId) -> None:
        return None


@runtime_checkable
class Tool(Protocol):
    """A name, its definition and a coroutine body.

    ``execute`` returns a :class:`ToolResult` or raises exactly one
    :class:`~arvis.tools.errors.ToolExecutionError` for ``invocation.call_id``.
    A mutating tool calls ``reporter.effect_started(call_id)`` right before its
    point of no return. A tool may also offer ``reconcile`` (:class:`Reconcile`)
    and ``canonical`` (:class:`Canonical`), which the dispatcher reads once, at
    construction, like the definition.
    """

    @property
    def name(self) -> str: ...

    @property
    def definition(self) -> ToolDefinition: ...

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult: ...
