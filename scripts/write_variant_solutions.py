"""Write the ``warp`` variant of every shipped composition that reduces a row.

    python scripts/write_variant_solutions.py

Each composition of the two embedded sets (``cpu_compositions``: seed 1; ``heldout_compositions``:
seed 2) is drawn again from its seed and index (it must give the shipped ``task.py`` exactly),
and where its chain has a reduction, ``data.solutions.cuda_solution(c, style="warp")`` is
written beside its compact solution as ``solution_cuda_warp.py`` (a warp per row; the compact
one is a block per row). ``kernel_sandbox.load_task`` reads it as the task's
``variant_solutions["cuda"]["warp"]``; the trainer's ``--warmstart-solutions compact+variants``
teaches both. The held-out ones are for checking only, as their compact solutions are.
"""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path

from cuda_agent.data import compose
from cuda_agent.data.solutions import cuda_solution, has_reduction

SEEDS = {"cpu_compositions": 1, "heldout_compositions": 2}
MAX_OPS = 3


def main() -> None:
    embedded = Path(str(resources.files("cuda_agent.data") / "embedded"))
    for name, seed in SEEDS.items():
        root = embedded / name
        rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
        written = 0
        for row in rows:
            if not row["kept"]:
                continue
            c = compose(random.Random(f"{seed}:{row['index']}"), row["index"], MAX_OPS,
                        teachable=True)  # fmt: skip
            if c.source != (root / c.name / "task.py").read_text():
                raise SystemExit(f"{name}/{c.name}: the drawn task is not the shipped one")
            if has_reduction(c):
                (root / c.name / "solution_cuda_warp.py").write_text(cuda_solution(c, "warp"))
                written += 1
        print(f"{name}: {written} warp variants")


if __name__ == "__main__":
    main()
