"""The consent steps of the fake store: ``arvis_request_consent``, ``arvis_approve`` (one
approval towards a quorum) and ``arvis_resolve`` (with the consent's next round)."""

from __future__ import annotations

import json
from dataclasses import replace

from arvis.domain.ids import ConfirmationId
from arvis.domain.journal import artifact_text
from arvis.lifecycle.records import JournalEntry
from arvis.lifecycle.writes import (
    ApprovalStep,
    ApproveAnswer,
    ConsentAnswer,
    ConsentRequest,
    Resolution,
    ResolveAnswer,
)
from tests.support.fakestore.base import StoreBase, at_, plan_of
from tests.support.fakestore.journal import Append, Refused, append_entry, stamp
from tests.support.fakestore.tables import (
    ApprovalRow,
    ConfirmationRow,
    Tables,
)


class ConsentSteps(StoreBase):
    async def request_consent(self, request: ConsentRequest) -> ConsentAnswer:
        await self._enter()
        t = self.tables.copy()
        try:
            answer = self._request_consent(t, request)
        except Refused as refused:
            raise refused.error from None
        self._commit("request_consent", t)
        return answer

    def _request_consent(self, t: Tables, request: ConsentRequest) -> ConsentAnswer:
        record = request.confirmation
        tenant, key = record.tenant_id, record.idempotency_key
        bound, plan = self._bind(
            t,
            tenant=tenant,
            run=record.run_id,
            plan=request.plan_id,
            causal=record.causal_id,
            key=key,
            tool=record.tool,
            digest=request.payload_digest,
            payload_text=request.payload_text,
            principal=record.context.get("principal_id"),
        )
        if bound in ("identity_mismatch", "causal_conflict"):
            return ConsentAnswer(bound, None, plan_of(plan))  # type: ignore[arg-type]
        if (tenant, record.confirmation_id) in t.confirmations or (tenant, key) in t.consent_of:
            existing = t.consent_of.get((tenant, key))
            return ConsentAnswer(
                "existing", None if existing is None else ConfirmationId(existing), plan_of(plan)
            )
        # As arvis_request_consent: the consent opens at the database's clock and lives
        # what Python decided (expires_at - created_at).
        now = self.now()
        row = ConfirmationRow(
            tenant_id=tenant,
            confirmation_id=record.confirmation_id,
            run_id=record.run_id,
            causal_id=record.causal_id,
            idempotency_key=key,
            tool=record.tool,
            payload_digest=request.payload_digest,
            payload=json.loads(request.payload_text),
            state="PENDING",
            context=json.loads(json.dumps(record.context)),
            expires_at=now + (at_(record.expires_at) - at_(record.created_at)),
            created_at=now,
            approver_groups=tuple(record.approver_groups),
            quorum=record.quorum,
            definition_fingerprint=record.definition_fingerprint,
            policy_digest=record.policy_digest,
        )
        t.confirmations[(tenant, row.confirmation_id)] = row
        t.consent_of[(tenant, key)] = row.confirmation_id
        self._consent_event(t, None, "PENDING", row)
        return ConsentAnswer("created", record.confirmation_id, plan_of(plan))

    async def resolve(self, resolution: Resolution) -> ResolveAnswer:
        await self._enter()
        t = self.tables.copy()
        status, entry = self._resolve(t, resolution)
        self._commit("resolve", t)
        self._observe(status, entry)
        return ResolveAnswer(status, entry)  # type: ignore[arg-type]

    def _resolve(self, t: Tables, r: Resolution) -> tuple[str, JournalEntry | None]:
        tenant, run, key, attempt = (
            r.key.tenant_id,
            r.key.run_id,
            r.key.idempotency_key,
            r.key.attempt,
        )
        row = t.resolutions.get((tenant, key, attempt))
        if row is None or row.run_id != run or row.uncertain_position != r.uncertain_position:
            return "not_uncertain", None
        if row.boundary is not None:
            return "resolved", None
        renewal = r.renewal
        if renewal is not None:
            consent = t.confirmations.get((tenant, renewal.confirmation.confirmation_id))
            if (
                consent is None
                or consent.idempotency_key != key
                or consent.state != "CONSUMED"
                or consent.round != renewal.round - 1
                or (tenant, key) in t.attempts
                or t.last_attempt.get((tenant, key), 0) > attempt
            ):
                return "stale", None
        boundary = r.artifact.boundary.value
        body_text = artifact_text(r.artifact)
        entry = append_entry(
            self.now(),
            t,
            Append(
                key=r.key.decision(),
                kind="resolution",
                intent=None,
                boundary=boundary,
                retryable=False,
                body_text=body_text,
                recorded=stamp(r.recorded_at),
                flag=None,
            ),
        )
        t.resolutions[(tenant, key, attempt)] = replace(
            row,
            boundary=boundary,
            resolved_by=r.resolved_by,
            resolved_at=at_(r.recorded_at),
            position=entry.position,
        )
        if renewal is not None:
            now = self.now()  # one transaction, one now(), as in arvis_resolve
            consent = t.confirmations[(tenant, renewal.confirmation.confirmation_id)]
            renewed = replace(
                consent,
                state=renewal.to_state.value,
                round=renewal.round,
                renewed_at=now,
                expires_at=now + (at_(renewal.expires_at) - at_(r.recorded_at)),
                decided_by=renewal.decided_by,
                decided_at=None if renewal.decided_by is None else at_(r.recorded_at),
                decision_reason=None,
            )
            t.confirmations[(tenant, consent.confirmation_id)] = renewed
            self._consent_event(t, consent.state, renewed.state, renewed)
            approver = renewal.approver
            if approver is not None:
                where = (tenant, consent.confirmation_id, renewal.round, approver.principal_id)
                t.approvals[where] = ApprovalRow(
                    principal_id=approver.principal_id,
                    auth_method=approver.auth_method,
                    key_id=approver.key_id,
                    groups=tuple(approver.groups or ()),
                    decided_at=at_(r.recorded_at),
                    position=entry.position,
                )
        return "appended", entry

    async def approve(self, step: ApprovalStep) -> ApproveAnswer:
        await self._enter()
        t = self.tables.copy()
        status, entry = self._approve(t, step)
        self._commit("approve", t)
        self._observe(status, entry)
        return ApproveAnswer(status, entry if status == "appended" else None)  # type: ignore[arg-type]

    def _approve(self, t: Tables, step: ApprovalStep) -> tuple[str, JournalEntry | None]:
        record = step.confirmation
        tenant, cid, round_ = record.tenant_id, record.confirmation_id, record.round
        if (tenant, cid, round_, step.approver_principal) in t.approvals:
            return "duplicate", None
        row = t.confirmations.get((tenant, cid))
        if row is not None and row.expires_at <= self.now():
            return "expired", None
        seen = sum(1 for k in t.approvals if k[:3] == (tenant, cid, round_))
        if row is None or row.round != round_ or seen != step.seen:
            return "stale", None
        body_text = artifact_text(step.artifact)
        if not self._move_consent(
            t,
            tenant,
            cid,
            ("PENDING",),
            step.to_state.value,
            decided_by=step.decided_by,
            reason=None,
            at=step.recorded_at,
        ):
            return "stale", None
        entry = append_entry(
            self.now(),
            t,
            Append(
                key=record.key,
                kind="confirmation",
                intent=None,
                boundary=None,
                retryable=False,
                body_text=body_text,
                recorded=stamp(step.recorded_at),
                flag=None,
            ),
        )
        t.approvals[(tenant, cid, round_, step.approver_principal)] = ApprovalRow(
            principal_id=step.approver_principal,
            auth_method=step.approver_method,
            key_id=step.approver_key_id,
            groups=tuple(step.approver_groups),
            decided_at=at_(step.recorded_at),
            position=entry.position,
        )
        return "appended", entry
