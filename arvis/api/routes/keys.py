"""API keys of the admin's tenant over HTTP: list, create (the token answered once), revoke.

The same store calls as the console's keys page and ``arvis keys``, limited to the
tenant of the admin's own key: another tenant's key is 404, as everywhere.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from arvis.api.schemas import ApiKeyCreated, ApiKeyOut, ApiKeysOut
from arvis.domain.apikeys import ApiKeyRecord
from arvis.lifecycle.errors import NotFound
from arvis.web.bodies import KeyBody
from arvis.web.identity import AdminIdentity, KernelDep
from arvis.web.problems import problem_responses

router = APIRouter(tags=["keys"])

KEY_ID_PATTERN = r"^k[0-9a-f]{16}$"
KeyIdPath = Annotated[str, Path(pattern=KEY_ID_PATTERN, description="The key's id.")]


def key_out(record: ApiKeyRecord) -> ApiKeyOut:
    """The listing of a key: its record's fields, never the secret's hash."""
    return ApiKeyOut.model_validate(record, from_attributes=True)


@router.get("/v1/keys", response_model=ApiKeysOut, responses=problem_responses(401, 403, 503))
async def list_keys(identity: AdminIdentity, kernel: KernelDep) -> ApiKeysOut:
    """The tenant's keys, oldest first, revoked ones included; never a secret or its hash."""
    return ApiKeysOut(keys=[key_out(k) for k in await kernel.keys.list(identity.tenant_id)])


@router.post(
    "/v1/keys",
    response_model=ApiKeyCreated,
    status_code=201,
    responses=problem_responses(401, 403, 413, 415, 422, 503),
)
async def create_key(
    body: KeyBody, identity: AdminIdentity, kernel: KernelDep, response: Response
) -> ApiKeyCreated:
    """A new key of the caller's tenant. Its token is in this answer only (``no-store``);
    ARVIS keeps its hash."""
    record, issued = await kernel.keys.create(
        identity.tenant_id, body.principal, body.roles, body.groups
    )
    response.headers["Cache-Control"] = "no-store"
    return ApiKeyCreated(**key_out(record).model_dump(), token=issued.token)


@router.post(
    "/v1/keys/{key_id}/revoke",
    response_model=ApiKeyOut,
    responses=problem_responses(401, 403, 404, 422, 503),
)
async def revoke_key(key_id: KeyIdPath, identity: AdminIdentity, kernel: KernelDep) -> ApiKeyOut:
    """Revoke a key of the tenant: requests and console sessions with it stop at once.
    Revoking a revoked key changes nothing and answers it as it is (a client may repeat
    the call); a key of another tenant, or none: 404."""
    await kernel.keys.revoke(key_id, identity.tenant_id)
    record = await kernel.keys.get(key_id)
    if record is None or record.tenant_id != identity.tenant_id:
        raise NotFound(f"no key {key_id}")
    return key_out(record)
