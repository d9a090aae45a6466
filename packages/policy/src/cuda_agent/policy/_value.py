"""ValueModel: PPO's critic, a scalar head on a decoder's last hidden state (per-token values).

Three ways to build one:

* `ValueModel.from_policy(policy)` with a LoRA policy: the critic shares the policy's frozen base
  weights and gets its own LoRA adapter, added to the same `PeftModel` next to the policy's.
  Values run with that adapter active; the policy's adapter is active again afterwards.
* `ValueModel.from_policy(policy)` with a fully fine-tuned policy (lora_rank == 0): the critic
  shares the backbone as is (a shared actor-critic). Only the head is the critic's own; the value
  loss's gradients flow into the shared backbone parameters, which the policy's optimizer steps.
* `ValueModel.separate(config)` / `ValueModel.from_model(model, tokenizer, config)`: a model of
  its own, loaded like a policy (LoRA or full fine-tuning per config), e.g. a smaller critic.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from peft import LoraConfig, PeftModel
from peft.utils import load_peft_weights, set_peft_model_state_dict

from cuda_agent.policy._config import PolicyConfig
from cuda_agent.policy._loading import adapter_parameters
from cuda_agent.policy._policy import Policy
from cuda_agent.policy._scoring import adapter_autocast, right_padded_batch

VALUE_HEAD_FILE = "value_head.safetensors"
VALUE_CONFIG_FILE = "value_config.json"
_FORMAT_VERSION = 1
_SEPARATE_MODEL_DIR = "model"
_PINNED_MARK = "_cuda_agent_pins_active_adapter"

ValueKind = Literal["adapter", "shared", "separate"]
"""adapter: own LoRA adapter on the policy's PeftModel; shared: the policy's fully fine-tuned
backbone as is; separate: a model of its own."""


@dataclass(frozen=True)
class TokenValues:
    """Per-token values of responses, right-padded to the longest response of the batch.

    values: [B, T_resp_max] float32, V(state before response token t) = the critic's estimate
        after reading prompt[b] and response[b, :t]; 0 where mask is False.
    mask: [B, T_resp_max] bool, True on real response tokens.
    """

    values: torch.Tensor
    mask: torch.Tensor


# ---------------------------------------------------------------------- adapter switching
def _restore_requires_grad(flags: list[tuple[torch.nn.Parameter, bool]]) -> None:
    for parameter, flag in flags:
        if parameter.requires_grad != flag:
            parameter.requires_grad_(flag)


@contextmanager
def _adapter_active(peft_model: PeftModel, name: str) -> Iterator[None]:
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
    flags = [(p, p.requires_grad) for p in peft_model.parameters()]
    peft_model.set_adapter(name)
    _restore_requires_grad(flags)
    try:
        yield
    finally:
        peft_model.set_adapter(previous)
        _restore_requires_grad(flags)


def _recompute_under_forward_adapter(
    peft_model: PeftModel,
) -> tuple[AbstractContextManager[None], AbstractContextManager[None]]:
    """`context_fn` for torch.utils.checkpoint: called during the forward, it records the adapter
    active then, and has the backward-time recomputation run under that same adapter."""
    return nullcontext(), _adapter_active(peft_model, peft_model.active_adapter)


def _pin_adapters_under_checkpointing(hf_model: Any, peft_model: PeftModel) -> None:
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


# ---------------------------------------------------------------------- the critic
class ValueModel:
    """A critic: `values(prompts, responses)` gives per-token values with grad.

    The head is `torch.nn.Linear(hidden_size, 1)` in float32, zero-initialised: a new critic
    predicts 0 for every state (so early advantages are plain returns minus 0, not noise), and
    its first optimiser steps move the head before any gradient reaches the adapter (a new LoRA
    adapter is a no-op too, B = 0). Hidden states are cast to float32 before the head.

    Build it with `from_policy`, `separate` or `from_model`. Attributes: `kind` (see ValueKind),
    `adapter_name` (None without LoRA), `head`, `hidden_size`, `device`, `config` (the backbone's
    PolicyConfig; for kind "adapter" the LoRA settings of the value adapter are `lora_rank` and
    `lora_alpha`).
    """

    def __init__(
        self,
        *,
        kind: ValueKind,
        model: Any,
        tokenizer: Any,
        config: PolicyConfig,
        device: torch.device,
        adapter_name: str | None,
        lora_rank: int,
        lora_alpha: int,
        owned_policy: Policy | None = None,
    ) -> None:
        self.kind: ValueKind = kind
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.device = device
        self.adapter_name = adapter_name
        self.lora_rank = lora_rank
        self.lora_alpha = lora_alpha
        self._owned_policy = owned_policy  # kind "separate": the Policy that loaded the model
        self._peft: PeftModel | None = model if isinstance(model, PeftModel) else None
        self._hf_model: Any = model.get_base_model() if self._peft is not None else model
        self._pad_id: int = tokenizer.pad_token_id
        try:
            decoder = self._hf_model.get_decoder()
        except (AttributeError, NotImplementedError, ValueError):
            decoder = None
        if decoder is None:
            raise ValueError(
                f"{type(self._hf_model).__name__} exposes no decoder (get_decoder()); a value head "
                "needs the decoder's last hidden state"
            )
        # The output head's input width is the decoder's output width (not always config.hidden_size).
        embeddings = self._hf_model.get_output_embeddings() or self._hf_model.get_input_embeddings()
        self.hidden_size = int(embeddings.weight.shape[-1])
        self.head = torch.nn.Linear(self.hidden_size, 1, device=device, dtype=torch.float32)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.bias.zero_()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_policy(
        cls,
        policy: Policy,
        *,
        lora_rank: int | None = None,
        lora_alpha: int | None = None,
        adapter_name: str = "value",
    ) -> ValueModel:
        """A critic on the policy's backbone.

        LoRA policy: adds adapter `adapter_name` (rank/alpha default to the policy's, same target
        modules and dropout, initialisation seeded by policy.config.seed + 1) to `policy.model`;
        the policy's log-probs are unchanged. Fully fine-tuned policy: shares the backbone as is
        (value-loss gradients reach the backbone; the critic's own parameters are its head), and
        lora_rank/lora_alpha must be left unset.
        """
        if policy.sharded:
            raise RuntimeError(
                "ValueModel.from_policy does not support a sharded policy; make the critic "
                "before Policy.shard(), or use ValueModel.separate(config)"
            )
        peft_model = policy.model
        if not isinstance(peft_model, PeftModel):
            if lora_rank is not None or lora_alpha is not None:
                raise ValueError(
                    "the policy is fully fine-tuned (no LoRA), so a value adapter cannot be added "
                    "to it; leave lora_rank/lora_alpha unset to share its backbone as is, or use "
                    "ValueModel.separate(config) for a critic with weights of its own"
                )
            return cls(
                kind="shared",
                model=peft_model,
                tokenizer=policy.tokenizer,
                config=policy.config,
                device=policy.device,
                adapter_name=None,
                lora_rank=0,
                lora_alpha=0,
            )

        rank = policy.config.lora_rank if lora_rank is None else lora_rank
        alpha = policy.config.lora_alpha if lora_alpha is None else lora_alpha
        if rank <= 0 or alpha <= 0:
            raise ValueError(f"lora_rank and lora_alpha must be > 0, got {rank} and {alpha}")
        if adapter_name in peft_model.peft_config:
            raise ValueError(
                f"the policy already has an adapter named {adapter_name!r} (was a ValueModel built "
                "from it before?); pass another adapter_name"
            )
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
            lora_dropout=policy.config.lora_dropout,
            inference_mode=False,
        )
        flags = [(p, p.requires_grad) for p in peft_model.parameters()]
        with torch.random.fork_rng(devices=[]):  # peft initialises LoRA on the CPU, then moves it
            torch.manual_seed(policy.config.seed + 1)
            peft_model.add_adapter(adapter_name, lora_config)
        _restore_requires_grad(flags)  # the policy's parameters keep their flags
        for parameter in adapter_parameters(peft_model, adapter_name):
            parameter.requires_grad_(True)
        peft_model.to(policy.device)
        return cls(
            kind="adapter",
            model=peft_model,
            tokenizer=policy.tokenizer,
            config=policy.config,
            device=policy.device,
            adapter_name=adapter_name,
            lora_rank=rank,
            lora_alpha=alpha,
        )

    @classmethod
    def separate(cls, config: PolicyConfig) -> ValueModel:
        """A critic with a model of its own, loaded from `config.model` like `Policy.load` (LoRA
        when config.lora_rank > 0, else full fine-tuning)."""
        return cls._over(Policy.load(config))

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, config: PolicyConfig) -> ValueModel:
        """A critic with a model of its own, from an already-built transformers causal LM (as
        `Policy.from_model`: dtype, gradient checkpointing, LoRA and device per config)."""
        return cls._over(Policy.from_model(model, tokenizer, config))

    @classmethod
    def _over(cls, owned: Policy) -> ValueModel:
        peft_model = owned.model if isinstance(owned.model, PeftModel) else None
        return cls(
            kind="separate",
            model=owned.model,
            tokenizer=owned.tokenizer,
            config=owned.config,
            device=owned.device,
            adapter_name=peft_model.active_adapter if peft_model is not None else None,
            lora_rank=owned.config.lora_rank,
            lora_alpha=owned.config.lora_alpha if peft_model is not None else 0,
            owned_policy=owned,
        )

    # ------------------------------------------------------------------ modes and parameters
    def train(self) -> ValueModel:
        """Training mode. For a critic built by from_policy this is the policy's mode too (one
        module tree)."""
        self.model.train()
        self.head.train()
        return self

    def eval(self) -> ValueModel:
        """Evaluation mode (also the policy's, for a critic built by from_policy)."""
        self.model.eval()
        self.head.eval()
        return self

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The critic's own parameters: value adapter + head (kind "adapter"), the head (kind
        "shared"), or its model's trainable parameters + head (kind "separate").

        An optimizer over these changes no policy parameter.
        """
        own: list[torch.nn.Parameter]
        if self.kind == "adapter":
            assert self._peft is not None and self.adapter_name is not None
            own = adapter_parameters(self._peft, self.adapter_name)
        elif self.kind == "shared":
            own = []
        else:
            assert self._owned_policy is not None
            own = self._owned_policy.trainable_parameters()
        return [*own, *self.head.parameters()]

    # ------------------------------------------------------------------ values
    def values(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> TokenValues:
        """Per-token values of a batch, with grad: values[b, j] = head(hidden state at position
        len(prompt[b]) - 1 + j), the state before response token j (the alignment of
        Policy.token_logprobs). One right-padded forward; runs in the current mode.
        """
        batch = right_padded_batch(prompt_ids, response_ids, self._pad_id, self.device)
        mask, positions = batch.mask, batch.positions
        if batch.empty:
            return TokenValues(torch.zeros(mask.shape, device=self.device), mask)

        with self._adapter_context(), adapter_autocast(self._hf_model):
            states_bth = self._hf_model.get_decoder()(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
            ).last_hidden_state
        index_brh = positions[..., None].expand(-1, -1, states_bth.shape[-1])
        selected_brh = states_bth.gather(1, index_brh)
        values = self.head(selected_brh.float()).squeeze(-1).masked_fill(~mask, 0.0)
        return TokenValues(values=values, mask=mask)

    def _adapter_context(self) -> AbstractContextManager[None]:
        if self.kind != "adapter":
            return nullcontext()
        assert self._peft is not None and self.adapter_name is not None
        _pin_adapters_under_checkpointing(self._hf_model, self._peft)
        return _adapter_active(self._peft, self.adapter_name)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """Write the critic to directory `path`: value_head.safetensors, value_config.json and

        * kind "adapter": the value adapter in peft format (peft's layout: `path/<adapter_name>/`
          holds adapter_config.json + adapter_model.safetensors, loadable with
          `PeftModel.load_adapter(..., adapter_name=...)`);
        * kind "separate": its model as `Policy.save` writes it (adapter or full weights,
          tokenizer, policy_config.json) in `path/model/`;
        * kind "shared": nothing more (the backbone is the policy's; save it with Policy.save).
        """
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        weights_dir: str | None = None
        if self.kind == "adapter":
            assert self._peft is not None and self.adapter_name is not None
            self._peft.save_pretrained(
                str(path), selected_adapters=[self.adapter_name], save_embedding_layers=False
            )
            # peft writes a non-"default" adapter into a sub-directory named after it.
            weights_dir = self.adapter_name if self.adapter_name != "default" else "."
        elif self.kind == "separate":
            assert self._owned_policy is not None
            weights_dir = _SEPARATE_MODEL_DIR
            self._owned_policy.save(path / weights_dir)
        head = {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}
        save_file(head, str(path / VALUE_HEAD_FILE))
        description = {
            "format": _FORMAT_VERSION,
            "kind": self.kind,
            "adapter_name": self.adapter_name,
            "weights_dir": weights_dir,
            "hidden_size": self.hidden_size,
            "lora_rank": self.lora_rank,
            "lora_alpha": self.lora_alpha,
            "backbone_config": asdict(self.config),
        }
        (path / VALUE_CONFIG_FILE).write_text(json.dumps(description, indent=2) + "\n")

    def load(self, path: str | Path) -> None:
        """Load weights written by `save` into this critic, built the same way as when saving
        (same kind, base model, hidden size and LoRA rank); raise a clear error otherwise."""
        from safetensors.torch import load_file

        path = Path(path)
        description_file = path / VALUE_CONFIG_FILE
        if not description_file.is_file():
            raise FileNotFoundError(
                f"{description_file} not found: ValueModel.load expects a directory written by "
                "ValueModel.save"
            )
        saved = json.loads(description_file.read_text())
        build = {
            "adapter": "ValueModel.from_policy(policy) with a LoRA policy",
            "shared": "ValueModel.from_policy(policy) with a fully fine-tuned policy",
            "separate": "ValueModel.separate(config)",
        }
        if saved.get("kind") != self.kind:
            raise ValueError(
                f"{path} holds a critic of kind {saved.get('kind')!r} "
                f"({build.get(saved.get('kind'), 'unknown')}) but this one is of kind "
                f"{self.kind!r}; build the critic the same way as when saving"
            )
        if saved.get("hidden_size") != self.hidden_size:
            raise ValueError(
                f"the critic in {path} has hidden size {saved.get('hidden_size')} but this one "
                f"has {self.hidden_size}; use the same base model as when saving"
            )
        if saved.get("lora_rank") != self.lora_rank:
            raise ValueError(
                f"the critic in {path} has lora_rank={saved.get('lora_rank')} but this one has "
                f"lora_rank={self.lora_rank}; build it with the same settings as when saving"
            )
        if self.kind == "adapter":
            self._load_value_adapter(path / str(saved.get("weights_dir")))
        elif self.kind == "separate":
            assert self._owned_policy is not None
            self._owned_policy.load_adapter(path / str(saved.get("weights_dir")))

        head_file = path / VALUE_HEAD_FILE
        if not head_file.is_file():
            raise FileNotFoundError(f"{head_file} not found; expected a directory written by save")
        state = load_file(str(head_file), device=str(self.device))
        expected = {k: tuple(v.shape) for k, v in self.head.state_dict().items()}
        if {k: tuple(v.shape) for k, v in state.items()} != expected:
            raise ValueError(f"{head_file} does not hold a value head of shape {expected}")
        with torch.no_grad():
            self.head.weight.copy_(state["weight"])
            self.head.bias.copy_(state["bias"])

    def _load_value_adapter(self, directory: Path) -> None:
        assert self._peft is not None and self.adapter_name is not None
        if not (directory / "adapter_config.json").is_file():
            raise FileNotFoundError(
                f"{directory / 'adapter_config.json'} not found; expected the value adapter "
                "written by ValueModel.save"
            )
        weights = load_peft_weights(str(directory), device=str(self.device))
        flags = [(p, p.requires_grad) for p in self._peft.parameters()]
        result: Any = set_peft_model_state_dict(self._peft, weights, adapter_name=self.adapter_name)
        _restore_requires_grad(flags)
        marker = f".{self.adapter_name}."
        missing = [k for k in result.missing_keys if "lora_" in k and marker in k]
        if result.unexpected_keys or missing:
            raise ValueError(
                f"value adapter in {directory} does not match this model (unexpected: "
                f"{result.unexpected_keys[:5]}, missing: {missing[:5]}); use the same base model "
                "and lora_target_modules as when saving"
            )
