"""The governed tool node: each tool call of the graph is one ARVIS ``tool.execute``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypedDict, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Interrupt, interrupt

from arvis.client import (
    AsyncArvisClient,
    ConfirmationRequired,
    InvalidRequest,
    RetryPolicy,
    SyscallAnswer,
    ToolPlan,
)
from arvis.integrations.outputs import as_id, invalid_arguments, model_name, model_output

__all__ = ["ConsentRequest", "GovernedTools", "causal_id_for_step", "consent_requests"]

CONSENT_KIND = "arvis.confirmation_required"


class ConsentRequest(TypedDict):
    """The value of the ``interrupt()`` a call that needs consent raises: JSON, so every
    checkpointer keeps it. Approve ``confirmation_id`` in ARVIS (an approver's key, Slack,
    the console), then resume the graph: ARVIS, not the resume value, decides."""

    kind: str
    """Always ``arvis.confirmation_required``."""
    confirmation_id: str
    run_id: str
    causal_id: str
    idempotency_key: str
    tool: str
    """The ARVIS tool (``files.write``), not the model-facing name."""
    payload: dict[str, Any]
    """The arguments as the model gave them (ARVIS froze exactly these)."""
    tool_call_id: str | None


def causal_id_for_step(step: int, call_id: str | None, index: int, tool: str) -> str:
    """The causal id of a tool call: the graph's step and the model's tool-call id (or, when
    the model gave none, the call's place in its message and its tool). A resumed node
    runs the same step over the same checkpointed message, so it gets the same ids: the
    same decision, which ARVIS runs at most once."""
    part = call_id if call_id else f"{index}.{tool}"
    return as_id(f"s{step}.{part}", "call")


def consent_requests(interrupted: Mapping[str, Any] | Iterable[Interrupt]) -> list[ConsentRequest]:
    """The ARVIS consent requests among a graph's interrupts: pass what ``ainvoke``
    returned (its ``__interrupt__``) or ``StateSnapshot.interrupts``."""
    found: Iterable[Any] = (
        interrupted.get("__interrupt__", ()) if isinstance(interrupted, Mapping) else interrupted
    )
    return [
        cast(ConsentRequest, item.value)
        for item in found
        if isinstance(item, Interrupt)
        and isinstance(item.value, dict)
        and item.value.get("kind") == CONSENT_KIND
    ]


@dataclass(eq=False)
class GovernedTools:
    """ARVIS's tools for a LangGraph graph: their specs for the model, and the node that
    runs the model's calls through ARVIS (in place of ``ToolNode``).

    The run id is the graph's thread id (``configurable.thread_id``), or ``run_id`` when
    given; the causal id comes from the step and the tool-call id
    (:func:`causal_id_for_step`). A call that needs consent raises ``interrupt()`` with a
    :class:`ConsentRequest`; resuming re-runs the node, which re-posts the same syscalls:
    the calls that ran before the interrupt answer ``deduplicated`` (their recorded
    result, nothing runs again), the approved one ``executed``. So does a graph resumed
    from its last checkpoint after a crash. Calls of one message are posted one after
    the other, so a node waits on one consent at a time.

    An uncertain outcome reaches the model as "do not retry". A problem the model cannot
    act on (a bad key, ARVIS unreachable past the retry budget) is raised and ends the
    run; running it again re-posts the same ids, which is always safe.
    """

    client: AsyncArvisClient
    plan: ToolPlan
    _: KW_ONLY
    names: Mapping[str, str] = field(default_factory=dict)
    """Model-facing names by ARVIS name (default: ``files.write`` is ``files_write``)."""
    run_id: str | None = None
    """The ARVIS run of every thread (default: each thread is its own run)."""
    messages_key: str = "messages"
    retry: RetryPolicy | None = None
    _by_model_name: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for info in self.plan.tools:
            name = self.names.get(info.name) or model_name(info.name)
            if name in self._by_model_name:
                raise ValueError(
                    f"{info.name} and {self._by_model_name[name]} are both {name!r} to the "
                    "model; rename one with names="
                )
            self._by_model_name[name] = info.name

    @classmethod
    async def load(
        cls,
        client: AsyncArvisClient,
        *,
        only: Iterable[str] | None = None,
        names: Mapping[str, str] | None = None,
        run_id: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> GovernedTools:
        """The current plan's tools (or those named in ``only``)."""
        plan = await client.tools()
        if only is not None:
            wanted = set(only)
            missing = wanted - {info.name for info in plan.tools}
            if missing:
                raise ValueError(f"not in the plan: {', '.join(sorted(missing))}")
            plan = plan.model_copy(
                update={"tools": [info for info in plan.tools if info.name in wanted]}
            )
        return cls(client, plan, names=dict(names or {}), run_id=run_id, retry=retry)

    @property
    def specs(self) -> list[dict[str, Any]]:
        """The tools for ``chat_model.bind_tools``: name, description and input schema
        only — effect, replay safety and capabilities never reach the model."""
        by_arvis = {arvis: name for name, arvis in self._by_model_name.items()}
        return [
            {
                "type": "function",
                "function": {
                    "name": by_arvis[info.name],
                    "description": info.description,
                    "parameters": dict(info.input_schema),
                },
            }
            for info in self.plan.tools
        ]

    async def node(self, state: Any, config: RunnableConfig) -> dict[str, list[ToolMessage]]:
        """The graph node: runs each tool call of the last AI message through ARVIS and
        answers one ``ToolMessage`` per call."""
        message = _last_ai_message(state, self.messages_key)
        run_id = self.run_id or _thread_run_id(config)
        step = int((config.get("metadata") or {}).get("langgraph_step", 0))
        answers = []
        for index, call in enumerate(message.tool_calls):
            answers.append(await self._call(run_id, step, index, call))
        return {self.messages_key: answers}

    async def _call(self, run_id: str, step: int, index: int, call: ToolCall) -> ToolMessage:
        name, call_id = call["name"], call.get("id")
        arvis_tool = self._by_model_name.get(name)
        if arvis_tool is None:
            return self._answer(call, invalid_arguments(f"there is no tool {name!r}"), "error")
        causal_id = causal_id_for_step(step, call_id, index, arvis_tool)
        payload = dict(call["args"])
        answer = await self._post(run_id, causal_id, arvis_tool, payload)
        while isinstance(answer, ConfirmationRequired):
            # The first time, this raises and the graph pauses; once resumed, the node
            # runs again from the top and this returns, and the same syscall is re-posted.
            request: ConsentRequest = {
                "kind": CONSENT_KIND,
                "confirmation_id": answer.confirmation.id,
                "run_id": run_id,
                "causal_id": causal_id,
                "idempotency_key": answer.idempotency_key,
                "tool": arvis_tool,
                "payload": payload,
                "tool_call_id": call_id,
            }
            interrupt(request)
            answer = await self._post(run_id, causal_id, arvis_tool, payload)
        if isinstance(answer, InvalidRequest):
            return self._answer(call, invalid_arguments(answer.detail), "error")
        return self._answer(call, model_output(answer), "success")

    async def _post(
        self, run_id: str, causal_id: str, tool: str, payload: dict[str, Any]
    ) -> SyscallAnswer | InvalidRequest:
        try:
            return await self.client.execute(run_id, causal_id, tool, payload, retry=self.retry)
        except InvalidRequest as error:  # the model's arguments: it can correct them
            return error

    @staticmethod
    def _answer(call: ToolCall, content: str, status: str) -> ToolMessage:
        return ToolMessage(
            content=content, tool_call_id=call.get("id") or "", name=call["name"], status=status
        )


def _last_ai_message(state: Any, key: str) -> AIMessage:
    messages: Sequence[BaseMessage] = state if isinstance(state, list) else state[key]
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    raise ValueError("the governed tool node found no AI message in the state")


def _thread_run_id(config: RunnableConfig) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise ValueError(
            "the governed tool node needs a thread id (configurable.thread_id) or a run_id"
        )
    return as_id(str(thread), "thread")
