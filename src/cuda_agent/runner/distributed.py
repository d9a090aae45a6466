"""One training job over the N processes of ``torchrun --nproc-per-node N -m cuda_agent.runner
train ...`` (or ``accelerate launch -m cuda_agent.runner train ...``): data parallelism.

The launcher's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``; accelerate launch sets
the same) says how many processes there are; ``setup`` then makes the process group (gloo for
a CPU policy, NCCL for a CUDA one on ``cuda:LOCAL_RANK``). Without it, or with one process,
nothing here communicates and the trainer runs as it always has.

What the processes share:
- every process computes the same step's task list from the seed (``stages.rollouts``) and
  takes its contiguous part of it (``share``), collects its episodes on its own sandbox and
  updates on them; the whole step's episodes are gathered (``gather``) for its statistics,
  so a step's record is the one a single process would write;
- the policy is replicated (the LoRA weights and the optimizer's state are the same on every
  process); the update agrees on micro-batch counts, denominators and skips and averages the
  gradients (``collective.py``), so it is the one a single process makes on the whole batch;
- rank 0 alone writes: ``metrics.jsonl``, TensorBoard, checkpoints, ``state.json``, the rft
  episodes, the merged evaluations, the adapter, the summary and the report. Every process
  reads the same state (rank 0's, broadcast) and the same checkpoint on resume.
- every decision that ends or skips work (the deadline, the training budget) is agreed:
  when any process would stop, all stop together, so none waits for ever in a collective.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TypeVar

import torch

from .run_lock import stop_with_launcher

T = TypeVar("T")


def launched_world() -> int:
    """The processes the launcher started (``WORLD_SIZE``; 1 when not launched)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def _dist() -> Any:
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def world_size() -> int:
    dist = _dist()
    return dist.get_world_size() if dist is not None else 1


def rank() -> int:
    dist = _dist()
    return dist.get_rank() if dist is not None else 0


def is_main() -> bool:
    """Whether this process writes the run's files (rank 0, or the only process)."""
    return rank() == 0


def setup(device: str) -> str:
    """Join the launcher's process group when there are several processes; returns the policy
    device for this process (``cuda:LOCAL_RANK`` for a CUDA policy, else ``device``).

    A CPU policy (``device = "cpu"``, or no GPU visible) reduces over gloo; a CUDA one over
    NCCL. The group is made through accelerate (``PartialState``), so that the optimizer's
    ``Accelerator`` sees the same processes."""
    if launched_world() <= 1:
        return device
    # the launcher's workers are in sessions of their own: killing the launcher leaves them
    # running the job beside its resumption, unless they end with it (``run_lock``)
    stop_with_launcher()
    cuda = device != "cpu" and torch.cuda.is_available()
    if cuda:
        device = f"cuda:{local_rank()}"
        torch.cuda.set_device(local_rank())
    if _dist() is None:
        from accelerate import PartialState

        PartialState(cpu=not cuda)
    if _dist() is None:  # accelerate chose not to (an unusual environment): gloo / NCCL
        import torch.distributed as dist

        dist.init_process_group("nccl" if cuda else "gloo")
    return device


def shutdown() -> None:
    dist = _dist()
    if dist is not None:
        dist.destroy_process_group()


def leave(code: int = 0) -> NoReturn:
    """End this process at once with ``code``: stdout and stderr flushed, then ``os._exit``,
    past the interpreter's teardown. For a process whose work is written and whose process
    group is destroyed, after a policy sharded over gloo (``Policy.shard()`` on the CPU): in
    that teardown about one process in 20 under load (torch 2.11, 2 cores) aborted with
    "terminate called without an active exception" (a native thread destroyed while
    joinable, no Python frame), failing a finished run. ``atexit`` handlers do not run, so
    close pools and writers first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def check(config: Any) -> None:
    """Refuse, before any work, a configuration that several processes cannot share: steps
    that would leave a process nothing (each step's tasks are split over the processes, a
    task's episodes staying together), or a Ray cluster of its own per process (``local``)."""
    world = launched_world()
    if world <= 1:
        return
    if (config.steps or config.rl_warmup_steps) and config.tasks_per_step < world:
        raise ValueError(
            f"--tasks-per-step {config.tasks_per_step} is fewer than the {world} processes: "
            "each process collects whole tasks' episodes; give at least one task each"
        )
    if config.ray_address == "local":
        raise ValueError(
            f"--ray-address local would start a Ray cluster in each of the {world} processes: "
            "start one (`ray start --head`) and give its address, or 'auto' for the one "
            "running on this machine"
        )
    if config.rft_tasks and config.rft_steps and config.rft_tasks < world:
        raise ValueError(
            f"--rft-tasks {config.rft_tasks} is fewer than the {world} processes: give at least "
            "one task each"
        )


def sandbox_share(
    backend: str, workers: int, lanes: int | str, on_ray: bool = False
) -> dict[str, Any]:
    """The sandbox's ``workers`` and ``lanes_per_gpu`` for this process. Several processes on
    CUDA: one device each, this process's GPU (``LOCAL_RANK``; its workers are told to see it
    alone through ``CUDA_VISIBLE_DEVICES``, set here after this process's own CUDA start). On
    the CPU: each its share of the automatic lanes. On Ray, or alone: as given."""
    world = launched_world()
    if world <= 1 or on_ray:
        return {"workers": workers, "lanes_per_gpu": lanes}
    if backend == "cuda" or (backend == "auto" and torch.cuda.is_available()):
        visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
        here = local_rank()
        os.environ["CUDA_VISIBLE_DEVICES"] = visible[here % len(visible)] if visible else str(here)
        return {"workers": 1, "lanes_per_gpu": lanes}
    if lanes == "auto" and not workers:
        lanes = max(1, (os.cpu_count() or 2) // 2 // world)
    return {"workers": workers, "lanes_per_gpu": lanes}


def synchronize(parameters: Sequence[torch.nn.Parameter]) -> None:
    """Rank 0's values of ``parameters`` on every process (the replicated policy and critic
    start alike even where initialisation is not bitwise reproducible across devices)."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return
    with torch.no_grad():
        for p in parameters:
            if dist.get_backend() == "nccl" or p.device.type == "cpu":
                dist.broadcast(p.data, src=0)
            else:  # gloo reduces CPU tensors only
                data = p.data.cpu()
                dist.broadcast(data, src=0)
                p.data.copy_(data)


# ------------------------------------------------------------------------ splitting the work
def bounds(count: int) -> tuple[int, int]:
    """This process's part ``[start, end)`` of ``count`` items: contiguous, in rank order, the
    first ``count % W`` processes one more."""
    world, me = world_size(), rank()
    base, extra = divmod(count, world)
    start = me * base + min(me, extra)
    return start, start + base + (1 if me < extra else 0)


def share(items: Sequence[T]) -> list[T]:
    """This process's part of ``items`` (``bounds``); all of them with one process."""
    start, end = bounds(len(items))
    return list(items[start:end])


# ------------------------------------------------------------------------ communication
def gather(obj: T) -> list[T]:
    """Every process's ``obj``, in rank order, on every process (``[obj]`` with one)."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj: T) -> T:
    """Rank 0's ``obj`` on every process."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return obj
    box: list[Any] = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def anyone(flag: bool) -> bool:
    """True on every process when ``flag`` is true on any."""
    return any(gather(bool(flag)))


def barrier() -> None:
    dist = _dist()
    if dist is not None and dist.get_world_size() > 1:
        dist.barrier()


# ------------------------------------------------------------------------ statistics
def explained_variance(
    values_bt: torch.Tensor, returns_bt: torch.Tensor, mask_bt: torch.Tensor
) -> float:
    """``1 - Var[R - V] / Var[R]`` over every process's kept tokens (population variances, as
    ``rl_core.explained_variance``; NaN when the returns do not vary)."""
    kept = mask_bt.bool()
    r = returns_bt.double()[kept]
    e = r - values_bt.double()[kept]
    local = [float(kept.sum()), float(r.sum()), float((r * r).sum()), float(e.sum()),
             float((e * e).sum())]  # fmt: skip
    n, sr, srr, se, see = (sum(col) for col in zip(*gather(local), strict=True))
    if n == 0:
        return float("nan")
    var_r = srr / n - (sr / n) ** 2
    var_e = see / n - (se / n) ** 2
    return 1.0 - var_e / var_r if var_r > 1e-12 else float("nan")


def whitened(advantages_bt: torch.Tensor, mask_bt: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``rl_core.batch_normalized_advantages`` over every process's kept tokens: GAE's
    advantages whitened by the whole batch's mean and standard deviation (one process: that
    function itself)."""
    from cuda_agent.rl_core import batch_normalized_advantages

    if world_size() == 1:
        return batch_normalized_advantages(advantages_bt, mask_bt, eps=eps)
    kept = mask_bt.bool()
    values = torch.where(kept, advantages_bt.detach(), 0).double()
    count, total = (
        sum(c) for c in zip(*gather([float(kept.sum()), float(values.sum())]), strict=True)
    )
    mean = total / max(count, 1.0)
    centred = torch.where(kept, values - mean, 0)
    squares = sum(gather(float(centred.square().sum())))
    std = (squares / max(count, 1.0)) ** 0.5
    return (centred / (std + eps)).to(advantages_bt.dtype)


def value_fit(values_bt: torch.Tensor, returns_bt: torch.Tensor, mask_bt: torch.Tensor) -> float:
    """The critic's explained variance over every process's tokens (one process: as
    ``loss.value_fit``)."""
    if world_size() == 1:
        from cuda_agent.rl_core import explained_variance as one_process

        return float(one_process(values_bt.detach(), returns_bt, mask_bt))
    return explained_variance(values_bt, returns_bt, mask_bt)


_TOKEN_MEANS = ("clip_fraction", "kl", "entropy")
_ROW_MEANS = ("ratio_mean", "ratio_mismatch_kl", "ratio_fraction_above")


def merge_update_records(records: Sequence[dict[str, Any]], weights: Sequence[int]) -> dict:
    """One record from every process's ``update.update`` record, as one process would write it
    for the whole batch: token counts and the value loss (each process's share of the whole
    batch's loss) summed; token means weighted by the processes' trained tokens; ratio means
    by ``weights`` (each process's micro-batches); the largest ratio, the smallest effective
    sample size. Agreed fields (grad norm, updates, skips, GAE's explained variance: over
    every process's tokens, ``value_fit``) are rank 0's."""
    present = [r for r in records if r]
    if len(present) <= 1:
        return dict(present[0]) if present else {}
    out = dict(present[0])
    tokens = [float(r.get("trained_tokens", 0)) for r in present]
    total_tokens = sum(tokens)
    out["trained_tokens"] = int(total_tokens)
    for key in _TOKEN_MEANS:
        if key in out:
            num = sum(float(r.get(key, 0.0)) * t for r, t in zip(present, tokens, strict=True))
            out[key] = num / total_tokens if total_tokens else 0.0
    if "value_loss" in out:
        out["value_loss"] = sum(float(r.get("value_loss", 0.0)) for r in present)
    with_ratios = [(r, w) for r, w in zip(records, weights, strict=True) if "ratio_max" in r]
    if with_ratios:
        out["ratio_max"] = max(r["ratio_max"] for r, _ in with_ratios)
        out["ratio_ess"] = min(r["ratio_ess"] for r, _ in with_ratios)
        count = sum(w for _, w in with_ratios) or 1
        for key in _ROW_MEANS:
            out[key] = sum(r[key] * w for r, w in with_ratios) / count
    # one reason per skipped update (the skips are agreed): the process whose share tripped
    lists = [r.get("skip_reasons", []) for r in present]
    out["skip_reasons"] = [
        next((x for x in options if "another process" not in x), options[0])
        for options in zip(*lists, strict=False)
    ]
    return out
