"""What the processes of one data-parallel update must agree on (torchrun / accelerate launch).

Each process holds its own share of the batch. A sharded policy (FSDP2) gathers weights in
every forward and reduces gradients in every backward, and the optimizer step reduces the
gradient norm, so every process must run the same number of each, and all of them must decide
alike whether to step. `update` asks this module:
- how many micro-batches the largest share needs (the others run empty ones, which take part
  in the collectives and add nothing),
- the batch's denominators over all processes (its kept tokens and sequences), and
- whether any process found the update out of bounds (then every process skips it).

The gradients are averaged over the W processes (FSDP2's reduce-scatter, or
`PolicyOptimizer`'s all-reduce), so a process's loss is scaled by W:

    loss_r = W * sum_{tokens of r} l / N,      N = sum_r N_r
    mean_r grad(loss_r) = grad(sum_{all tokens} l) / N

which is the gradient of the whole batch's token mean, as one process would compute it.
With one process every function here returns its input.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def world_size() -> int:
    """The processes of the default process group (1 without one)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _reduce(values: Sequence[float], op: str, device: torch.device) -> list[float]:
    if world_size() == 1:
        return list(values)
    import torch.distributed as dist

    # NCCL reduces CUDA tensors only; gloo, CPU ones.
    where = device if dist.get_backend() == "nccl" else torch.device("cpu")
    tensor = torch.tensor(list(values), dtype=torch.float64, device=where)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return [float(v) for v in tensor.cpu()]


def total(values: Sequence[float], device: torch.device) -> list[float]:
    """Each value summed over the processes."""
    return _reduce(values, "sum", device)


def largest(values: Sequence[int], device: torch.device) -> list[int]:
    """Each value's largest over the processes."""
    return [int(v) for v in _reduce([float(v) for v in values], "max", device)]


def anyone(flag: bool, device: torch.device) -> bool:
    """True when ``flag`` is true on any process."""
    return largest([int(flag)], device)[0] > 0
