"""A projection of a few rows on the CPU: ``F.linear`` (``x W^T``) against the same product
taken the other way round, ``(W x^T)^T`` (`_decode_setup.turned_product`), which
`narrow_linear` uses for 2 to ``NARROW_ROWS`` rows while the lean static decoder samples.

    python benchmarks/policy/narrow_products.py OUT.json [--rows 1,2,8,16,32,64,600]

The weights are SmolLM2-135M's shapes (out x in): the vocabulary head, the MLP's three, the
attention's query/output and key/value projections. For each shape and row count: the best of
``--repeats`` timed calls of each form (after two untimed ones), the ratio, and the largest
difference of the two results (float summation order).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
from provenance import provenance

from cuda_agent.policy._decode_setup import NARROW_ROWS, turned_product

SHAPES = {  # name: (out, in)
    "vocabulary head": (49152, 576),
    "mlp gate/up": (1536, 576),
    "mlp down": (576, 1536),
    "attention q/o": (576, 576),
    "attention k/v": (192, 576),
}


def best_of(call: Callable[..., torch.Tensor], args: tuple, repeats: int) -> float:
    for _ in range(2):
        call(*args)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rows", default="1,2,8,16,32,64,600")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows_list = [int(r) for r in args.rows.split(",")]
    results = []
    with torch.no_grad():
        for name, (out, inp) in SHAPES.items():
            layer = torch.nn.Linear(inp, out, bias=False)
            for rows in rows_list:
                x = torch.randn(rows, inp)
                plain = best_of(torch.nn.functional.linear, (x, layer.weight), args.repeats)
                # the form itself, also past NARROW_ROWS (where narrow_linear takes F.linear)
                narrow = best_of(turned_product, (layer.weight, x), args.repeats)
                diff = (turned_product(layer.weight, x) - layer(x)).abs().max().item()
                results.append({"weight": name, "shape": [out, inp], "rows": rows,
                                "linear_ms": plain * 1e3, "narrow_ms": narrow * 1e3,
                                "speedup": plain / narrow, "max_abs_diff": diff})  # fmt: skip
                print(f"{name:16} {rows:4} rows: linear {plain * 1e3:8.2f} ms, narrow "
                      f"{narrow * 1e3:8.2f} ms ({plain / narrow:.2f}x)", flush=True)  # fmt: skip
    command = f"python benchmarks/policy/narrow_products.py OUT.json --rows {args.rows}"
    report = {**provenance("narrow_products", command, 0), "threads": torch.get_num_threads(),
              "narrow_rows": NARROW_ROWS, "results": results}  # fmt: skip
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
