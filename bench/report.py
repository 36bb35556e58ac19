"""The printed table."""

from __future__ import annotations

from typing import Any


def render(r: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str]] = []

    def add(figure: str, value: str, note: str = "") -> None:
        rows.append((figure, value, note))

    pg = r.get("postgres", {})
    add("PostgreSQL", str(pg.get("settings", {}).get("server_version")), pg.get("source", ""))
    if f := r.get("floor"):
        add("1 floor: 2x INSERT+COMMIT", _lat(f["pair"]), "BEGIN/INSERT/COMMIT x2, 6 round trips")
        add("1 floor: 2x autocommit INSERT", _lat(f["pair_autocommit"]), "2 round trips")
    if st := r.get("statements"):
        add("2 kernel's 2 statements alone", _lat(st["pair"]), "psycopg, no ARVIS Python")
    if k := r.get("kernel"):
        add("2 kernel: tool.execute echo", _lat(k["syscall"]), f"{k['throughput_per_s']}/s seq")
        add("2 kernel client CPU", f"{k['client_cpu_ms_per_syscall']:.2f} ms/syscall")
    if side := r.get("side_by_side"):
        add("1-3 rounds, side by side", str(len(side["rounds"])), _spread(side["rounds"]))
    if t := r.get("roundtrips"):
        add("2 round trips / syscall", f"{t['round_trips_per_syscall']}", "wire, PQtrace")
    if w := r.get("writeset"):
        for who in ("floor", "kernel"):
            f = w[who]
            add(
                f"7 writes per call: {who}",
                f"{f['wal_bytes']:.0f} B WAL, {f['index_insertions']} index entries",
                f"rows +{f['rows_inserted']} ~{f['rows_updated']} (HOT {f['of_which_hot']})"
                f" -{f['rows_deleted']}",
            )
    if p := r.get("peer"):
        if p.get("available"):
            if "sequential" in p:
                add("3 DBOS 1-step workflow", _lat(p["sequential"]), f"dbos {p.get('version')}")
                add("3 DBOS client CPU", f"{p['client_cpu_ms_per_workflow']:.2f} ms/workflow")
            if "throughput_per_s" in p:
                add("3 DBOS 8 threads", f"{p['throughput_per_s']}/s")
        else:
            add("3 DBOS", "NOT RUN", p.get("why", "")[:80])
    for load in (r.get("http") or {}).get("load", []):
        add(
            f"4 HTTP c={load['concurrency']}",
            f"{load['throughput_per_s']}/s, {_lat(load['latency'])}",
            f"errors {load['errors']}",
        )
    if q := (r.get("http") or {}).get("sequential_beside_floor"):
        add(
            "4 HTTP c=1 beside the floor",
            f"{_lat(q['http_c1'])} vs floor {_lat(q['floor_pair'])}",
            f"rounds {q['rounds_http_c1_over_floor']}",
        )
    if m := (r.get("http") or {}).get("memory"):
        add(
            "6 worker RSS MiB",
            f"{m['worker_rss_mib_after_warmup']} -> {m['worker_rss_mib_after_syscalls']}",
            f"after {m['syscalls_after_warmup']} syscalls",
        )
    if g := r.get("growth"):
        for point in g["points"]:
            add(
                f"5 growth @ {point['journal_entries']:,} entries",
                _lat(point["syscall"]),
                f"x{point['p50_vs_empty']} of empty",
            )
        add("5 replay 10k-entry run", f"{g['replay']['seconds']:.3f} s")
        add("5 verify chain", f"{g['verify']['entries_per_s']:,} entries/s")
    if pol := r.get("policies"):
        for name in ("rules", "cedar", "shadow", "budgets"):
            add(
                f"10 kernel, policy {name}",
                _lat(pol[name]["syscall"]),
                f"{pol[name]['client_cpu_ms_per_syscall']:.2f} ms CPU/syscall",
            )
    for name, value in (r.get("ratios") or {}).items():
        add(f"ratio {name}", "n/a" if value is None else f"{value}")
    for name, why in r.get("failures", {}).items():
        add(f"FAILED {name}", why[:60])
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [" | ".join(cell.ljust(width[i]) for i, cell in enumerate(row)) for row in rows]
    return "\n".join(lines)


def _spread(rounds: list[dict[str, Any]]) -> str:
    """Each round's own ratios, lowest to highest."""
    parts = []
    for key, label in (("kernel_over_floor", "kernel/floor"), ("dbos_over_kernel", "DBOS/kernel")):
        values = sorted(v for r in rounds if (v := r.get(key)) is not None)
        if values:
            parts.append(f"{label} {values[0]:.2f}-{values[-1]:.2f}")
    return ", ".join(parts)


def _lat(s: dict[str, Any]) -> str:
    return f"p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms"
