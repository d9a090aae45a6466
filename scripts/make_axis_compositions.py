"""Make the axis compositions shipped with cuda-agent-data (``axis_compositions``).

    python scripts/make_axis_compositions.py WORK_DIR --kernelbench KB [--count 120]
        [--seed 3] [--workers 2]
    python scripts/make_axis_compositions.py WORK_DIR --kernelbench KB --heldout
        [--count 48] [--seed 4]

Training compositions that reduce or normalise along the axis an integer constructor argument
names, as KernelBench's level-1 reductions and softmax-like problems do
(``compose(axes=True)``: ``torch.sum(x, dim=self.dim)``, ``torch.argmax(x, dim=self.dim)``,
``torch.softmax(x, dim=self.dim)``
on a 2-D or 3-D input, any axis but the batch's), beside elementwise operators: ``cuda-agent synth --backend cpu --seed 3 --teachable --axes
--max-ops 3``, with the synth command's own rules (no operator combination of a shipped
held-out set, nothing 0.9 similar to a held-out task or a KernelBench problem) and one more:
no chain of one axis op alone (``sum_dim``, ``softmax_dim``), the operator a KernelBench
problem is (``L1_47_Sum_reduction_over_a_dimension``, ``L1_23_Softmax``): every task composes
it with another operator.

Every kept task's C solution was judged correct by the CPU sandbox (the ``solution`` filter);
its compact CUDA solution (a thread per output for a middle axis and for an index on any;
for the last axis, a block per row for a reduction, a warp per row for a normalisation) and,
for a last-axis reduction (not an index), its warp-per-row variant are written by
``data.solutions.cuda_solution`` and have not been judged here (no GPU).

``--heldout`` makes their held-out counterpart (``heldout_axis_compositions``, for evaluation
only, never trained on): the same generator and rules, another seed, and no operator
combination of any training set of ``runner.task_sets.TRAINING_SETS`` (``synth-axes``
included) nor anything 0.9 similar to a training task, as ``make_heldout_compositions.py``
does for the held-out compositions.

``synthesize`` works in ``WORK_DIR`` (rerun to resume); the kept tasks, their manifest rows
and the report are then copied into the package's ``embedded/axis_compositions`` (or
``embedded/heldout_axis_compositions``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from importlib import resources
from pathlib import Path

from cuda_agent.data import compose, load_kernelbench, synthesize
from cuda_agent.data.catalogue import catalogue
from cuda_agent.data.solutions import cuda_solution, has_reduction
from cuda_agent.runner.task_sets import TRAINING_SETS, heldout_guard, load_set

MAX_OPS = 3


def training_guard() -> tuple[set[str], dict[str, str]]:
    """The families and sources of every training set (their manifests' families where they
    have one, as ``family_of`` reads a hand-written task otherwise)."""
    from cuda_agent.data import family_of, load_embedded

    families: set[str] = set()
    sources: dict[str, str] = {}
    for name in ("cpu_compositions", "axis_compositions"):
        families |= {e.family for e in load_embedded(name).entries}
    for name in TRAINING_SETS:
        for task in load_set(name):
            sources[task.name] = task.source
            if not name.startswith("synth"):
                families.add(family_of(task))
    return families, sources


def draw(seed: int, index: int):
    """The composition ``synthesize`` drew as candidate ``index``."""
    return compose(random.Random(f"{seed}:{index}"), index, MAX_OPS, teachable=True, axes=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--kernelbench", required=True)
    parser.add_argument("--heldout", action="store_true", help="the held-out counterpart")
    parser.add_argument("--count", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    count = args.count or (48 if args.heldout else 120)
    seed = args.seed if args.seed is not None else (4 if args.heldout else 3)
    name = "heldout_axis_compositions" if args.heldout else "axis_compositions"
    # (not the held-out axis set: it is made from this one, after it, and is not kept clear
    # of itself)
    families, heldout = heldout_guard(leave_out=["heldout_axis_compositions"])
    alone = {op.family_name for op in catalogue().values() if op.axis}  # one axis op alone
    against = {
        "heldout": heldout,
        "kernelbench": {t.name: t.source for t in load_kernelbench(args.kernelbench)},
    }
    if args.heldout:
        trained, against["training"] = training_guard()
        families |= trained
    report = synthesize(
        args.work, count, backend="cpu", max_ops=MAX_OPS, seed=seed,
        workers=args.workers, teachable=True, axes=True, against=against,
        exclude_families=families | alone,
        progress=lambda kept, seen: print(f"kept {kept} of {seen}", flush=True),
    )  # fmt: skip
    print(json.dumps(report.to_dict(), indent=2))
    rows = [json.loads(x) for x in (args.work / "manifest.jsonl").read_text().splitlines()]
    kept = [r for r in rows if r["kept"]]
    into = Path(str(resources.files("cuda_agent.data") / "embedded" / name))
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for row in kept:
        comp = draw(seed, row["index"])
        assert comp.source == (args.work / comp.name / "task.py").read_text(), comp.name
        shutil.copytree(args.work / comp.name, into / comp.name)
        (into / comp.name / "solution_cuda_compact.py").write_text(cuda_solution(comp))
        if has_reduction(comp):
            (into / comp.name / "solution_cuda_warp.py").write_text(cuda_solution(comp, "warp"))
    (into / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    shutil.copy(args.work / "synth_report.json", into / "synth_report.json")
    print(f"{len(kept)} tasks in {into}")


if __name__ == "__main__":
    main()
