"""RFC 9457 problem responses, and the one table of HTTP statuses."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from arvis.domain.errors import ArvisError

PROBLEM_MEDIA_TYPE = "application/problem+json"

# The only place where an error code meets an HTTP status.
STATUS_BY_CODE: dict[str, int] = {
    "malformed_body": 400,
    "validation_error": 422,
    "unauthenticated": 401,
    "forbidden_role": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "attempt_in_flight": 409,
    "conflict": 409,
    "body_too_large": 413,
    "unsupported_media_type": 415,
    "store_unavailable": 503,
    "schema_not_ready": 503,
    "shutting_down": 503,
    "internal_error": 500,
}

TITLES: dict[str, str] = {
    "malformed_body": "Malformed request body",
    "validation_error": "Invalid request",
    "unauthenticated": "Authentication required",
    "forbidden_role": "Role not allowed",
    "not_found": "Not found",
    "method_not_allowed": "Method not allowed",
    "attempt_in_flight": "An attempt of this action is in flight",
    "conflict": "Conflict",
    "body_too_large": "Request body too large",
    "unsupported_media_type": "Unsupported media type",
    "store_unavailable": "Store unavailable",
    "schema_not_ready": "Store not migrated",
    "shutting_down": "Shutting down",
    "internal_error": "Internal error",
}


def problem(code: str, detail: str, *, status: int | None = None, **extra: Any) -> JSONResponse:
    """A problem+json response with a stable ``code``."""
    status = status or STATUS_BY_CODE.get(code, 400)
    body: dict[str, Any] = {
        "type": f"urn:arvis:problem:{code}",
        "title": TITLES.get(code, code.replace("_", " ").capitalize()),
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def problem_for(error: ArvisError) -> JSONResponse:
    return problem(error.code, error.message)
