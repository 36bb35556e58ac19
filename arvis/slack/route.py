"""``POST /slack/interactions``: Slack's button clicks. Authenticated by Slack's signature
over the body (not a bearer key: Slack cannot send one), answered as problems like every
other route."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from arvis.web.identity import KernelDep
from arvis.web.problems import error_response, problem, problem_responses

router = APIRouter(tags=["slack"])

_FORM = "application/x-www-form-urlencoded"
_HEADERS = ("x-slack-request-timestamp", "x-slack-signature")
_MAX_HEADER_CHARS = 256


@router.post(
    "/slack/interactions",
    responses=problem_responses(400, 401, 403, 404, 409, 413, 415, 431, 503),
)
async def slack_interactions(request: Request, kernel: KernelDep) -> Response:
    """An Approve or Deny click on a consent request ARVIS posted (``[slack]``)."""
    approvals = kernel.slack
    if approvals is None:
        return problem("not_found", "Slack approvals are not configured ([slack])")
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != _FORM:
        return problem("unsupported_media_type", f"Slack interactions are {_FORM}")
    headers = {name: request.headers.get(name, "") for name in _HEADERS}
    if any(len(value) > _MAX_HEADER_CHARS for value in headers.values()):
        return problem("header_too_large", "a Slack signature header is too long")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > approvals.max_body_bytes:
        return _too_large(approvals.max_body_bytes)
    body = await request.body()
    if len(body) > approvals.max_body_bytes:
        return _too_large(approvals.max_body_bytes)
    try:
        answer = await approvals.interactions.handle(body, headers)
    except Exception as exc:  # the HTTP boundary: typed errors become their problems
        return error_response(exc)
    return JSONResponse(answer)


def _too_large(limit: int) -> Response:
    return problem("body_too_large", f"Slack interactions are limited to {limit} bytes")
