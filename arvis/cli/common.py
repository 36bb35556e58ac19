"""What every ``arvis`` subcommand needs: settings, the database, failing with one line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

from arvis.config import Settings, load_settings
from arvis.domain.errors import ArvisError
from arvis.store.database import DatabaseTarget, resolve_database
from arvis.store.engine import create_sync_engine, redacted
from arvis.store.errors import translate
from arvis.store.migrate import check_revision

if TYPE_CHECKING:
    from arvis.bootstrap import Administration
    from arvis.kernel import Kernel
    from arvis.lifecycle.syscalls import SyscallObserver
    from arvis.tools.plans import ToolPlan

T = TypeVar("T")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"arvis: error: {message}", err=True)
    raise typer.Exit(code)


def settings_or_exit() -> Settings:
    """The settings, with ``arvis.toml`` checked as ``serve`` checks it (every section;
    what needs the tools built is :func:`deployment_or_exit`'s). A bad setting exits 2,
    a bad file 1, with one line."""
    from arvis.deployment import check_file

    try:
        settings = load_settings()
    except ArvisError as exc:
        fail(exc.message, 2)
    try:
        check_file(settings)
    except ArvisError as exc:
        fail(exc.message)
    return settings


def database_or_exit(settings: Settings, *, stop_at_exit: bool = True) -> DatabaseTarget:
    try:
        return resolve_database(settings.database_url, settings.data_dir, stop_at_exit=stop_at_exit)
    except ArvisError as exc:
        fail(exc.message)


def deployment_or_exit(settings: Settings) -> ToolPlan:
    """The declared plan; stop with one line when ``arvis.toml`` declares something
    unusable."""
    from arvis.deployment import check_deployment

    try:
        return asyncio.run(check_deployment(settings))
    except ArvisError as exc:
        fail(exc.message)


def require_schema(url: str) -> None:
    engine = create_sync_engine(url)
    try:
        with engine.connect() as conn:
            check_revision(conn)
    except ArvisError as exc:
        fail(exc.message)
    except Exception as exc:
        domain = translate(exc)
        fail(domain.message if domain else f"cannot reach {redacted(url)}: {exc}")
    finally:
        engine.dispose()


def with_administration(url: str, use: Callable[[Administration], Awaitable[T]]) -> T:
    """Key administration on the store at ``url`` (no lifecycle, no tools), closed
    after; domain errors become one line and exit 1."""
    from arvis.bootstrap import administration

    async def main() -> T:
        async with administration(url) as admin:
            return await use(admin)

    try:
        return asyncio.run(main())
    except ArvisError as exc:
        fail(exc.message)


def with_kernel(
    use: Callable[[Kernel], Awaitable[T]],
    *,
    admits: bool = False,
    settings: Settings | None = None,
    observer: SyscallObserver | None = None,
) -> T:
    """Build a kernel, use it, close it. A command that ``admits`` syscalls first
    claims a lease and settles what earlier lives left (DESIGN §6), like ``serve``,
    and stops on SIGTERM as ``arvis.cli.instance`` says."""
    from arvis.bootstrap import build_kernel

    settings = settings or settings_or_exit()

    async def main() -> T:
        try:
            kernel = await build_kernel(settings, observer=observer)
        except ArvisError as exc:
            fail(exc.message)
        try:
            if admits:
                from arvis.cli.instance import run_admitting

                return await run_admitting(kernel, use)
            return await use(kernel)
        except ArvisError as exc:
            fail(exc.message)
        finally:
            await kernel.close()

    return asyncio.run(main())
