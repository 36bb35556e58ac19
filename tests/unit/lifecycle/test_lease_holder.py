"""Lease holders (DESIGN §6, §10): which slots a starting process may take over.

Only a holder that provably died on this host is taken over; a live process, another
host, or a holder that cannot be looked at is left to expire.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest

from arvis.lifecycle.holder import Holder, ProcProbe, Seen, provably_gone
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.ports import LifecycleStore
from tests.support.fakes import LeaseTable

BOOT = "7d1f6f0e-0000-4000-8000-000000000001"


@dataclass
class FakeProbe:
    """A host named ``h1`` in boot :data:`BOOT` whose processes are ``running``."""

    running: dict[int, int] = field(default_factory=dict)
    hidden: set[int] = field(default_factory=set)
    name: str | None = "h1"

    def host(self) -> str | None:
        return self.name

    def machine(self) -> str | None:
        return "m1"

    def boot(self) -> str | None:
        return BOOT

    def seen(self, pid: int) -> Seen:
        if pid in self.hidden:
            return "unknown"
        return self.running.get(pid, "gone")


HERE = Holder(pid=10, token="me", host="h1", machine="m1", boot=BOOT, start=500)


def _holder(**changes: object) -> Holder:
    fields: dict[str, object] = {
        "pid": 42,
        "token": "t",
        "host": "h1",
        "machine": "m1",
        "boot": BOOT,
        "start": 100,
    }
    fields.update(changes)
    return Holder(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("holder", "running", "gone"),
    [
        (_holder(), {}, True),  # no such pid
        (_holder(), {42: 999}, True),  # the pid is another process now (a new pid 1)
        (_holder(), {42: 100}, False),  # alive
        (_holder(boot="another-boot"), {42: 100}, True),  # this host, before a reboot
        (_holder(host="h2"), {}, False),  # another host
        (_holder(machine="m2"), {}, False),  # another machine with this host name
        (_holder(machine=None), {}, False),
        (_holder(host=None), {}, False),  # an older holder text: nothing to go by
        (_holder(boot=None), {}, False),
        (_holder(start=None), {}, False),
        (_holder(pid=10, start=500), {}, False),  # this very process
    ],
)
def test_only_a_holder_that_died_on_this_host_is_provably_gone(
    holder: Holder, running: dict[int, int], gone: bool
) -> None:
    assert provably_gone(holder, HERE, FakeProbe(running)) is gone


def test_a_pid_this_process_cannot_look_at_is_not_provably_gone() -> None:
    assert not provably_gone(_holder(), HERE, FakeProbe(hidden={42}))


def test_a_holder_text_round_trips_and_leads_with_the_pid() -> None:
    holder = _holder(host="weird;host=x:y")
    text = holder.text()
    assert text.startswith("42:t;")
    assert Holder.parse(text) == holder
    assert Holder.parse("1234:0123abcd") == Holder(pid=1234, token="0123abcd")


@pytest.mark.parametrize(
    "text", ["", "x:y", "12", "12:", "12:t;host", "12:t;start=soon", "12:t;host=a;host=b"]
)
def test_a_holder_text_that_is_not_one_is_never_taken_over(text: str) -> None:
    assert Holder.parse(text) is None


def test_the_proc_probe_sees_this_process_alive_and_a_reaped_one_gone() -> None:
    probe = ProcProbe()
    if probe.boot() is None:
        pytest.skip("no /proc here")
    me = probe.seen(os.getpid())
    assert isinstance(me, int)
    assert Holder.of_this_process("t", probe).start == me
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert probe.seen(child.pid) == "gone"


def test_the_proc_probe_sees_a_zombie_as_gone(tmp_path: Path) -> None:
    stat = tmp_path / "77" / "stat"
    stat.parent.mkdir()
    stat.write_text("77 (a (b) c) Z 1 " + " ".join(["0"] * 17) + " 4242 0 0\n")
    assert ProcProbe(proc=tmp_path).seen(77) == "gone"
    stat.write_text("77 (a (b) c) S 1 " + " ".join(["0"] * 17) + " 4242 0 0\n")
    assert ProcProbe(proc=tmp_path).seen(77) == 4242


async def test_a_starting_process_takes_over_only_the_dead_slots_of_its_instance_id() -> None:
    table = LeaseTable()
    probe = FakeProbe(running={20: 200})
    dead = _holder(pid=30, start=300).text()
    live = _holder(pid=20, start=200).text()
    elsewhere = _holder(pid=30, start=300, host="h2").text()
    table.holders = {
        "inst/1": dead,
        "inst/2": live,
        "inst/3": elsewhere,
        "inst/4": "31:old-format-holder",
        "inst/x/1": dead,  # another instance id that shares the prefix
        "other/1": dead,
    }
    lease = InstanceLease(cast(LifecycleStore, table), "inst", 10.0, probe=probe)

    assert await lease.take_over() == ["inst/1"]
    assert sorted(table.holders) == ["inst/2", "inst/3", "inst/4", "inst/x/1", "other/1"]
    # The lowest free slot is the one just taken over: the restart keeps its name.
    assert await lease.claim() == "inst/1"
