"""RFC 9457 problem responses, and the one table of HTTP statuses."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from arvis.domain.errors import ArvisError
from arvis.domain.sections import error_message

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

# The only place where an error code meets an HTTP status.
STATUS_BY_CODE: dict[str, int] = {
    "malformed_body": 400,
    "validation_error": 422,
    "unauthenticated": 401,
    "forbidden_role": 403,
    "token_malformed": 401,
    "token_algorithm_refused": 401,
    "token_issuer_untrusted": 401,
    "token_key_unknown": 401,
    "token_signature_invalid": 401,
    "token_audience_mismatch": 401,
    "token_expired": 401,
    "token_not_yet_valid": 401,
    "token_claim_invalid": 401,
    "token_roles_missing": 403,
    "delegation_refused": 403,
    "csrf_invalid": 403,
    "self_approval": 403,
    "self_resolution": 403,
    "identity_mismatch": 403,
    "approver_not_in_group": 403,
    "unknown_slack_user": 403,
    "signature_invalid": 401,
    "request_replayed": 409,
    "not_found": 404,
    "method_not_allowed": 405,
    "payload_invalid": 422,
    "attempt_in_flight": 409,
    "conflict": 409,
    "causal_id_conflict": 409,
    "chain_broken": 409,
    "already_approved": 409,
    "not_uncertain": 409,
    "already_resolved": 409,
    "journal_conflict": 409,
    "capability_state_conflict": 409,
    "integrity_conflict": 409,
    "run_not_served": 421,
    "body_too_large": 413,
    "unsupported_media_type": 415,
    "header_too_large": 431,
    "header_timeout": 408,
    "not_acceptable": 406,
    "store_unavailable": 503,
    "idp_unavailable": 503,
    "oidc_state_invalid": 400,
    "oidc_denied": 401,
    "oidc_exchange_failed": 401,
    "oidc_issuer_unknown": 404,
    "store_error": 503,
    "serialization_conflict": 503,
    "audit_unavailable": 503,
    "audit_receipt_invalid": 503,
    "plan_unavailable": 503,
    "plan_not_found": 503,
    "plan_mismatch": 503,
    "plan_error": 503,
    "schema_not_ready": 503,
    "shutting_down": 503,
    "lease_not_held": 503,
    "request_timeout": 503,
    "too_many_connections": 503,
    "internal_error": 500,
}

TITLES: dict[str, str] = {
    "malformed_body": "Malformed request body",
    "validation_error": "Invalid request",
    "unauthenticated": "Authentication required",
    "forbidden_role": "Role not allowed",
    "token_malformed": "The bearer token is not a JWT",
    "token_algorithm_refused": "The token's signing algorithm is not allowed for its issuer",
    "token_issuer_untrusted": "The token's issuer is not trusted",
    "token_key_unknown": "The token's signing key is not published by its issuer",
    "token_signature_invalid": "The token's signature does not verify",
    "token_audience_mismatch": "The token is for another audience",
    "token_expired": "The token has expired",
    "token_not_yet_valid": "The token is not valid yet",
    "token_claim_invalid": "A claim the token needs is missing or unusable",
    "token_roles_missing": "The token names no ARVIS role",
    "delegation_refused": "The agent may not act for this person",
    "csrf_invalid": "The form's CSRF token is missing or not this session's",
    "self_approval": "The requester may not approve their own request",
    "self_resolution": "The principal whose call it was may not resolve it alone",
    "identity_mismatch": "This belongs to another principal of the tenant",
    "approver_not_in_group": "The approver holds none of the groups this tool needs",
    "unknown_slack_user": "The Slack user is not an ARVIS approver ([slack.users])",
    "signature_invalid": "The request's signature does not verify",
    "request_replayed": "This signed request was acted on already",
    "not_found": "Not found",
    "method_not_allowed": "Method not allowed",
    "payload_invalid": "Payload is not plain JSON",
    "attempt_in_flight": "An attempt of this action is in flight",
    "conflict": "Conflict",
    "causal_id_conflict": "Causal id already names another decision",
    "chain_broken": "The run's evidence does not verify; nothing of it was served",
    "already_approved": "This principal has approved this confirmation already",
    "not_uncertain": "The attempt's outcome is known; there is nothing to resolve",
    "already_resolved": "The attempt was resolved already",
    "journal_conflict": "A different result is already journaled for this attempt",
    "capability_state_conflict": "The capability is not in the state this step needs",
    "integrity_conflict": "A concurrent write conflicts with this one",
    "run_not_served": "This instance serves another run's turn; nothing was recorded",
    "body_too_large": "Request body too large",
    "unsupported_media_type": "Unsupported media type",
    "header_too_large": "Request header too large",
    "header_timeout": "Request header not received in time",
    "not_acceptable": "Not acceptable",
    "store_unavailable": "Store unavailable",
    "idp_unavailable": "The identity provider's keys are unavailable",
    "oidc_state_invalid": "The sign-in was not started here or has expired",
    "oidc_denied": "The identity provider did not sign you in",
    "oidc_exchange_failed": "The identity provider refused the sign-in's code",
    "oidc_issuer_unknown": "No such identity provider",
    "store_error": "Store error",
    "serialization_conflict": "Transaction conflict; retry",
    "audit_unavailable": "Audit sink unavailable; nothing ran",
    "audit_receipt_invalid": "Audit receipt invalid; nothing ran",
    "plan_unavailable": "Tool plan unavailable",
    "plan_not_found": "Tool plan not found",
    "plan_mismatch": "Tool plan does not verify",
    "plan_error": "Tool plan error",
    "schema_not_ready": "Store not migrated",
    "shutting_down": "Shutting down",
    "lease_not_held": "This instance holds no live lease; nothing ran",
    "request_timeout": "No answer within the request deadline",
    "too_many_connections": "Too many connections",
    "internal_error": "Internal error",
}


def problem_document(
    code: str, detail: str, *, status: int | None = None, **extra: Any
) -> dict[str, Any]:
    """The RFC 9457 members of a problem with a stable ``code``."""
    return {
        "type": f"urn:arvis:problem:{code}",
        "title": TITLES.get(code, code.replace("_", " ").capitalize()),
        "status": status or STATUS_BY_CODE.get(code, 400),
        "detail": detail,
        "code": code,
        **extra,
    }


def problem(code: str, detail: str, *, status: int | None = None, **extra: Any) -> JSONResponse:
    """A problem+json response with a stable ``code``."""
    body = problem_document(code, detail, status=status, **extra)
    status = int(body["status"])
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def problem_for(error: ArvisError) -> JSONResponse:
    extra: dict[str, Any] = {}
    broken_at = getattr(error, "broken_at", None)
    if isinstance(broken_at, int):
        extra["broken_at"] = broken_at
    return problem(error.code, error.message, **extra)


def error_response(exc: Exception) -> JSONResponse:
    """The answer to an error raised while serving: its problem when it is a mapped
    ArvisError, else a logged 500 that says nothing of the cause."""
    if isinstance(exc, ArvisError):
        if exc.code in STATUS_BY_CODE:
            return problem_for(exc)
        log.error("unmapped error %s reached the API: %s", exc.code, exc.message)
    else:
        log.error("unexpected error while serving a request", exc_info=exc)
    return problem("internal_error", "the request could not be completed")


class Problem(BaseModel):
    """An RFC 9457 problem, as every error of the API answers it."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    code: str
    """Stable, machine-readable; see docs/http.md."""


_CODE_BY_STATUS = {
    400: "malformed_body",
    401: "unauthenticated",
    403: "forbidden_role",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    503: "store_unavailable",
}


def _validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    # Never echo the input: a payload may carry secrets.
    return [
        {
            "path": ".".join(str(part) for part in error.get("loc", ())),
            "message": error_message(str(error.get("msg", ""))),
            "type": str(error.get("type", "")),
        }
        for error in exc.errors()
    ]


def install_problem_handlers(app: FastAPI) -> None:
    """Make every error, expected or not, an ``application/problem+json`` answer."""

    async def on_error(_: Request, exc: Exception) -> Response:
        return error_response(exc)

    async def on_validation_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = _validation_errors(exc)
        if any(error["type"] == "json_invalid" for error in errors):
            return problem("malformed_body", "the request body is not valid JSON")
        return problem("validation_error", "the request does not match its schema", errors=errors)

    async def on_http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = _CODE_BY_STATUS.get(exc.status_code, "internal_error")
        status = exc.status_code if code != "internal_error" else 500
        detail = exc.detail if isinstance(exc.detail, str) and status < 500 else TITLES[code]
        response = problem(code, detail, status=status)
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    app.add_exception_handler(ArvisError, on_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_error)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries declaring the problem answers a route may give."""
    return {
        status: {
            "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
            "description": "A problem (RFC 9457) with a stable `code`.",
        }
        for status in statuses
    }
