"""Make the held-out compositions shipped with cuda-agent-data (``heldout_compositions``).

    python scripts/make_heldout_compositions.py WORK_DIR --kernelbench KB [--count 96]
        [--seed 2] [--workers 2]
    python scripts/make_heldout_compositions.py --small-sizes [--seed 2]

The same generator and distribution as the training compositions (``cpu_compositions``:
``cuda-agent synth --backend cpu --seed 1 --teachable --max-ops 3``), another seed, and two
more rules: no operator combination (``data`` family) of any training set of
``runner.task_sets.TRAINING_SETS`` or of the built-in held-out tasks is drawn, and no task 0.9
similar (``data.similarity``) to a training task, a built-in held-out task or a KernelBench
problem is kept. Every kept task's C solution was judged correct by the CPU sandbox (the
``solution`` filter); its compact CUDA solution is written by ``data.solutions.cuda_solution``
as the training ones are, and has not been judged here (no GPU).

``synthesize`` works in ``WORK_DIR`` (rerun to resume); the kept tasks, their manifest rows
and the report are then copied into the package's ``embedded/heldout_compositions``.

``--small-sizes`` only adds each shipped row's ``small_sizes`` (``Composition.small_sizes``,
as the training compositions' manifest has them; the rows were written before that field
existed): each composition is drawn again from its seed and index and must give the shipped
``task.py`` exactly. The runner's ``--eval-sizes small`` evaluates the tasks at them.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from importlib import resources
from pathlib import Path

from cuda_agent.data import compose, family_of, load_embedded, load_kernelbench, synthesize
from cuda_agent.data.solutions import cuda_solution
from cuda_agent.kernel_sandbox import builtin_tasks
from cuda_agent.runner.task_sets import HELDOUT, TRAINING_SETS, load_set

MAX_OPS = 3


def training_guard() -> tuple[set[str], dict[str, str]]:
    """The families and sources of every training set and of the built-in held-out tasks."""
    families: set[str] = {e.family for e in load_embedded("cpu_compositions").entries}
    sources: dict[str, str] = {}
    for name in TRAINING_SETS:
        for task in load_set(name):
            sources[task.name] = task.source
            if name != "synth":
                families.add(family_of(task))
    heldout = [t for t in builtin_tasks() if t.name in HELDOUT]
    families |= {family_of(t) for t in heldout}
    return families, sources


def embedded_dir() -> Path:
    return Path(str(resources.files("cuda_agent.data") / "embedded" / "heldout_compositions"))


def add_small_sizes(seed: int) -> None:
    """Each shipped manifest row with its composition's ``small_sizes`` (module docstring)."""
    into = embedded_dir()
    rows = [json.loads(x) for x in (into / "manifest.jsonl").read_text().splitlines()]
    for row in rows:
        comp = compose(random.Random(f"{seed}:{row['index']}"), row["index"], MAX_OPS,
                       teachable=True)  # fmt: skip
        if comp.source != (into / row["name"] / "task.py").read_text():
            raise SystemExit(f"{row['name']}: seed {seed} does not draw the shipped task")
        row["small_sizes"] = comp.small_sizes
    (into / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"small_sizes added to {len(rows)} rows of {into / 'manifest.jsonl'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path, nargs="?")
    parser.add_argument("--kernelbench")
    parser.add_argument("--count", type=int, default=96)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--small-sizes", action="store_true", help="only add small_sizes")
    args = parser.parse_args()
    if args.small_sizes:
        add_small_sizes(args.seed)
        return
    if args.work is None or not args.kernelbench:
        parser.error("WORK_DIR and --kernelbench are needed to make the set")
    families, sources = training_guard()
    heldout = {t.name: t.source for t in builtin_tasks() if t.name in HELDOUT}
    against = {
        "training": {n: s for n, s in sources.items() if n not in heldout},
        "heldout": heldout,
        "kernelbench": {t.name: t.source for t in load_kernelbench(args.kernelbench)},
    }
    report = synthesize(
        args.work, args.count, backend="cpu", max_ops=MAX_OPS, seed=args.seed,
        workers=args.workers, teachable=True, against=against, exclude_families=families,
        progress=lambda kept, seen: print(f"kept {kept} of {seen}", flush=True),
    )  # fmt: skip
    print(json.dumps(report.to_dict(), indent=2))
    rows = [json.loads(x) for x in (args.work / "manifest.jsonl").read_text().splitlines()]
    kept = [r for r in rows if r["kept"]]
    into = embedded_dir()
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for row in kept:
        comp = compose(random.Random(f"{args.seed}:{row['index']}"), row["index"], MAX_OPS,
                       teachable=True)  # fmt: skip
        assert comp.source == (args.work / comp.name / "task.py").read_text(), comp.name
        shutil.copytree(args.work / comp.name, into / comp.name)
        (into / comp.name / "solution_cuda_compact.py").write_text(cuda_solution(comp))
    (into / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    shutil.copy(args.work / "synth_report.json", into / "synth_report.json")
    print(f"{len(kept)} tasks in {into}")


if __name__ == "__main__":
    main()
