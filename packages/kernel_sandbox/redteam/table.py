"""Print the README's red-team table from cases.toml: ``python redteam/table.py``."""

from __future__ import annotations

import tomllib
from pathlib import Path


def verdict(status: str, flags: list[str]) -> str:
    return status + (f" `{', '.join(flags)}`" if flags else "")


def table() -> str:
    cases = tomllib.loads((Path(__file__).parent / "cases.toml").read_text())["case"]
    rows = [
        "| case | hack class | verdict (default) | verdict (static checks off) | how it is caught |",
        "|---|---|---|---|---|",
    ]
    for c in cases:
        if "runtime_status" in c:
            runtime = verdict(c["runtime_status"], c.get("runtime_flags", []))
        else:
            runtime = c.get("runtime_note", "not run")
        if c.get("kind") == "property":
            default = "ok from `evaluate`; fails `check_candidate`"
            if c.get("property_flags"):
                default += f" (`{', '.join(c['property_flags'])}`)"
        else:
            default = verdict(c["status"], c.get("flags", []))
        backends = c.get("backends", ["cpu"])
        where = "" if backends == ["cpu"] else f" ({', '.join(backends)})"
        rows.append(
            f"| `{c['name']}` | {c['hack']}{where} | {default} | {runtime} | {c['caught']} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
