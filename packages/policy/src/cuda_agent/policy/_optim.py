"""PolicyOptimizer: AdamW over a policy's trainable parameters, stepped through accelerate.

The same training code runs on one device and on several processes (``accelerate launch`` /
``torchrun``: DDP-style data parallelism). The policy's model is not wrapped in
``DistributedDataParallel``, because `Policy.token_logprobs` runs the decoder and the chunked
vocabulary head itself (never the model's full-logits forward, which DDP would require to sync);
instead ``step`` averages the gradients of the trainable parameters across processes, in one
flat all-reduce, before clipping and stepping. For LoRA that is a few MB per step. That is
exactly what DDP computes (the mean of the per-process gradients), without its overlap of
communication and backward.

On a sharded policy (`Policy.shard()`, FSDP2) the parameters are DTensor shards, and FSDP has
already averaged the gradients in the backward (a reduce-scatter): ``step`` then only computes
the global gradient norm (each process's shard norms, summed in one all-reduce), clips and
steps each process's shards.

One step, with per-process losses L_p over P processes::

    g = (1/P) * sum_p grad L_p          # all-reduce mean (P = 1: no communication)
    g <- g * min(1, max_grad_norm / ||g||_2)
    theta <- AdamW(theta, g)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from cuda_agent.policy._sharding import is_sharded


class PolicyOptimizer:
    """AdamW over ``parameters``, through an ``accelerate.Accelerator``.

    Usage per step: ``opt.backward(loss)`` for each micro-batch (gradients accumulate), then
    ``stats = opt.step()`` (syncs, clips, steps, zeroes the gradients). ``accelerator``: one of
    your own (else a new ``Accelerator(cpu=cpu)``, which reads the launcher's environment).
    """

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        max_grad_norm: float | None = 1.0,
        accelerator: Any = None,
        cpu: bool = False,
    ) -> None:
        self.parameters = [p for p in parameters if p.requires_grad]
        if not self.parameters:
            raise ValueError("no trainable parameters: nothing for the optimizer to update")
        if lr <= 0 or (max_grad_norm is not None and max_grad_norm <= 0):
            raise ValueError(
                f"need lr > 0 and max_grad_norm > 0 (or None); got {lr}, {max_grad_norm}"
            )
        self.accelerator = accelerator if accelerator is not None else _accelerator(cpu)
        self._sharded = any(is_sharded(p) for p in self.parameters)
        if self._sharded and getattr(self.accelerator, "scaler", None) is not None:
            raise ValueError(
                "fp16 loss scaling (accelerate mixed_precision='fp16') is not supported on a "
                "sharded policy; use a bf16 model, or do not shard"
            )
        self.max_grad_norm = max_grad_norm
        optimizer = torch.optim.AdamW(
            self.parameters, lr=lr, weight_decay=weight_decay, betas=betas, eps=eps
        )
        # The optimizer's state stays with the parameters (the policy placed them).
        self.optimizer = self.accelerator.prepare_optimizer(optimizer, device_placement=False)

    @property
    def num_processes(self) -> int:
        return int(self.accelerator.num_processes)

    def set_lr(self, lr: float) -> None:
        """The learning rate of the steps that follow (a schedule sets it before each step)."""
        if not lr >= 0:
            raise ValueError(f"need lr >= 0; got {lr}")
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate the gradients of ``loss`` (call once per micro-batch)."""
        self.accelerator.backward(loss)

    def step(self) -> dict[str, float]:
        """Average gradients across processes, clip, step, zero. Returns ``grad_norm`` (before
        clipping) and ``lr``."""
        if self.num_processes == 1 and all(p.grad is None for p in self.parameters):
            # (Several processes: one whose share had no tokens still takes part in the
            # others' gradient average, with zeros.)
            raise RuntimeError("step() before any backward(): no gradients to apply")
        norm = self._clip_sharded() if self._sharded else self._clip()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"grad_norm": float(norm), "lr": float(self.optimizer.param_groups[0]["lr"])}

    def _clip(self) -> torch.Tensor:
        if self.num_processes > 1:
            self._all_reduce_mean()
        if self.max_grad_norm is not None:
            # accelerate's clip unscales first when it runs fp16 with a gradient scaler.
            norm = self.accelerator.clip_grad_norm_(self.parameters, self.max_grad_norm)
        else:
            # After the all-reduce: the norm of the gradient that is applied, as when clipping.
            grads = [p.grad.float() for p in self.parameters if p.grad is not None]
            norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(g) for g in grads])
            )
        return norm

    def _clip_sharded(self) -> torch.Tensor:
        """||g||_2 over every shard of every process, then g <- g * min(1, max / ||g||)."""
        import torch.distributed as dist

        grads = [p.grad for p in self.parameters if p.grad is not None]
        local = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
        squares = torch.zeros((), dtype=torch.float32, device=local[0].device)
        for g in local:
            squares += g.float().pow(2).sum()
        dist.all_reduce(squares)
        norm = squares.sqrt()
        if self.max_grad_norm is not None:
            scale = min(1.0, self.max_grad_norm / (float(norm) + 1e-6))
            for g in local:
                g.mul_(scale)
        return norm

    def _all_reduce_mean(self) -> None:
        """Every process's gradients replaced by their mean, in one flat collective. A
        parameter with no gradient on a process counts as zero there."""
        grads = []
        for p in self.parameters:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        flat = torch.cat([g.reshape(-1).float() for g in grads])
        flat = self.accelerator.reduce(flat, reduction="mean")
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


def _accelerator(cpu: bool) -> Any:
    """``Accelerator(cpu=cpu)``; cpu=True for a CPU policy, so that several CPU processes reduce
    over gloo. accelerate keeps one state per process: if it was already made for a GPU (say a
    GPU policy came first in this process), a CPU policy shares it (one process: nothing to
    reduce)."""
    from accelerate import Accelerator

    try:
        return Accelerator(cpu=cpu)
    except ValueError:
        return Accelerator()
