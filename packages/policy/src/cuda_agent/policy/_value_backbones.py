"""The critic's backbone: the model under `ValueModel`'s value head, one class per way to build it.

| class            | built by                                    | the critic's own weights       |
|------------------|---------------------------------------------|--------------------------------|
| `OwnAdapter`     | `ValueModel.from_policy`, LoRA policy       | a second LoRA adapter, + head  |
| `SharedBackbone` | `ValueModel.from_policy`, fully fine-tuned  | the head only                  |
| `SeparateModel`  | `ValueModel.separate` / `from_model`        | a model of its own, + head     |

Each says which parameters are the critic's own, under what context its forward runs (the
value adapter active, for `OwnAdapter`), and how its weights are saved and loaded; `ValueModel`
holds the head and does the rest the same way for all three.

`OwnAdapter` shares one `PeftModel` with the policy. peft runs one adapter at a time, so the
critic's forward switches to the value adapter and back (`adapter_active`), and activation
checkpointing must recompute each layer under the adapter its forward used
(`pin_adapters_under_checkpointing`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch
from peft import LoraConfig, PeftModel

from cuda_agent.policy._config import PolicyConfig
from cuda_agent.policy._loading import (
    adapter_parameters,
    requires_grad_flags,
    restore_requires_grad,
)
from cuda_agent.policy._persistence import load_lora_weights

if TYPE_CHECKING:
    from cuda_agent.policy._policy import Policy

ValueKind = Literal["adapter", "shared", "separate"]
"""adapter: own LoRA adapter on the policy's PeftModel; shared: the policy's fully fine-tuned
backbone as is; separate: a model of its own."""

_SEPARATE_MODEL_DIR = "model"
_PINNED_MARK = "_cuda_agent_pins_active_adapter"


# ---------------------------------------------------------------------- adapter switching
@contextmanager
def adapter_active(peft_model: PeftModel, name: str) -> Iterator[None]:
    """Run the block with adapter `name` active, then re-activate the previous adapter.

    peft's `set_adapter` also sets requires_grad (True on the activated adapter, False on every
    other one). Every parameter's requires_grad is snapshotted first and restored right after each
    switch, so callers never see it change: both adapters stay trainable, and a gradient computed
    later still reaches them (autograd drops the gradient of a leaf whose requires_grad is False
    at backward time).
    """
    previous = peft_model.active_adapter
    if previous == name:
        yield
        return
    flags = requires_grad_flags(peft_model)
    peft_model.set_adapter(name)
    restore_requires_grad(flags)
    try:
        yield
    finally:
        peft_model.set_adapter(previous)
        restore_requires_grad(flags)


def _recompute_under_forward_adapter(
    peft_model: PeftModel,
) -> tuple[AbstractContextManager[None], AbstractContextManager[None]]:
    """`context_fn` for torch.utils.checkpoint: called during the forward, it records the adapter
    active then, and has the backward-time recomputation run under that same adapter."""
    return nullcontext(), adapter_active(peft_model, peft_model.active_adapter)


def pin_adapters_under_checkpointing(hf_model: Any, peft_model: PeftModel) -> None:
    """Make activation checkpointing recompute each layer under the adapter of its forward.

    Without this, a layer checkpointed during the critic's forward would be recomputed in the
    backward pass with whichever adapter is active then (the policy's): silently wrong gradients.
    Idempotent; a no-op when checkpointing is off.
    """
    for module in hf_model.modules():
        func = getattr(module, "_gradient_checkpointing_func", None)
        if func is None or getattr(func, _PINNED_MARK, False):
            continue
        if not (
            isinstance(func, functools.partial)
            and func.keywords.get("use_reentrant") is False
            and "context_fn" not in func.keywords
        ):
            if not getattr(module, "gradient_checkpointing", False):
                continue
            raise ValueError(
                "a value adapter next to the policy's needs non-reentrant activation checkpointing "
                "(as Policy enables it: use_reentrant=False, no context_fn) so that recomputation "
                f"runs under the right adapter; got {func!r}"
            )
        pinned = functools.partial(
            func, context_fn=functools.partial(_recompute_under_forward_adapter, peft_model)
        )
        setattr(pinned, _PINNED_MARK, True)
        module._gradient_checkpointing_func = pinned


def add_value_adapter(
    peft_model: PeftModel,
    config: PolicyConfig,
    device: torch.device,
    name: str,
    rank: int,
    alpha: int,
) -> None:
    """Add LoRA adapter `name` to the policy's `peft_model`: the policy's target modules, rank
    `rank`, alpha `alpha`, dropout `config.lora_dropout`, initialisation seeded by
    config.seed + 1. Every other parameter keeps its requires_grad; the new adapter's are True."""
    policy_lora = peft_model.peft_config[peft_model.active_adapter]
    if not isinstance(policy_lora, LoraConfig):
        raise ValueError(
            f"the policy's adapter is {type(policy_lora).__name__}, not LoRA; "
            "use ValueModel.separate(config) instead"
        )
    lora_config = dataclasses.replace(
        policy_lora,
        r=rank,
        lora_alpha=alpha,
        lora_dropout=config.lora_dropout,
        inference_mode=False,
    )
    flags = requires_grad_flags(peft_model)
    with torch.random.fork_rng(devices=[]):  # peft initialises LoRA on the CPU, then moves it
        torch.manual_seed(config.seed + 1)
        peft_model.add_adapter(name, lora_config)
    restore_requires_grad(flags)  # the policy's parameters keep their flags
    for parameter in adapter_parameters(peft_model, name):
        parameter.requires_grad_(True)
    peft_model.to(device)


# ---------------------------------------------------------------------- the backbones
class Backbone:
    """The model under the value head, and what the critic owns of it (see the module table).

    Attributes as `ValueModel` exposes them: `model` (a PeftModel, or the transformers model),
    `tokenizer`, `config`, `device`, `adapter_name`, `lora_rank`, `lora_alpha`.
    """

    kind: ClassVar[ValueKind]
    how_built: ClassVar[str]  # for error messages: how to build a critic of this kind

    def __init__(
        self,
        *,
        model: Any,
        tokenizer: Any,
        config: PolicyConfig,
        device: torch.device,
        adapter_name: str | None,
        lora_rank: int,
        lora_alpha: int,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.device = device
        self.adapter_name = adapter_name
        self.lora_rank = lora_rank
        self.lora_alpha = lora_alpha
        # The transformers model itself (LoRA layers are injected into it in place).
        self.hf_model: Any = model.get_base_model() if isinstance(model, PeftModel) else model

    def own_parameters(self) -> list[torch.nn.Parameter]:
        """The backbone parameters that belong to the critic (the head's come on top)."""
        return []

    def active(self) -> AbstractContextManager[None]:
        """The context the critic's forward runs in."""
        return nullcontext()

    def save_weights(self, path: Path) -> str | None:
        """Write the critic's backbone weights under `path`; return their directory relative to
        `path` (None: nothing written)."""
        return None

    def load_weights(self, directory: Path) -> None:
        """Load what `save_weights` wrote to `directory`."""


class OwnAdapter(Backbone):
    """A LoRA adapter of the critic's own, on the policy's PeftModel next to the policy's."""

    kind = "adapter"
    how_built = "ValueModel.from_policy(policy) with a LoRA policy"

    def __init__(self, peft_model: PeftModel, policy: Policy, name: str, rank: int, alpha: int):
        super().__init__(
            model=peft_model,
            tokenizer=policy.tokenizer,
            config=policy.config,
            device=policy.device,
            adapter_name=name,
            lora_rank=rank,
            lora_alpha=alpha,
        )
        self.peft: PeftModel = peft_model
        self.name = name

    def own_parameters(self) -> list[torch.nn.Parameter]:
        return adapter_parameters(self.peft, self.name)

    def active(self) -> AbstractContextManager[None]:
        pin_adapters_under_checkpointing(self.hf_model, self.peft)
        return adapter_active(self.peft, self.name)

    def save_weights(self, path: Path) -> str | None:
        """peft's layout: `path/<adapter_name>/` holds adapter_config.json and
        adapter_model.safetensors."""
        self.peft.save_pretrained(
            str(path), selected_adapters=[self.name], save_embedding_layers=False
        )
        # peft writes a non-"default" adapter into a sub-directory named after it.
        return self.name if self.name != "default" else "."

    def load_weights(self, directory: Path) -> None:
        if not (directory / "adapter_config.json").is_file():
            raise FileNotFoundError(
                f"{directory / 'adapter_config.json'} not found; expected the value adapter "
                "written by ValueModel.save"
            )
        load_lora_weights(
            self.peft, directory, self.device, adapter_name=self.name, what="value adapter"
        )


class SharedBackbone(Backbone):
    """The fully fine-tuned policy's backbone as is (a shared actor-critic): the value loss's
    gradients reach the backbone, which the policy's optimizer steps and `Policy.save` saves."""

    kind = "shared"
    how_built = "ValueModel.from_policy(policy) with a fully fine-tuned policy"

    def __init__(self, policy: Policy) -> None:
        super().__init__(
            model=policy.model,
            tokenizer=policy.tokenizer,
            config=policy.config,
            device=policy.device,
            adapter_name=None,
            lora_rank=0,
            lora_alpha=0,
        )


class SeparateModel(Backbone):
    """A model of its own, loaded and saved like a policy (LoRA or full fine-tuning per config)."""

    kind = "separate"
    how_built = "ValueModel.separate(config)"

    def __init__(self, owned: Policy) -> None:
        peft_model = owned.model if isinstance(owned.model, PeftModel) else None
        super().__init__(
            model=owned.model,
            tokenizer=owned.tokenizer,
            config=owned.config,
            device=owned.device,
            adapter_name=peft_model.active_adapter if peft_model is not None else None,
            lora_rank=owned.config.lora_rank,
            lora_alpha=owned.config.lora_alpha if peft_model is not None else 0,
        )
        self.owned = owned  # the Policy that loaded the model

    def own_parameters(self) -> list[torch.nn.Parameter]:
        return self.owned.trainable_parameters()

    def save_weights(self, path: Path) -> str | None:
        """As `Policy.save` writes it (adapter or full weights, tokenizer, policy_config.json),
        in `path/model/`."""
        self.owned.save(path / _SEPARATE_MODEL_DIR)
        return _SEPARATE_MODEL_DIR

    def load_weights(self, directory: Path) -> None:
        self.owned.load_adapter(directory)


HOW_BUILT: dict[str, str] = {
    cls.kind: cls.how_built for cls in (OwnAdapter, SharedBackbone, SeparateModel)
}
