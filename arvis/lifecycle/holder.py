"""Who holds a lease, and when that holder is provably gone (DESIGN §6, §10).

A lease's holder text names the process that holds it: its pid, a random token,
and where and when it runs — the host name, the machine id, the kernel's boot id
and the process's start time (clock ticks after boot, ``/proc/<pid>/stat``).
Beats and releases compare the whole text, so two lives of one pid never pass
for each other.

At start-up a process of a stable ``ARVIS_INSTANCE_ID`` takes over the slots of
that id whose holder :func:`provably_gone` says is dead, so it settles its own
crash at once instead of when the lease expires. Gone means: it ran on this host
(same host name and machine id) and

- in an earlier boot of it (another boot id): every process of that boot is gone; or
- in this boot, and no live process has its pid, or the pid's process started at
  another time (a container's new pid 1 is not the old one).

Anything else — another host, a live process, a holder this process cannot look
at (another user's process hidden by ``/proc``'s ``hidepid``, an older holder text
without these facts, a system without ``/proc``) — is left to expire as before.
So a live sibling worker of the same id (``serve --workers 2``) is never taken
over. The one case these facts cannot tell apart is two live processes with one
host name and one kernel but separate pid namespaces (two containers on one node
given the same host name *and* the same instance id): each would see the other's
pid as its own pid 1. Give each container its own ``ARVIS_INSTANCE_ID``
(docs/deploy.md).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import quote, unquote

Seen = int | Literal["gone", "unknown"]
"""What a probe sees of a pid: the start time of the live process that has it,
``"gone"`` when provably none does, ``"unknown"`` when it cannot tell."""


class ProcessProbe(Protocol):
    """Where this process runs, and what it can see of other processes on this host."""

    def host(self) -> str | None: ...

    def machine(self) -> str | None: ...

    def boot(self) -> str | None: ...

    def seen(self, pid: int) -> Seen: ...


class ProcProbe:
    """The Linux probe: the host name, ``/etc/machine-id``, ``/proc``."""

    def __init__(self, proc: Path = Path("/proc"), etc: Path = Path("/etc")) -> None:
        self.proc = proc
        self.etc = etc

    def host(self) -> str | None:
        return socket.gethostname() or None

    def machine(self) -> str | None:
        return _first_line(self.etc / "machine-id")

    def boot(self) -> str | None:
        return _first_line(self.proc / "sys" / "kernel" / "random" / "boot_id")

    def seen(self, pid: int) -> Seen:
        try:
            text = (self.proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
        except FileNotFoundError:
            return _signalled(pid)
        except OSError:
            return "unknown"
        # "pid (comm) state ppid …": comm may hold spaces and parentheses, so the
        # fields are counted after its last ")"; starttime is field 22.
        fields = text[text.rfind(")") + 1 :].split()
        if len(fields) < 20 or not fields[19].isdigit():
            return "unknown"
        if fields[0] in ("Z", "X", "x"):  # exited, not yet reaped: it holds nothing
            return "gone"
        return int(fields[19])


def _signalled(pid: int) -> Seen:
    # No /proc entry: gone, unless /proc hides it (hidepid) and the pid still exists.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except OSError:
        return "unknown"
    return "unknown"


def _first_line(path: Path) -> str | None:
    try:
        line = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return line or None


@dataclass(frozen=True, slots=True)
class Holder:
    """The process a lease name is held by."""

    pid: int
    token: str
    host: str | None = None
    machine: str | None = None
    boot: str | None = None
    start: int | None = None

    @classmethod
    def of_this_process(cls, token: str, probe: ProcessProbe) -> Holder:
        pid = os.getpid()
        seen = probe.seen(pid)
        return cls(
            pid=pid,
            token=token,
            host=probe.host(),
            machine=probe.machine(),
            boot=probe.boot(),
            start=seen if isinstance(seen, int) else None,
        )

    def text(self) -> str:
        """``<pid>:<token>;host=…;machine=…;boot=…;start=…`` (facts it lacks left out):
        the pid first, so an operator reading the table sees which process it is."""
        facts = [
            f"{name}={quote(str(value), safe='')}"
            for name, value in (
                ("host", self.host),
                ("machine", self.machine),
                ("boot", self.boot),
                ("start", self.start),
            )
            if value is not None
        ]
        return ";".join([f"{self.pid}:{self.token}", *facts])

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder a lease row names; None when the text is not one (never taken over)."""
        head, *facts = text.split(";")
        pid, _, token = head.partition(":")
        if not pid.isdigit() or not token:
            return None
        known: dict[str, str] = {}
        for fact in facts:
            name, sep, value = fact.partition("=")
            if not sep or name in known:
                return None
            known[name] = unquote(value)
        start = known.get("start")
        if start is not None and not start.isdigit():
            return None
        return cls(
            pid=int(pid),
            token=token,
            host=known.get("host"),
            machine=known.get("machine"),
            boot=known.get("boot"),
            start=None if start is None else int(start),
        )


def provably_gone(holder: Holder, here: Holder, probe: ProcessProbe) -> bool:
    """Whether ``holder`` is a process of this host (``here``) that no longer runs."""
    if holder.host is None or holder.boot is None or here.host is None or here.boot is None:
        return False
    if (holder.host, holder.machine) != (here.host, here.machine):
        return False  # another host, or one that cannot be told from this one
    if holder.boot != here.boot:
        return True  # this host before it rebooted
    if holder.start is None:
        return False
    if (holder.pid, holder.start) == (here.pid, here.start):
        return False  # this very process
    seen = probe.seen(holder.pid)
    return seen == "gone" or (isinstance(seen, int) and seen != holder.start)
