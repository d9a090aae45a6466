"""What the processes of one data-parallel update must agree on (torchrun / accelerate launch).

Each process holds its own share of the batch. A sharded policy (FSDP2) gathers weights in
every forward and reduces gradients in every backward, and the optimizer step reduces the
gradient norm, so every process must run the same number of each, and all of them must decide
alike whether to step. Every micro-batch loop of the trainer is ``micro_batches`` (the update's, the supervised
steps', the critic's), and the losses ask this module:
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

from collections.abc import Callable, Iterator, Sequence

import torch

from cuda_agent.rl_core import AggregationCounts


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


def chunks(items: Sequence[int], size: int) -> list[list[int]]:
    """``items`` in consecutive parts of ``size`` (the last one shorter)."""
    items = list(items)
    return [items[i : i + size] for i in range(0, len(items), size)]


def padded(groups: list[list[int]], device: torch.device) -> list[list[int]]:
    """``groups``, then empty ones up to the largest count of any process."""
    want = largest([len(groups)], device)[0]
    return groups + [[] for _ in range(want - len(groups))]


def micro_batches(
    rows: Sequence[int], size: int, device: torch.device, idle: Callable[[], object]
) -> Iterator[list[int]]:
    """The trainer's one micro-batch loop: ``rows`` in parts of ``size``, as many parts on every
    process. Where another process has more, ``idle()`` runs in place of a part (a forward on
    nothing and, with gradients, its zero backward: a sharded model's collectives need every
    process) and nothing is yielded."""
    for part in padded(chunks(rows, size), device):
        if part:
            yield part
        else:
            idle()


def global_counts(local: AggregationCounts, device: torch.device) -> AggregationCounts:
    """The denominators over every process's share (``local`` itself with one process)."""
    if world_size() == 1:
        return local
    tokens, sequences = total([float(local.num_tokens), float(local.num_sequences)], device)
    return AggregationCounts(torch.tensor(int(tokens)), torch.tensor(int(sequences)))
