"""Sharded data parallelism (FSDP2, `torch.distributed.fsdp.fully_shard`) for a policy.

The layout:
- Each decoder layer is one FSDP unit: its weights and its LoRA weights are gathered for its
  forward and backward, then sharded again.
- Everything else (embeddings, final norm, vocabulary head; tied or not) belongs to one root
  unit, `ShardedRoot`.

The root is not the transformers model, for this reason. `Policy.token_logprobs` calls the
decoder and the chunked head separately, so that it never builds a [B, T, vocab] tensor, and so
it never calls the model's `forward`. FSDP2 gathers a unit's weights in hooks on that unit's
`forward`. `ShardedRoot.forward(fn, *args)` runs `fn(*args)` between the root's hooks, so the
embeddings and the head are gathered for the whole computation, and their gradients are
reduce-scattered after the backward.

Mixed precision: parameters are gathered in the model's dtype, so float32 LoRA weights on a
bf16 model compute in bf16, as under `adapter_autocast`. Gradients are reduced in float32.
Gradients are averaged over the processes, as DDP and `PolicyOptimizer` do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class ShardedRoot(nn.Module):
    """The FSDP root around a transformers model; `forward(fn, *args)` returns `fn(*args)`."""

    def __init__(self, hf_model: nn.Module) -> None:
        super().__init__()
        self.hf_model = hf_model

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` through the root's hooks. FSDP keeps the root's weights gathered after
        its forward, for the backward; without autograd recording there is no backward, so
        they are sharded again here. Otherwise the module would keep the gathered tensors as
        its parameters, and an optimizer made then would hold those, not the shards."""
        out = self(fn, *args)
        if not torch.is_grad_enabled():
            self.reshard()  # type: ignore[operator]  # FSDPModule.reshard, added by fully_shard
        return out


def decoder_layers(hf_model: Any) -> list[nn.Module]:
    """The model's repeated blocks: modules of the classes transformers keeps whole when it
    splits a model (`_no_split_modules`), else the decoder's `layers`."""
    names = set(getattr(hf_model, "_no_split_modules", None) or ())
    layers = [m for m in hf_model.modules() if type(m).__name__ in names]
    if not layers:
        layers = list(getattr(hf_model.get_decoder(), "layers", []))
    if not layers:
        raise ValueError(
            f"cannot find the decoder layers of {type(hf_model).__name__} to shard "
            "(no _no_split_modules and no decoder.layers)"
        )
    return layers


def shard(hf_model: Any, device: torch.device) -> ShardedRoot:
    """Apply FSDP2 to `hf_model` in place over the default process group; return the root.

    The process group must exist (torchrun / accelerate launch, then
    `torch.distributed.init_process_group` or any `accelerate.Accelerator()`).
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "Policy.shard() needs a torch.distributed process group: start the processes with "
            "torchrun or accelerate launch, and make an accelerate.Accelerator() (or call "
            "torch.distributed.init_process_group) first"
        )
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    dtype = hf_model.dtype
    mixed = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for layer in decoder_layers(hf_model):
        fully_shard(layer, mesh=mesh, mp_policy=mixed)
    root = ShardedRoot(hf_model)
    fully_shard(root, mesh=mesh, mp_policy=mixed)
    return root


def is_sharded(parameter: torch.Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(parameter, DTensor)


def full_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer gathered whole, on the CPU (collective: all ranks call it;
    only rank 0 gets the tensors, the others an empty dict)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(module, options=options)
    return {key: value for key, value in state.items() if isinstance(value, torch.Tensor)}
