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

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel

from cuda_agent.policy._config import PolicyConfig
from cuda_agent.policy._policy import Policy
from cuda_agent.policy._scoring import response_hidden_states, right_padded_batch
from cuda_agent.policy._value_backbones import (
    HOW_BUILT,
    Backbone,
    OwnAdapter,
    SeparateModel,
    SharedBackbone,
    ValueKind,
    add_value_adapter,
)

VALUE_HEAD_FILE = "value_head.safetensors"
VALUE_CONFIG_FILE = "value_config.json"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class TokenValues:
    """Per-token values of responses, right-padded to the longest response of the batch.

    values: [B, T_resp_max] float32, V(state before response token t) = the critic's estimate
        after reading prompt[b] and response[b, :t]; 0 where mask is False.
    mask: [B, T_resp_max] bool, True on real response tokens.
    """

    values: torch.Tensor
    mask: torch.Tensor


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

    def __init__(self, backbone: Backbone) -> None:
        """Use `from_policy`, `separate` or `from_model`; `backbone` is one of
        `_value_backbones.py`'s classes."""
        self._backbone = backbone
        self.kind: ValueKind = backbone.kind
        self.model = backbone.model
        self.tokenizer = backbone.tokenizer
        self.config = backbone.config
        self.device = backbone.device
        self.adapter_name = backbone.adapter_name
        self.lora_rank = backbone.lora_rank
        self.lora_alpha = backbone.lora_alpha
        self._hf_model = backbone.hf_model
        self._pad_id: int = self.tokenizer.pad_token_id
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
        self.head = torch.nn.Linear(self.hidden_size, 1, device=self.device, dtype=torch.float32)
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
            return cls(SharedBackbone(policy))

        rank = policy.config.lora_rank if lora_rank is None else lora_rank
        alpha = policy.config.lora_alpha if lora_alpha is None else lora_alpha
        if rank <= 0 or alpha <= 0:
            raise ValueError(f"lora_rank and lora_alpha must be > 0, got {rank} and {alpha}")
        if adapter_name in peft_model.peft_config:
            raise ValueError(
                f"the policy already has an adapter named {adapter_name!r} (was a ValueModel built "
                "from it before?); pass another adapter_name"
            )
        add_value_adapter(peft_model, policy.config, policy.device, adapter_name, rank, alpha)
        backbone = OwnAdapter(peft_model, policy, adapter_name, rank, alpha)
        # One switch to the value adapter and back now: peft's first `set_adapter` replaces
        # every LoRA layer's active-adapter attribute with a new object, which the policy's
        # compiled decoding step is guarded on; after the first critic forward it compiled
        # again (21.7 s on the H200). Done here, before any decoding, the step compiles once.
        with backbone.active():
            pass
        return cls(backbone)

    @classmethod
    def separate(cls, config: PolicyConfig) -> ValueModel:
        """A critic with a model of its own, loaded from `config.model` like `Policy.load` (LoRA
        when config.lora_rank > 0, else full fine-tuning)."""
        return cls(SeparateModel(Policy.load(config)))

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, config: PolicyConfig) -> ValueModel:
        """A critic with a model of its own, from an already-built transformers causal LM (as
        `Policy.from_model`: dtype, gradient checkpointing, LoRA and device per config)."""
        return cls(SeparateModel(Policy.from_model(model, tokenizer, config)))

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
        return [*self._backbone.own_parameters(), *self.head.parameters()]

    # ------------------------------------------------------------------ values
    def values(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> TokenValues:
        """Per-token values of a batch, with grad: values[b, j] = head(hidden state at position
        len(prompt[b]) - 1 + j), the state before response token j (the alignment of
        Policy.token_logprobs). One right-padded forward; runs in the current mode.
        """
        batch = right_padded_batch(prompt_ids, response_ids, self._pad_id, self.device)
        mask = batch.mask
        if batch.empty:
            return TokenValues(torch.zeros(mask.shape, device=self.device), mask)

        with self._backbone.active():
            selected_brh = response_hidden_states(self._hf_model, batch)
        values = self.head(selected_brh.float()).squeeze(-1).masked_fill(~mask, 0.0)
        return TokenValues(values=values, mask=mask)

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
        weights_dir = self._backbone.save_weights(path)
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
        if saved.get("kind") != self.kind:
            raise ValueError(
                f"{path} holds a critic of kind {saved.get('kind')!r} "
                f"({HOW_BUILT.get(saved.get('kind'), 'unknown')}) but this one is of kind "
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
        self._backbone.load_weights(path / str(saved.get("weights_dir")))

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
