"""ARVIS's tools as tools of the OpenAI Agents SDK: every call a governed ``tool.execute``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem
from agents.tool_context import ToolContext

from arvis.client import (
    ArvisClientError,
    AsyncArvisClient,
    Confirmation,
    ConfirmationRef,
    ConfirmationRequired,
    Conflict,
    InvalidRequest,
    RetryPolicy,
    SyscallAnswer,
    ToolInfo,
    ToolPlan,
)
from arvis.integrations.openai_agents._render import (
    causal_id_for_call,
    invalid_arguments,
    model_name,
    model_output,
    strict_eligible,
)

__all__ = ["ConsentPending", "GovernedTools"]


class ConsentPending(ArvisClientError):
    """The SDK was told to go ahead with a call whose ARVIS confirmation is still
    undecided. Approve it in ARVIS (:meth:`GovernedTools.approve` does both)."""

    code = "consent_pending"

    def __init__(self, tool: str, causal_id: str, confirmation_id: str) -> None:
        super().__init__(
            f"{tool} (causal id {causal_id}) was approved in the SDK, but ARVIS confirmation "
            f"{confirmation_id} is not approved; nothing ran"
        )
        self.confirmation_id = confirmation_id


@dataclass(frozen=True)
class _Seen:
    """What ARVIS answered to a call while the SDK asked whether it needs approval."""

    tool: str
    payload: dict[str, Any]
    outcome: SyscallAnswer | ArvisClientError


@dataclass(eq=False)
class GovernedTools:
    """Makes SDK tools whose bodies run only inside ARVIS, for one run.

    Each call the model makes becomes ``tool.execute`` under ``run_id`` with the causal id
    ``causal_id(call_id)`` of the model's call id, so the same call — retried after a lost
    answer, or resumed after an approval — is always the same decision.

    ARVIS decides at admission whether a call needs consent, so the syscall is posted when
    the SDK asks whether the call needs approval: a ``confirmation_required`` answer
    becomes the SDK's approval interruption, and any other answer is kept and handed to
    the model when the SDK invokes the tool. After approval (:meth:`approve`, which also
    approves in ARVIS) the resumed run posts the identical syscall, which now runs once.
    Consequences: SDK tool input guardrails would run after ARVIS decided, so
    :meth:`govern` refuses tools that have them (put the rule in ARVIS's policy); and
    ``RunState.approve(..., always_approve=True)`` cannot pre-approve ARVIS consent, which
    is given per decision.

    An uncertain outcome is returned to the model as "do not retry". A problem the model
    cannot act on (a bad key, ARVIS unreachable past the retry budget) is raised and
    ends the run: guessing would risk a second effect.
    """

    client: AsyncArvisClient
    run_id: str
    _: KW_ONLY
    causal_id: Callable[[str], str] = causal_id_for_call
    retry: RetryPolicy | None = None
    _seen: dict[str, _Seen] = field(default_factory=dict, init=False)

    async def tools(
        self, *, only: Iterable[str] | None = None, names: Mapping[str, str] | None = None
    ) -> list[FunctionTool]:
        """The current plan's tools (or those named in ``only``), as SDK tools. ``names``
        renames tools for the model; by default ``files.append`` is ``files_append``."""
        return self.from_plan(await self.client.tools(), only=only, names=names)

    def from_plan(
        self,
        plan: ToolPlan,
        *,
        only: Iterable[str] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> list[FunctionTool]:
        """:meth:`tools` for a plan already fetched."""
        wanted = None if only is None else set(only)
        chosen = [info for info in plan.tools if wanted is None or info.name in wanted]
        missing = (wanted or set()) - {info.name for info in chosen}
        if missing:
            raise ValueError(f"not in the plan: {', '.join(sorted(missing))}")
        built = [self.tool(info, name=(names or {}).get(info.name)) for info in chosen]
        taken: dict[str, str] = {}
        for info, tool in zip(chosen, built, strict=True):
            if tool.name in taken:
                raise ValueError(
                    f"{info.name} and {taken[tool.name]} are both {tool.name!r} to the model; "
                    "rename one with names="
                )
            taken[tool.name] = info.name
        return built

    def tool(self, info: ToolInfo, *, name: str | None = None) -> FunctionTool:
        """One ARVIS tool as an SDK tool (name, description and input schema only: effect,
        replay safety and capabilities never reach the model)."""
        schema = dict(info.input_schema)
        return self._function_tool(
            arvis_tool=info.name,
            name=name or model_name(info.name),
            description=info.description,
            schema=schema,
            strict=strict_eligible(schema),
        )

    def govern(self, tool: FunctionTool, *, arvis_tool: str | None = None) -> FunctionTool:
        """An application's own SDK tool whose body is declared to ARVIS (a factory in
        ``arvis.toml``) as ``arvis_tool`` (default: the same name): the model sees the
        same tool; a call runs the ARVIS tool, governed, and never the local body."""
        refused = [
            what
            for what, present in (
                ("needs_approval (declare consent in ARVIS's policy)", tool.needs_approval),
                (
                    "tool_input_guardrails (they would run after ARVIS decided)",
                    tool.tool_input_guardrails,
                ),
                ("timeout_seconds (ARVIS owns the deadline)", tool.timeout_seconds is not None),
            )
            if present
        ]
        if refused:
            raise ValueError(f"cannot govern {tool.name!r}: {'; '.join(refused)}")
        return self._function_tool(
            arvis_tool=arvis_tool or tool.name,
            name=tool.name,
            description=tool.description,
            schema=tool.params_json_schema,
            strict=tool.strict_json_schema,
            output_guardrails=tool.tool_output_guardrails,
        )

    def causal_id_of(self, item: ToolApprovalItem) -> str:
        """The causal id under which an interrupted call was (and will be) posted."""
        if not item.call_id:
            raise ValueError("the approval item carries no call id")
        return self.causal_id(item.call_id)

    def confirmation_of(self, item: ToolApprovalItem) -> ConfirmationRef | None:
        """The ARVIS confirmation an interruption waits on, as this process saw it."""
        seen = self._seen.get(item.call_id or "")
        if seen is not None and isinstance(seen.outcome, ConfirmationRequired):
            return seen.outcome.confirmation
        return None

    async def approve(
        self,
        state: RunState[Any, Any],
        item: ToolApprovalItem,
        approver: AsyncArvisClient,
        *,
        reason: str | None = None,
    ) -> Confirmation | None:
        """Approve an interrupted call in ARVIS (with the approver's own key: four eyes)
        and in the SDK's ``state``; resuming the run then runs it, once. None when ARVIS
        holds no confirmation for the call (the SDK asked on its own, e.g. for arguments
        that are not JSON): ARVIS still decides when the call is posted."""
        decided = await self._decide(item, approver, "approve", reason)
        state.approve(item)
        return decided

    async def reject(
        self,
        state: RunState[Any, Any],
        item: ToolApprovalItem,
        approver: AsyncArvisClient,
        *,
        reason: str | None = None,
    ) -> Confirmation | None:
        """Deny an interrupted call in ARVIS (for ever: a new decision needs a new call)
        and reject it in the SDK's ``state``, which tells the model."""
        decided = await self._decide(item, approver, "deny", reason)
        state.reject(item, rejection_message=reason)
        self._seen.pop(item.call_id or "", None)  # a rejected call is never invoked
        return decided

    async def _decide(
        self, item: ToolApprovalItem, approver: AsyncArvisClient, verdict: str, reason: str | None
    ) -> Confirmation | None:
        causal_id = self.causal_id_of(item)
        ref = self.confirmation_of(item)
        confirmation_id = ref.id if ref is not None else await self._find(approver, causal_id)
        if confirmation_id is None:
            return None
        act = approver.approve if verdict == "approve" else approver.deny
        try:
            return await act(confirmation_id, reason=reason)
        except Conflict:
            # Decided already (by someone else, or our own answer was lost): fine when it
            # went the same way, an error otherwise.
            wanted = {"approve": ("APPROVED", "RESERVED", "CONSUMED"), "deny": ("DENIED",)}
            async for found in approver.iter_confirmations():
                if found.id == confirmation_id and found.state in wanted[verdict]:
                    return found
            raise

    async def _find(self, approver: AsyncArvisClient, causal_id: str) -> str | None:
        async for found in approver.iter_confirmations(state="PENDING"):
            if found.run_id == self.run_id and found.causal_id == causal_id:
                return found.id
        return None

    def _function_tool(
        self,
        *,
        arvis_tool: str,
        name: str,
        description: str,
        schema: dict[str, Any],
        strict: bool,
        output_guardrails: Any = None,
    ) -> FunctionTool:
        async def needs_approval(
            _: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            outcome = await self._post(arvis_tool, call_id, params)
            self._seen[call_id] = _Seen(arvis_tool, params, outcome)
            return isinstance(outcome, ConfirmationRequired)

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            call_id = context.tool_call_id
            try:
                payload = json.loads(arguments)
            except ValueError:
                payload = None
            if not isinstance(payload, dict):
                self._seen.pop(call_id, None)
                return invalid_arguments("the arguments are not a JSON object")
            seen = self._seen.pop(call_id, None)
            outcome: SyscallAnswer | ArvisClientError
            if (
                seen is not None
                and (seen.tool, seen.payload) == (arvis_tool, payload)
                and not isinstance(seen.outcome, ConfirmationRequired)
            ):
                outcome = seen.outcome
            else:
                # Resumed after approval (or asked nothing first): the identical syscall again.
                outcome = await self._post(arvis_tool, call_id, payload)
            return self._output(arvis_tool, call_id, outcome)

        return FunctionTool(
            name=name,
            description=description,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=strict,
            needs_approval=needs_approval,
            tool_output_guardrails=output_guardrails,
        )

    async def _post(
        self, arvis_tool: str, call_id: str, payload: dict[str, Any]
    ) -> SyscallAnswer | ArvisClientError:
        try:
            return await self.client.execute(
                self.run_id, self.causal_id(call_id), arvis_tool, payload, retry=self.retry
            )
        except ArvisClientError as error:
            return error

    def _output(
        self, arvis_tool: str, call_id: str, outcome: SyscallAnswer | ArvisClientError
    ) -> str:
        if isinstance(outcome, InvalidRequest):
            return invalid_arguments(outcome.detail)
        if isinstance(outcome, ArvisClientError):
            raise outcome
        if isinstance(outcome, ConfirmationRequired):
            raise ConsentPending(arvis_tool, outcome.causal_id, outcome.confirmation.id)
        return model_output(outcome)
