"""The tables a person reads from a ``learning.json`` (``train_report.py --learning``), as
Markdown: for each held-out set the warm start, RL and the SFT-only control side by side with
their 95% intervals, the paired gains (marked * where the interval excludes zero) and where the
tasks went (``right_of_n``: tasks by right answers of n). Presentation only: every figure is
read from the file, none is computed here.

    python benchmarks/learning_tables.py LEARNING.json [--out TABLES.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SETS = ("heldout_compositions", "heldout_ops", "kernelbench_l1_subset")
ROWS = (
    ("pass_at_1", "pass@1"),
    ("fast_1_at_1", "faster than eager, per sample"),
    ("fast_1", "faster than eager, any sample"),
)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _side(block: Mapping[str, Any], metric: str) -> str:
    """``42.2% [28.1, 56.2]``: a side's figure with its interval; ``-`` where it has none."""
    if metric not in block:
        return "-"
    low, high = (block.get("ci95") or {}).get(metric, (None, None))
    shown = _pct(block[metric])
    return shown if low is None else f"{shown} [{100 * low:.1f}, {100 * high:.1f}]"


def _gain(gain: Mapping[str, Any], metric: str) -> str:
    """``+7.8 [+2.3, +14.8] *``: a paired gain in points, * where its interval excludes 0."""
    if metric not in gain:
        return "-"
    low, high = gain["ci95_low"][metric], gain["ci95_high"][metric]
    mark = " *" if gain["significant"][metric] else ""
    return f"{100 * gain[metric]:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]{mark}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def set_tables(name: str, block: Mapping[str, Any]) -> list[str]:
    """One held-out set's tables (``block``: a per-set block of ``learning.json``)."""
    control = block.get("control_sft_only")
    sides = [("warm start", block["after_warmstart"]), ("RL", block["after_rl"])]
    if control:
        sides.append(("control (SFT only)", control["after_sft"]))
    lines = [f"### {name} ({block['tasks']} tasks, {block['samples']} samples each)", ""]
    lines += _table(
        ["", *(label for label, _ in sides)],
        [[label, *(_side(side, m) for _, side in sides)] for m, label in ROWS],
    )
    gains = [("RL over the warm start", block["gain"])]
    if control:
        gains += [
            ("control over the warm start", control["gain"]),
            ("RL over the control", block["rl_over_control"]),
        ]
    lines += ["", *_table(["gain, points", *(label for _, label in ROWS)],
                          [[label, *(_gain(g, m) for m, _ in ROWS)] for label, g in gains])]  # fmt: skip
    moved = [("RL", block.get("right_of_n"))]
    if control:
        moved.append(("control", control.get("right_of_n")))
    moved = [(label, m) for label, m in moved if m]
    if moved:
        n = moved[0][1]["samples"]
        rows = [["warm start", *map(str, moved[0][1]["before"])]]
        rows += [[label, *map(str, m["after"])] for label, m in moved]
        lines += ["", *_table([f"tasks by right answers of {n}", *map(str, range(n + 1))], rows)]
        for label, m in moved:
            steps = ", ".join(
                f"`{k}` x{v}" for k, v in m["moves"].items() if len(set(k.split("->"))) == 2
            )
            lines.append(
                f"\n{label}: {m['up']} tasks up, {m['down']} down, {m['same']} the same"
                + (f" ({steps})" if steps else "")
                + "."
            )
    return lines


def tables(learning: Mapping[str, Any]) -> str:
    """Every held-out set's tables, after a line of the run's facts."""
    facts = [
        f"{learning.get('rl_steps', '?')} RL steps",
        f"{learning.get('training_s', 0):.0f} training seconds",
        f"{learning.get('device_calls', '?')} device calls",
        str(learning.get("gpu", "")),
        f"torch {learning.get('torch', '?')}",
        f"commit {str(learning.get('commit', '?'))[:7]}",
    ]
    control = learning.get("control_sft_only")
    if isinstance(control, Mapping):
        facts.append(
            f"control: {control.get('warmstart_steps', '?')} supervised steps in "
            f"{control.get('training_s', 0):.0f} s"
        )
    lines = [", ".join(f for f in facts if f) + ".", ""]
    found = [s for s in SETS if isinstance(learning.get(s), Mapping)]
    if not found:
        raise ValueError("no per-set block (heldout_compositions, ...): is it a learning.json?")
    for name in found:
        lines += [*set_tables(name, learning[name]), ""]
    lines.append("Intervals: 95% bootstrap over tasks (gains paired); * the interval excludes 0.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("learning", type=Path, help="a learning.json (train_report.py)")
    parser.add_argument("--out", type=Path, help="write the tables here too")
    args = parser.parse_args(argv)
    try:
        text = tables(json.loads(args.learning.read_text()))
    except (OSError, ValueError, KeyError) as exc:
        print(f"learning_tables: {args.learning}: {exc!r}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
