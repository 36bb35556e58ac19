"""How a short-lived admitting process stops: ``arvis serve-turn`` and ``arvis turn``.

Both are started for one agent turn and stopped when it ends (docs/deploy.md). Both
claim a lease of their own and settle what expired instances left (``Kernel.start``,
DESIGN §6). On SIGTERM or SIGINT they stop admitting, let what is in flight finish
and journal within ``ARVIS_SHUTDOWN_GRACE_S``, release the lease and exit 0; they
exit 1 when something they admitted is not journaled by then. Whatever is left
unsettled is recovery's once the lease is released: journaled as uncertain, never
run again.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

from arvis.lifecycle.errors import ShuttingDown

if TYPE_CHECKING:
    from arvis.kernel import Kernel

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
EXIT_UNJOURNALED = 1


class StopRequest:
    """SIGTERM and SIGINT as an event of the running loop, for the ``with`` block.

    Off the main thread (a test runner's worker thread) no handler can be set;
    the event then never fires and the process stops when its work ends.
    """

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.signal: str | None = None
        self._installed: list[signal.Signals] = []

    def __enter__(self) -> StopRequest:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self._fire, sig)
            except (ValueError, RuntimeError, NotImplementedError):
                continue
            self._installed.append(sig)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed = []

    def _fire(self, sig: signal.Signals) -> None:
        if self.signal is None:
            self.signal = sig.name
        self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


@dataclass(frozen=True)
class Ending:
    """How an admitting process stopped."""

    stopped_by: str | None
    """``SIGTERM`` or ``SIGINT``; None when its work ended by itself."""
    drained: bool
    """Everything in flight finished and journaled within the grace period."""
    unjournaled: int
    """Admitted attempts whose result this process has not journaled."""

    @property
    def ok(self) -> bool:
        return self.drained and self.unjournaled == 0

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else EXIT_UNJOURNALED

    def problem(self) -> str | None:
        """One line for the operator when something admitted is not journaled."""
        if self.ok:
            return None
        return (
            f"{self.unjournaled or 'some'} admitted call(s) not journaled within the grace "
            "period; once this instance's lease is released, recovery journals them as "
            "uncertain and flags their runs audit-incomplete"
        )


async def wind_down(kernel: Kernel, stopped_by: str | None) -> Ending:
    """Stop admitting and wait for what is in flight, within the grace period."""
    handler = kernel.lifecycle.handler
    handler.stop_admitting()
    drained = await handler.drain(kernel.settings.shutdown_grace_s)
    return Ending(stopped_by, drained, handler.settlement.unjournaled)


async def run_admitting(kernel: Kernel, use: Callable[[Kernel], Awaitable[T]]) -> T:
    """Start ``kernel``, run ``use`` until it ends or a stop signal comes, wind down.

    Stopped by a signal, the work is cancelled once what it had in flight is
    journaled, and the process exits 0 (or 1, see :class:`Ending`). The caller
    closes the kernel, which releases the lease.
    """
    await kernel.start()
    with StopRequest() as stop:
        work = asyncio.ensure_future(use(kernel))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        ending = await wind_down(kernel, stop.signal)
        if not work.done():
            work.cancel()
        try:
            result = await work
        except (asyncio.CancelledError, ShuttingDown):
            if stop.signal is None:
                raise
            exit_with(ending)
    if not ending.ok:
        exit_with(ending)
    return result


def exit_with(ending: Ending) -> NoReturn:
    """Say how the process stopped (on stderr) and exit with its status."""
    message = ending.problem()
    if message is not None:
        typer.echo(f"arvis: error: {message}", err=True)
    elif ending.stopped_by is not None:
        typer.echo(f"arvis: stopped by {ending.stopped_by}; all it admitted is journaled", err=True)
    raise typer.Exit(ending.exit_code)
