"""Identifier types. Plain strings at run time, distinct to the type checker."""

from typing import NewType

TenantId = NewType("TenantId", str)
PrincipalId = NewType("PrincipalId", str)
RunId = NewType("RunId", str)
CausalId = NewType("CausalId", str)
PlanId = NewType("PlanId", str)
CallId = NewType("CallId", str)
CapabilityId = NewType("CapabilityId", str)
IntentId = NewType("IntentId", str)
ConfirmationId = NewType("ConfirmationId", str)
InstanceId = NewType("InstanceId", str)
IdempotencyKey = NewType("IdempotencyKey", str)
