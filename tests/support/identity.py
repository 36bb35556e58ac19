"""ARVIS's side of the test identity provider: the ``[[auth.oidc]]`` entry trusting it."""

from __future__ import annotations


def trust(issuer: str, **extra: str | int) -> str:
    """The ``arvis.toml`` entry trusting ``issuer`` as the tests' provider names its claims
    (tenant, arvis_roles, groups); ``extra`` are more keys of the entry."""
    more = "".join(f"{name} = {value!r}\n".replace("'", '"') for name, value in extra.items())
    return f"""
[[auth.oidc]]
issuer = "{issuer}"
audience = "arvis"
tenant_claim = "tenant"
roles_claim = "arvis_roles"
groups_claim = "groups"
{more}"""
