"""The tenant's runs; a run's journal, its verification and its replay. Another tenant's
run is 404; another principal's run is 403 ``identity_mismatch`` to an agent's replay
(auditors read them all)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from arvis.api.schemas import JournalEntryOut, JournalPage, ReplayOut, RunOut, RunsOut, VerifyOut
from arvis.domain.ids import ID_PATTERN, RunId
from arvis.lifecycle.replay import MAX_REPLAY_PAGE
from arvis.lifecycle.runs import MAX_RUNS_PAGE, summary_fields
from arvis.web.identity import AuditorIdentity, KernelDep, ReplayIdentity, log_fields
from arvis.web.problems import problem_responses
from arvis.web.runs import RunFilters

router = APIRouter(tags=["runs"])

RunIdPath = Annotated[str, Path(pattern=ID_PATTERN, description="The run's id.")]
MAX_PAGE = 1000


def _logged_run(run_id: RunIdPath, request: Request) -> RunId:
    """The path's run id, named on the request's access-log line."""
    log_fields(request)["run_id"] = run_id
    return RunId(run_id)


RunPath = Annotated[RunId, Depends(_logged_run)]
"""A run route's ``{run_id}``: validated, typed and logged."""


@router.get("/v1/runs", response_model=RunsOut, responses=problem_responses(401, 403, 422, 503))
async def list_runs(
    identity: AuditorIdentity,
    kernel: KernelDep,
    filters: RunFilters,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS_PAGE, description="Page size.")] = 50,
) -> RunsOut:
    """The tenant's runs, newest first, each with its status (what needs a person first:
    ``audit_incomplete``, ``uncertain``, ``waiting_for_consent``, ``refused``,
    ``running``), principal, tools, start and last activity; every filter holds at once,
    and ``next_cursor`` pages on."""
    page = await kernel.lifecycle.replay.runs(identity.tenant_id, replace(filters, limit=limit))
    return RunsOut(
        runs=[RunOut(**summary_fields(r)) for r in page.runs], next_cursor=page.next_cursor
    )


@router.get(
    "/v1/runs/{run_id}/journal",
    response_model=JournalPage,
    responses=problem_responses(401, 403, 404, 422, 503),
)
async def get_journal(
    run_id: RunPath,
    identity: AuditorIdentity,
    kernel: KernelDep,
    after: Annotated[int, Query(ge=0, le=2**62, description="Entries after this position.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page size.")] = 100,
) -> JournalPage:
    """The run's entries in chain order, with their hashes."""
    entries = await kernel.lifecycle.replay.journal(identity.tenant_id, run_id, after, limit)
    return JournalPage(
        run_id=run_id,
        entries=[JournalEntryOut.model_validate(e, from_attributes=True) for e in entries],
        next_after=entries[-1].position if len(entries) == limit else None,
    )


@router.get(
    "/v1/runs/{run_id}/verify",
    response_model=VerifyOut,
    responses=problem_responses(401, 403, 404, 422, 503),
)
async def verify_run(run_id: RunPath, identity: AuditorIdentity, kernel: KernelDep) -> VerifyOut:
    """Recompute the run's hash chain and say where, if anywhere, it breaks; check each
    entry against the intent it settles; with the deployment's public key configured,
    every signed checkpoint; with a file witness configured, the witness's account
    (issue 23). The same verification as replay, ``arvis verify`` and the console."""
    report = await kernel.lifecycle.evidence.verify(identity.tenant_id, run_id)
    keyed = kernel.lifecycle.evidence.key is not None
    return VerifyOut(
        ok=report.ok,
        entries=report.entries,
        broken_at=report.broken_at,
        reason=report.reason,
        checkpoints=report.checkpoints if keyed else None,
        rewritten_before=report.rewritten_before,
        unsigned=report.unsigned,
        witness=report.witness,
        flagged=report.flagged,
    )


@router.post(
    "/v1/runs/{run_id}/replay",
    response_model=ReplayOut,
    responses=problem_responses(401, 403, 404, 409, 413, 415, 422, 503),
)
async def replay_run(
    run_id: RunPath,
    identity: ReplayIdentity,
    kernel: KernelDep,
    after: Annotated[
        int, Query(ge=0, le=2**62, description="Results first seen after this position.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_REPLAY_PAGE, description="Page size.")] = 100,
) -> ReplayOut:
    """The recorded results in causal order, paged. Runs, mints and dispatches nothing.

    An agent replays only the runs bound to its own principal (another's: 403
    ``identity_mismatch``); an auditor or admin replays every run of its tenant.
    The run's whole chain is verified in the same read; a broken chain answers 409
    ``chain_broken`` naming the position, and no result."""
    page = await kernel.lifecycle.replay.replay_page(
        identity.tenant_id, run_id, after, limit, reader=identity
    )
    return ReplayOut(run_id=run_id, results=page.results, next_after=page.next_after)
