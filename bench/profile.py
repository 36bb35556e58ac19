"""Where a syscall's client time goes: round trips on the wire and a pyinstrument profile."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.kernel import open_kernel
from bench.roundtrips import WireTrace

# First match wins: a frame's self time is charged to the library it runs in.
CATEGORIES = (
    (
        "await (waiting on PostgreSQL / event loop idle)",
        ("[await]", "selectors.py", "select.py", "asyncio/runners.py"),
    ),
    ("waiting on PostgreSQL (socket wait in psycopg)", ("/psycopg/waiting.py",)),
    ("psycopg (driver)", ("/psycopg/", "/psycopg_binary/", "psycopg_c")),
    ("greenlet (SQLAlchemy's async bridge)", ("greenlet", "switch")),
    ("sqlalchemy (compile, execute, pool, results)", ("/sqlalchemy/",)),
    ("pydantic (models, validation)", ("/pydantic/", "/pydantic_core/")),
    (
        "jsonschema (payload validation)",
        ("/jsonschema/", "/referencing/", "/jsonschema_specifications/"),
    ),
    ("rfc8785 + hashlib (canonical JSON, digests)", ("/rfc8785/", "hashlib", "_hashlib")),
    ("json (encode/decode)", ("/json/",)),
    ("asyncio (event loop, tasks)", ("/asyncio/", "uvloop")),
    ("uvicorn + httptools (HTTP server)", ("/uvicorn/", "httptools")),
    ("starlette + fastapi (routing, dependencies)", ("/starlette/", "/fastapi/")),
    (
        "arvis.web + arvis.serving + arvis.api (the HTTP edge)",
        ("/arvis/web/", "/arvis/serving/", "/arvis/api/"),
    ),
    ("arvis.store", ("/arvis/store/",)),
    ("arvis.lifecycle", ("/arvis/lifecycle/",)),
    ("arvis.tools", ("/arvis/tools/",)),
    ("arvis.domain", ("/arvis/domain/",)),
    ("uuid, logging, other stdlib", ("/uuid.py", "/logging/", "/lib/python3")),
)


async def round_trips(url: str, count: int = 50) -> dict[str, Any]:
    """Wire round trips per syscall, measured after warm-up (plans cached, statements prepared)."""
    async with open_kernel(url, "trace") as kernel:
        await kernel.timed(20)
        # Fresh connections, so the trace sees every statement's Parse (its text)
        # while the plan cache and everything else in the kernel stay warm.
        await kernel.store.engine.dispose()
        with WireTrace(kernel.store.engine) as trace:
            await trace.attach_pool(kernel.store.ops)
            await kernel.timed(count)
        return trace.analyse(count)


async def profile_kernel(url: str, count: int, out_dir: Path) -> dict[str, Any]:
    """Profile ``count`` sequential syscalls; write text and HTML; summarise by library."""
    from pyinstrument import Profiler

    async with open_kernel(url, "profile") as kernel:
        await kernel.timed(50)
        plain = await kernel.timed(count)
        profiler = Profiler(interval=0.0005, async_mode="enabled")
        start = time.perf_counter()
        profiler.start()
        await kernel.timed(count)
        profiler.stop()
        wall = time.perf_counter() - start
    _write(out_dir, profiler)
    shares = by_library(profiler.last_session.root_frame())  # type: ignore[union-attr]
    unprofiled_ms = sum(plain) / count * 1000
    return {
        "syscalls": count,
        "unprofiled_ms_per_syscall": round(unprofiled_ms, 4),
        "profiled_ms_per_syscall": round(wall / count * 1000, 4),
        "share_percent_by_library": shares,
        "estimated_ms_per_syscall_by_library": {
            name: round(share / 100 * unprofiled_ms, 3) for name, share in shares.items()
        },
        "files": ["bench/results/kernel-profile.txt", "bench/results/kernel-profile.html"],
    }


def _write(out_dir: Path, profiler: Any) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    text = profile_text(profiler)
    (out_dir / "kernel-profile.txt").write_text(text)
    (out_dir / "kernel-profile.html").write_text(profiler.output_html())


def profile_text(profiler: Any) -> str:
    """The text profile, with this checkout's location left out (it is committed)."""
    text: str = profiler.output_text(unicode=False, color=False, show_all=False)
    return text.replace(str(Path(__file__).resolve().parent.parent) + "/", "")


def by_library(root: Any) -> dict[str, float]:
    """Percent of sampled time by the library whose code was on top of the stack."""
    totals: dict[str, float] = defaultdict(float)
    stack = [root] if root is not None else []
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        spent = frame.total_self_time
        if spent:
            totals[_category(frame)] += spent
    ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)
    whole = sum(totals.values()) or 1.0
    return {name: round(t / whole * 100, 1) for name, t in ranked}


def _category(frame: Any) -> str:
    if frame.function == "[await]":
        return CATEGORIES[0][0]
    if frame.function == "[self]" and frame.parent is not None:
        frame = frame.parent
    where = f"{frame.function or ''} {frame.file_path or ''}"
    for name, needles in CATEGORIES:
        if any(needle in where for needle in needles):
            return name
    return "other"
