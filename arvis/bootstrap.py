"""The composition root: settings in, wired kernel out.

Routes and the CLI get everything from the :class:`Kernel`; they never build
their own pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

from arvis.config import FileConfig, Settings, load_file_config, load_settings
from arvis.store.database import PgStore, resolve_database


@dataclass
class Kernel:
    """Everything a running ARVIS instance needs, wired once."""

    settings: Settings
    file_config: FileConfig
    store: PgStore

    async def close(self) -> None:
        await self.store.close()


async def build_kernel(settings: Settings | None = None) -> Kernel:
    """Wire a kernel. Starts the embedded PostgreSQL when no URL is configured."""
    settings = settings or load_settings()
    file_config = load_file_config(settings)
    target = resolve_database(settings.database_url, settings.data_dir)
    store = await PgStore.open(target.url)
    return Kernel(settings=settings, file_config=file_config, store=store)
