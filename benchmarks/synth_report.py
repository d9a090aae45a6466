"""Summarise a ``cuda-agent synth`` directory: the figures of its manifest, as JSON and a PNG.

    python benchmarks/synth_report.py TASKS_DIR OUT.json [--png OUT.png] [--wall-s S]

Yield per filter (in the order the filters run), seconds per candidate and per kept task (from
``synth_report.json``, or ``--wall-s`` for a run made in several parts), the histogram of
operator counts (kept tasks and all candidates), the similarity of kept tasks to their nearest
KernelBench problem, and their eager and compiled times.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections import Counter
from pathlib import Path


def _bins(values: list[float], edges: list[float]) -> dict[str, int]:
    out = {}
    for lo, hi in itertools.pairwise(edges):
        out[f"{lo:g}-{hi:g}"] = sum(lo <= v < hi or (v == hi == edges[-1]) for v in values)
    return out


def summarise(directory: Path, wall_s: float | None) -> dict[str, object]:
    rows = [json.loads(line) for line in (directory / "manifest.jsonl").read_text().splitlines()]
    report = json.loads((directory / "synth_report.json").read_text())
    kept = [r for r in rows if r["kept"]]
    seconds = wall_s if wall_s is not None else report["seconds"]
    similarity = [r["kernelbench_similarity"] for r in kept if "kernelbench_similarity" in r]
    return {
        "candidates": len(rows),
        "kept": len(kept),
        "yield": len(kept) / len(rows),
        "filters": report["filters"],
        "seconds": seconds,
        "seconds_per_candidate": seconds / len(rows),
        "seconds_per_kept_task": seconds / len(kept),
        "op_counts_kept": dict(sorted(Counter(r["n_ops"] for r in kept).items())),
        "op_counts_candidates": dict(sorted(Counter(r["n_ops"] for r in rows).items())),
        "kernelbench_similarity_kept": {
            "max": max(similarity, default=None),
            "median": statistics.median(similarity) if similarity else None,
            "histogram": _bins(similarity, [0, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0]),
        },
        "eager_ms_kept": {
            "median": statistics.median(r["eager_ms"] for r in kept),
            "min": min(r["eager_ms"] for r in kept),
            "max": max(r["eager_ms"] for r in kept),
        },
        "compile_faster_than_eager_kept": sum(r["compile_ms"] < r["eager_ms"] for r in kept)
        / len(kept),
        "families_kept": len({r["family"] for r in kept}),
        "teachable_kept": sum(bool(r.get("teachable")) for r in kept),
    }


def plot(summary: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    counts = summary["op_counts_kept"]
    assert isinstance(counts, dict)
    axes[0].bar([str(k) for k in counts], list(counts.values()))
    axes[0].set(title="operators per kept task", xlabel="operators", ylabel="tasks")
    filters = summary["filters"]
    assert isinstance(filters, dict)
    axes[1].barh(list(filters), [f["dropped"] for f in filters.values()])
    axes[1].set(title="candidates dropped per filter", xlabel="candidates")
    axes[1].invert_yaxis()
    sim = summary["kernelbench_similarity_kept"]
    assert isinstance(sim, dict)
    axes[2].bar(list(sim["histogram"]), list(sim["histogram"].values()))
    axes[2].set(title="similarity to the nearest KernelBench problem (kept)", ylabel="tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--png", type=Path)
    parser.add_argument("--wall-s", type=float)
    args = parser.parse_args()
    summary = summarise(args.directory, args.wall_s)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    if args.png:
        plot(summary, args.png)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
