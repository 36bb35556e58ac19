"""Tool protocol, the one dispatcher, decorators, plan sources, built-in and HTTP tools."""

from arvis.tools.base import (
    NullReporter,
    Reporter,
    Tool,
    ToolInvocation,
    ToolProblem,
    ToolResult,
)
from arvis.tools.builtins import builtin_tools
from arvis.tools.describe import describe_plan, describe_tool
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.errors import (
    DecoratorError,
    DispatchFailure,
    PlanError,
    PlanMismatch,
    PlanNotFound,
    PlanUnavailable,
    ToolExecutionError,
    UnknownTool,
)
from arvis.tools.layers import DispatchDecorator, Dispatcher, DispatchLayer, DispatchOptions
from arvis.tools.outcome import DispatchOutcome, ToolFailure
from arvis.tools.plans import (
    PlanLease,
    PlanStore,
    StaticToolPlanSource,
    ToolPlan,
    ToolPlanSource,
    derive_plan_id,
    lease_plan,
)
from arvis.tools.registry import ToolHost, ToolsConfig, build_tool_set

__all__ = [
    "DecoratorError",
    "DispatchDecorator",
    "DispatchFailure",
    "DispatchLayer",
    "DispatchOptions",
    "DispatchOutcome",
    "Dispatcher",
    "NullReporter",
    "PlanError",
    "PlanLease",
    "PlanMismatch",
    "PlanNotFound",
    "PlanStore",
    "PlanUnavailable",
    "Reporter",
    "StaticToolPlanSource",
    "Tool",
    "ToolDispatcher",
    "ToolExecutionError",
    "ToolFailure",
    "ToolHost",
    "ToolInvocation",
    "ToolPlan",
    "ToolPlanSource",
    "ToolProblem",
    "ToolResult",
    "ToolsConfig",
    "UnknownTool",
    "build_tool_set",
    "builtin_tools",
    "derive_plan_id",
    "describe_plan",
    "describe_tool",
    "lease_plan",
]
