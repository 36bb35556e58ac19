"""The idempotency key (DESIGN §1): one logical action, one key, on every instance."""

from __future__ import annotations

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.ids import CausalId, IdempotencyKey, RunId, TenantId


def derive_idempotency_key(
    tenant_id: TenantId, run_id: RunId, causal_id: CausalId, tool: str, payload_digest: str
) -> IdempotencyKey:
    """SHA-256 hex over the JCS array ``[tenant, run, causal, tool, payload digest]``.

    An array rather than a joined string, so no field can bleed into the next
    (``"a:b" + "c"`` and ``"a" + "b:c"`` never collide).
    """
    fields = [tenant_id, run_id, causal_id, tool, payload_digest]
    return IdempotencyKey(sha256_hex(canonical_bytes(fields)))
