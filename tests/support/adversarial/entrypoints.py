"""ENTRY_POINTS: one row per way into ARVIS, each with a driver speaking it.

A driver offers the operations its entry point has — ``post`` (a decision, as a
principal, with run and causal ids), ``replay``, ``verify``, ``approve``, ``resolve``,
``runs`` (the tenant's list of runs) —
and answers them normalised (:mod:`.answers`). The row says which it has, so a rule
runs on every entry point that offers what the rule needs. A new entry point
is one more row (and, if it speaks something new, one more driver class).

Per-turn rows talk to ``arvis serve-turn`` of the same deployment, which serves one run:
their cells post on that run (:meth:`Driver.run`), as an agent of that turn would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.adversarial.answers import (
    Answer,
    Done,
    done_from_http,
    from_http,
    from_mcp,
    from_mcp_error,
)
from tests.support.adversarial.deployment import Deployment, slack_user
from tests.support.console import sign_in, sign_in_with_provider
from tests.support.slack import click_body, signed

TURN_RUN = "turn-home"
"""The run the per-turn instance of a deployment serves."""
RUN_ID, CAUSAL_ID = "arvis.dev/run_id", "arvis.dev/causal_id"
_DATA_CODE = re.compile(r'data-code="([^"]+)"')
_RUN_LINK = re.compile(r'<th scope="row"><a href="/console/runs/[^"]+">([^<]+)</a></th>')
_CHAIN = re.compile(r'<p class="chain [^"]*"[^>]*>(.*?)</p>', re.S)


class Driver:
    """The operations an entry point offers; those it lacks raise (the table says which)."""

    name = "?"

    def __init__(self, deployment: Deployment, turn_run: str = TURN_RUN) -> None:
        self.deployment = deployment
        self.turn_run = turn_run
        """The run a per-turn driver's instance serves."""

    def run(self, label: str) -> str:
        """The run a cell labelled ``label`` posts on."""
        return f"{label}-{self.name.replace('/', '-')}"  # as EntryPoint.slug

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.deployment.tokens[who]}"}

    async def post(
        self, who: str, run_id: str, causal_id: str, tool: str, payload: dict[str, Any]
    ) -> Answer:
        raise NotImplementedError(self.name)

    async def replay(self, who: str, run_id: str) -> Done:
        raise NotImplementedError(self.name)

    async def verify(self, who: str, run_id: str, **evidence: Path) -> Done:
        raise NotImplementedError(self.name)

    async def approve(self, who: str, confirmation_id: str) -> Done:
        raise NotImplementedError(self.name)

    async def resolve(
        self, who: str, run_id: str, key: str, attempt: int, as_: str, evidence: str
    ) -> Done:
        raise NotImplementedError(self.name)

    async def runs(self, who: str, containing: str) -> Done:
        """The runs listed to ``who`` whose id contains ``containing`` (``results``: one
        ``{"run_id": …}`` each)."""
        raise NotImplementedError(self.name)

    def base(self) -> str:
        """The address of the process this entry point is served by."""
        raise NotImplementedError(self.name)

    async def metrics(self) -> str:
        """``/metrics`` of the process that served this entry point's posts (an admin's)."""
        async with httpx.AsyncClient(base_url=self.base(), timeout=60) as http:
            response = await http.get("/metrics", headers=self.auth("acme:admin"))
        assert response.status_code == 200, response.text
        return response.text

    def access_log(self) -> list[dict[str, Any]]:
        """The access-log lines of that process so far, oldest first."""
        return list(self.deployment.access)


class HttpDriver(Driver):
    """The v1 API: ``POST /v1/syscalls`` and the run, confirmation and resolve routes."""

    name = "http"

    def base(self) -> str:
        return self.deployment.url

    async def _request(self, method: str, path: str, who: str, **kwargs: Any) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.base(), timeout=60) as http:
            return await http.request(method, path, headers=self.auth(who), **kwargs)

    async def post(
        self, who: str, run_id: str, causal_id: str, tool: str, payload: dict[str, Any]
    ) -> Answer:
        body = {
            "name": "tool.execute",
            "run_id": run_id,
            "causal_id": causal_id,
            "decision": {"tool": tool, "payload": payload},
        }
        return from_http(await self._request("POST", "/v1/syscalls", who, json=body))

    async def replay(self, who: str, run_id: str) -> Done:
        return done_from_http(await self._request("POST", f"/v1/runs/{run_id}/replay", who))

    async def verify(self, who: str, run_id: str, **evidence: Path) -> Done:
        response = await self._request("GET", f"/v1/runs/{run_id}/verify", who)
        done = done_from_http(response)
        ok = done.ok and bool(response.json().get("ok"))
        return Done(ok, done.code, [], done.raw)

    async def approve(self, who: str, confirmation_id: str) -> Done:
        path = f"/v1/confirmations/{confirmation_id}/approve"
        return done_from_http(await self._request("POST", path, who))

    async def runs(self, who: str, containing: str) -> Done:
        response = await self._request("GET", "/v1/runs", who, params={"q": containing})
        done = done_from_http(response)
        if not done.ok:
            return done
        found = [{"run_id": r["run_id"]} for r in response.json()["runs"]]
        return Done(True, results=found, raw=response.text[:2000])

    async def resolve(
        self, who: str, run_id: str, key: str, attempt: int, as_: str, evidence: str
    ) -> Done:
        path = f"/v1/runs/{run_id}/attempts/{key}/{attempt}/resolve"
        body = {"as": as_, "evidence": evidence}
        return done_from_http(await self._request("POST", path, who, json=body))


class McpDriver(Driver):
    """``/mcp`` with the official SDK's client; the ids travel in ``_meta`` (none: the
    entry point's defaults)."""

    name = "mcp"

    def base(self) -> str:
        return self.deployment.url

    async def post(
        self,
        who: str,
        run_id: str | None,
        causal_id: str | None,
        tool: str,
        payload: dict[str, Any],
    ) -> Answer:
        meta = {RUN_ID: run_id, CAUSAL_ID: causal_id}
        named = {key: value for key, value in meta.items() if value is not None}
        async with (
            httpx2.AsyncClient(headers=self.auth(who), timeout=60) as http,
            Client(streamable_http_client(f"{self.base()}/mcp", http_client=http)) as client,
        ):
            try:
                meta_arg = cast("types.RequestParamsMeta | None", named or None)
                return from_mcp(await client.call_tool(tool, payload, meta=meta_arg))
            except MCPError as exc:
                return from_mcp_error(exc)


class ConsoleDriver(Driver):
    """The operator console's forms, signed in as the principal (with its key, or as the
    person of that name at the identity provider), as a browser without script posts
    them; its run page is its verify."""

    name = "console"

    async def _signed_in(self, http: httpx.AsyncClient, who: str) -> str:
        person = self.deployment.people.get(who)
        if person is not None:
            return await sign_in_with_provider(http, *person)
        return await sign_in(http, self.deployment.tokens[who])

    async def verify(self, who: str, run_id: str, **evidence: Path) -> Done:
        async with httpx.AsyncClient(base_url=self.deployment.url, timeout=60) as http:
            await self._signed_in(http, who)
            response = await http.get(f"/console/runs/{run_id}")
        page = response.text
        ok = response.status_code == 200 and "chain-ok" in page and "chain-broken" not in page
        return Done(ok, raw=f"{response.status_code} {_CHAIN.findall(page)}")

    async def _form(self, who: str, path: str, fields: dict[str, str]) -> Done:
        async with httpx.AsyncClient(base_url=self.deployment.url, timeout=60) as http:
            csrf = await self._signed_in(http, who)
            response = await http.post(path, data={"csrf_token": csrf, **fields})
        if response.status_code == 303:
            return Done(True, raw=f"303 {response.headers.get('location')}")
        found = _DATA_CODE.search(response.text)
        return Done(False, found.group(1) if found else None, raw=f"{response.status_code}")

    async def approve(self, who: str, confirmation_id: str) -> Done:
        return await self._form(who, f"/console/confirmations/{confirmation_id}/approve", {})

    async def runs(self, who: str, containing: str) -> Done:
        async with httpx.AsyncClient(base_url=self.deployment.url, timeout=60) as http:
            await self._signed_in(http, who)
            response = await http.get("/console/runs", params={"q": containing})
        if response.status_code != 200:
            found = _DATA_CODE.search(response.text)
            return Done(False, found.group(1) if found else None, raw=f"{response.status_code}")
        listed = [{"run_id": run} for run in _RUN_LINK.findall(response.text)]
        return Done(True, results=listed, raw=response.text[:2000])

    async def resolve(
        self, who: str, run_id: str, key: str, attempt: int, as_: str, evidence: str
    ) -> Done:
        path = f"/console/runs/{run_id}/attempts/{key}/{attempt}/resolve"
        return await self._form(who, path, {"as": as_, "evidence": evidence})


class CliDriver(Driver):
    """``arvis verify``, ``replay`` (an operator's, on the database) and ``resolve`` (as
    the principal of ``ARVIS_API_KEY``), each a subprocess."""

    name = "cli"

    async def replay(self, who: str, run_id: str) -> Done:
        tenant = self.deployment.tenant_of(who)
        ran = await self.deployment.cli("replay", run_id, "--tenant", tenant, "--json")
        if ran.returncode != 0:
            return Done(False, raw=ran.stderr)
        return Done(True, results=json.loads(ran.stdout), raw=ran.stdout[:2000])

    async def runs(self, who: str, containing: str) -> Done:
        tenant = self.deployment.tenant_of(who)
        ran = await self.deployment.cli("runs", "--tenant", tenant, "--q", containing, "--json")
        if ran.returncode != 0:
            return Done(False, raw=ran.stderr)
        found = [{"run_id": r["run_id"]} for r in json.loads(ran.stdout)["runs"]]
        return Done(True, results=found, raw=ran.stdout[:2000])

    async def verify(self, who: str, run_id: str, **evidence: Path) -> Done:
        tenant = self.deployment.tenant_of(who)
        flags = [
            part
            for name, path in evidence.items()
            for part in (f"--{name.replace('_', '-')}", str(path))
        ]
        ran = await self.deployment.cli("verify", run_id, "--tenant", tenant, *flags, "--json")
        return Done(ran.returncode == 0, raw=ran.stdout + ran.stderr)

    async def resolve(
        self, who: str, run_id: str, key: str, attempt: int, as_: str, evidence: str
    ) -> Done:
        ran = await self.deployment.cli(
            "resolve",
            run_id,
            key,
            str(attempt),
            "--as",
            as_,
            "--evidence",
            evidence,
            "--json",
            **self.resolver(who),
        )
        return Done(ran.returncode == 0, raw=ran.stdout + ran.stderr)

    def resolver(self, who: str) -> dict[str, str]:
        """The environment ``arvis resolve`` runs in as ``who``."""
        return {"ARVIS_API_KEY": self.deployment.tokens[who]}


class RemoteCliDriver(CliDriver):
    """The same ``arvis`` subcommands in remote mode (``ARVIS_URL``, ``ARVIS_API_KEY``): the
    principal's own reads and resolution over the server's API. The database URL they are
    given leads nowhere, so an answer can only have come from the server."""

    name = "cli-remote"

    def remote(self, who: str) -> dict[str, str]:
        return {
            "ARVIS_URL": self.deployment.url,
            "ARVIS_API_KEY": self.deployment.tokens[who],
            "ARVIS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nowhere",
        }

    async def replay(self, who: str, run_id: str) -> Done:
        ran = await self.deployment.cli("replay", run_id, "--json", **self.remote(who))
        if ran.returncode != 0:
            return Done(False, raw=ran.stderr)
        return Done(True, results=json.loads(ran.stdout), raw=ran.stdout[:2000])

    async def verify(self, who: str, run_id: str, **evidence: Path) -> Done:
        flags = [
            part
            for name, path in evidence.items()
            for part in (f"--{name.replace('_', '-')}", str(path))
        ]
        ran = await self.deployment.cli("verify", run_id, *flags, "--json", **self.remote(who))
        return Done(ran.returncode == 0, raw=ran.stdout + ran.stderr)

    def resolver(self, who: str) -> dict[str, str]:
        return self.remote(who)


class SlackDriver(Driver):
    """Slack's interactions (``POST /slack/interactions``): the Approve click of the Slack
    user ``[slack.users]`` maps to the principal, signed as Slack signs it."""

    name = "slack"

    def base(self) -> str:
        return self.deployment.url

    async def approve(self, who: str, confirmation_id: str) -> Done:
        value = json.dumps({"t": self.deployment.tenant_of(who), "c": confirmation_id})
        body = click_body(slack_user(who), "arvis_approve", value)
        async with httpx.AsyncClient(base_url=self.base(), timeout=60) as http:
            response = await http.post("/slack/interactions", content=body, headers=signed(body))
        return done_from_http(response)


def turn_access_log(driver: Driver) -> list[dict[str, Any]]:
    """The access-log lines a per-turn instance wrote (JSON, on its log file)."""
    lines = []
    for line in driver.deployment.turn(driver.turn_run).log().splitlines():
        if line.startswith("{") and '"logger": "arvis.access"' in line:
            lines.append(json.loads(line))
    return lines


class TurnHttpDriver(HttpDriver):
    """The v1 API of ``arvis serve-turn`` (its run only)."""

    name = "serve-turn/http"

    def run(self, label: str) -> str:
        return self.turn_run

    def base(self) -> str:
        return self.deployment.turn(self.turn_run).url

    def access_log(self) -> list[dict[str, Any]]:
        return turn_access_log(self)


class TurnMcpDriver(McpDriver):
    """``/mcp`` of ``arvis serve-turn`` (its run only)."""

    name = "serve-turn/mcp"

    def run(self, label: str) -> str:
        return self.turn_run

    def base(self) -> str:
        return self.deployment.turn(self.turn_run).url

    def access_log(self) -> list[dict[str, Any]]:
        return turn_access_log(self)


@dataclass(frozen=True)
class EntryPoint:
    name: str
    driver: Callable[..., Driver]
    """``driver(deployment)``, or ``driver(deployment, turn_run)`` for a per-turn instance of
    another run than the deployment's shared one."""
    ops: frozenset[str]
    per_turn: bool = False
    """It is a per-turn instance: it serves one run, and must refuse every other."""
    operator_reads: bool = False
    """Its replay and verify are an operator's (no principal): principal rules skip it."""

    def __repr__(self) -> str:
        return f"EntryPoint({self.name})"

    @property
    def slug(self) -> str:
        """Its name as it may appear in a run or causal id (``[A-Za-z0-9._:-]``)."""
        return self.name.replace("/", "-")


def _ops(*names: str) -> frozenset[str]:
    return frozenset(names)


ENTRY_POINTS: tuple[EntryPoint, ...] = (
    EntryPoint("http", HttpDriver, _ops("post", "replay", "verify", "approve", "resolve", "runs")),
    EntryPoint("mcp", McpDriver, _ops("post")),
    EntryPoint("console", ConsoleDriver, _ops("approve", "resolve", "verify", "runs")),
    EntryPoint("cli", CliDriver, _ops("replay", "verify", "resolve", "runs"), operator_reads=True),
    EntryPoint("cli-remote", RemoteCliDriver, _ops("replay", "verify", "resolve")),
    EntryPoint(
        "serve-turn/http",
        TurnHttpDriver,
        _ops("post", "replay", "verify", "approve", "resolve"),
        per_turn=True,
    ),
    EntryPoint("serve-turn/mcp", TurnMcpDriver, _ops("post"), per_turn=True),
    EntryPoint("slack", SlackDriver, _ops("approve")),
)
"""Every way in. Add a row to hold a new entry point to every rule of the suite."""


def entry_point(name: str) -> EntryPoint:
    """The row of ``ENTRY_POINTS`` called ``name``."""
    [row] = [row for row in ENTRY_POINTS if row.name == name]
    return row


def offering(op: str, *, per_turn: bool | None = None, principal_reads: bool = False) -> list[Any]:
    """``pytest.param`` of each entry point offering ``op`` (filtered), id'd by name."""
    rows = [
        row
        for row in ENTRY_POINTS
        if op in row.ops
        and (per_turn is None or row.per_turn == per_turn)
        and not (principal_reads and row.operator_reads)
    ]
    return [pytest.param(row, id=row.name) for row in rows]
