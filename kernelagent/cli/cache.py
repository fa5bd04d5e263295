"""`kernelagent cache info|clear`: the reference packs kept under $KERNELAGENT_HOME/cache/refs."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from kernelagent.cli.common import JsonOpt, console, fail

app = typer.Typer(no_args_is_help=True, help="Reference packs reused across processes (verify in seconds).")


def _cache():  # noqa: ANN202 - a RefCache
    from kernelagent.verifier.refcache import RefCache

    try:
        return RefCache()
    except ValueError as e:   # a bad KERNELAGENT_CACHE_MAX_GB / _MAX_AGE_HOURS
        raise fail(str(e)) from e


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


@app.command("info")
def cache_info(json_out: JsonOpt = False) -> None:
    """Where the cache is, how full, and what it holds (newest use first)."""
    info = _cache().info()
    if json_out:
        print(json.dumps(info, indent=2))
        return
    console.print(f"{info['root']}: {info['entries']} pack(s), {_size(info['bytes'])} of {_size(info['max_bytes'])} "
                  f"(KERNELAGENT_CACHE_MAX_GB); entries serve {info['max_age_hours']:g} h at most", highlight=False)
    if not info["list"]:
        return
    table = Table(box=None)
    for col in ("problem", "device", "gpu", "seeds", "size", "built in", "last used", "key"):
        table.add_column(col, overflow="fold")
    for e in info["list"]:
        table.add_row(e["problem"], str(e["device"]), str(e["gpu"] or "-"), str(e["seeds"]), _size(e["bytes"]),
                      f"{e['build_seconds']:.1f} s", e["last_used"], e["key"][:12])
    console.print(table)


@app.command("clear")
def cache_clear(json_out: JsonOpt = False) -> None:
    """Remove every cached pack (the next verify of each problem builds it again)."""
    entries, freed = _cache().clear()
    if json_out:
        print(json.dumps({"removed": entries, "bytes": freed}))
    else:
        console.print(f"removed {entries} pack(s), {_size(freed)}")
