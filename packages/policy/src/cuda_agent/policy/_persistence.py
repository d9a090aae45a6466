"""Saving and loading a policy's weights: `save`, `load_adapter`, `export_merged`.

`Policy` inherits these from `PersistenceMixin`. A checkpoint is a directory:
- LoRA (lora_rank > 0): the policy's own adapter in peft's format (adapter_config.json,
  adapter_model.safetensors); not a critic's adapter beside it, not the embeddings.
- Full fine-tuning: the whole model, as `save_pretrained` writes it (*.safetensors).
- Either way the tokenizer and policy_config.json (the PolicyConfig, to rebuild the policy).

On a sharded policy `save` gathers the weights (every process takes part) and process 0
writes. `export_merged` writes W = W_base + (alpha / r) B A for each LoRA layer, in the model's
dtype, as a plain transformers directory.

`load_lora_weights` is shared with the critic (`ValueModel`), which loads its value adapter the
same way.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from peft.utils import load_peft_weights, set_peft_model_state_dict

from cuda_agent.policy._config import PolicyConfig
from cuda_agent.policy._loading import requires_grad_flags, restore_requires_grad
from cuda_agent.policy._sharding import ShardedRoot, full_state_dict, is_sharded

POLICY_CONFIG_FILE = "policy_config.json"
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"  # peft's


@dataclass(frozen=True)
class WeightsSnapshot:
    """A policy's `save` taken at one moment (`Policy.weights_snapshot`): ``tensors``, the
    safetensors files by their path in the directory, on the CPU; ``files``, every other file's
    bytes. ``write`` makes the directory `save` would have made then."""

    tensors: dict[str, dict[str, torch.Tensor]]
    files: dict[str, bytes]

    def write(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        for name, data in self.files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)
        for name, tensors in self.tensors.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            save_file(tensors, str(path / name), metadata={"format": "pt"})


def _files_of(write: Any) -> tuple[str, dict[str, bytes]]:
    """Where ``write(directory, None)`` (a policy's `save`) puts the adapter's weights, and the
    bytes of every other file it writes."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, None)
        paths = [p for p in sorted(root.rglob("*")) if p.is_file()]
        weights = [p for p in paths if p.name == ADAPTER_WEIGHTS_FILE]
        if len(weights) != 1:
            raise RuntimeError(f"save wrote {len(weights)} {ADAPTER_WEIGHTS_FILE} files, not 1")
        files = {str(p.relative_to(root)): p.read_bytes() for p in paths if p not in weights}
        return str(weights[0].relative_to(root)), files


def load_lora_weights(
    peft_model: PeftModel,
    directory: Path,
    device: torch.device,
    *,
    adapter_name: str | None = None,
    what: str = "adapter",
) -> None:
    """Load the peft adapter saved in `directory` into `peft_model`; raise naming `what` when
    its keys do not match.

    adapter_name None: into the model's default adapter. Otherwise into adapter `adapter_name`
    only, keeping every parameter's requires_grad flag as it was (peft may change them), and
    only that adapter's LoRA weights count as missing.
    """
    weights = load_peft_weights(str(directory), device=str(device))
    result: Any
    if adapter_name is None:
        result = set_peft_model_state_dict(peft_model, weights)
        missing = [k for k in result.missing_keys if "lora_" in k]
    else:
        flags = requires_grad_flags(peft_model)
        result = set_peft_model_state_dict(peft_model, weights, adapter_name=adapter_name)
        restore_requires_grad(flags)
        marker = f".{adapter_name}."
        missing = [k for k in result.missing_keys if "lora_" in k and marker in k]
    if result.unexpected_keys or missing:
        raise ValueError(
            f"{what} in {directory} does not match this model (unexpected: "
            f"{result.unexpected_keys[:5]}, missing: {missing[:5]}); use the same base model "
            "and lora_target_modules as when saving"
        )


class PersistenceMixin:
    """`Policy`'s save, load and export methods (the attributes below are set by `Policy`)."""

    model: Any
    tokenizer: Any
    config: PolicyConfig
    device: torch.device
    _hf_model: Any
    _adapter: str | None
    _sharded_root: ShardedRoot | None
    _snapshot_files: tuple[str, dict[str, bytes]] | None = None  # weights_snapshot's

    @property
    def snapshots_weights(self) -> bool:
        """Whether `weights_snapshot` can be taken: a LoRA policy that is not sharded."""
        return self._sharded_root is None and isinstance(self.model, PeftModel)

    def _refuse_if_sharded(self, what: str) -> None:
        if self._sharded_root is not None:
            raise RuntimeError(f"{what} is not supported on a sharded policy; do it before shard()")

    def save(self, path: str | Path) -> None:
        """Write the LoRA adapter (or the full model when lora_rank == 0), the tokenizer and
        policy_config.json to directory `path`.

        On a sharded policy every process must call it (the weights are gathered); process 0
        writes.
        """
        path = Path(path)
        if self._sharded_root is None:
            self._write(path, None)
            return
        import torch.distributed as dist

        state = self._gathered_state()  # collective
        try:
            if dist.get_rank() == 0:
                self._write(path, state)
        finally:
            dist.barrier()

    def weights_snapshot(self) -> WeightsSnapshot:
        """What `save` would write now, held on the CPU: `snapshot.write(path)` writes the same
        files later, from any thread, while training goes on changing the live weights (it
        touches neither the model nor the tokenizer). A LoRA policy's only, not a sharded one's.

        The files other than the adapter's weights (its config, the tokenizer's, the policy's)
        never change and are made once, by a first `save`."""
        self._refuse_if_sharded("weights_snapshot")
        if not isinstance(self.model, PeftModel):
            raise ValueError("weights_snapshot needs a LoRA policy (lora_rank > 0)")
        from peft.utils import get_peft_model_state_dict

        if self._snapshot_files is None:
            self._snapshot_files = _files_of(self._write)
        weights_at, files = self._snapshot_files
        live = get_peft_model_state_dict(  # what save keeps, by peft's rule (live tensors)
            self.model, adapter_name=self._adapter or "default", save_embedding_layers=False
        )
        tensors = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in live.items()}
        return WeightsSnapshot({weights_at: tensors}, files)

    def _gathered_state(self) -> dict[str, torch.Tensor]:
        """The weights `save` writes, gathered whole from the shards (every process calls it;
        keys as the unsharded model names them). LoRA: the adapter only, not the base model."""
        assert self._sharded_root is not None
        if not isinstance(self.model, PeftModel):
            return {
                k.removeprefix("hf_model."): v
                for k, v in full_state_dict(self._sharded_root).items()
            }
        state = {}
        for name, param in self._sharded_root.named_parameters():
            if "lora_" in name:
                whole = param.full_tensor() if is_sharded(param) else param  # type: ignore[attr-defined]
                state["base_model.model." + name.removeprefix("hf_model.")] = whole.detach().cpu()
        return state

    def _write(self, path: Path, state: dict[str, torch.Tensor] | None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if isinstance(self.model, PeftModel):
            # The vocabulary is never resized, so embedding matrices need not be saved.
            adapters = [self._adapter] if self._adapter is not None else None
            self.model.save_pretrained(
                str(path), save_embedding_layers=False, selected_adapters=adapters, state_dict=state
            )
        else:
            self.model.save_pretrained(str(path), state_dict=state)
        self.tokenizer.save_pretrained(str(path))
        (path / POLICY_CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2) + "\n")

    def export_merged(self, path: str | Path) -> Path:
        """Write a plain transformers model directory (LoRA merged into the weights, in the
        model's dtype) plus the tokenizer, for serving or sharing: `from_pretrained(path)` loads
        it without peft. The policy itself is left as it was (still an adapter, still trainable).
        """
        self._refuse_if_sharded("export_merged")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = self._hf_model.state_dict()
        if isinstance(self.model, PeftModel):
            from peft.tuners.lora import LoraLayer

            adapter = self._adapter or self.model.active_adapter
            merged: dict[str, torch.Tensor] = {}
            with torch.no_grad():
                for name, module in self._hf_model.named_modules():
                    if isinstance(module, LoraLayer) and adapter in module.lora_A:
                        lora: Any = module  # a Linear LoRA layer (peft's types stop at the mixin)
                        base = lora.get_base_layer().weight
                        delta = lora.get_delta_weight(adapter).to(torch.float32)
                        merged[f"{name}.weight"] = (base.float() + delta).to(base.dtype)
            state = {
                key.replace(".base_layer.", "."): value
                for key, value in state.items()
                if "lora_" not in key
            }
            state.update(merged)
        self._hf_model.save_pretrained(str(path), state_dict=state)
        self.tokenizer.save_pretrained(str(path))
        return path

    def load_adapter(self, path: str | Path) -> None:
        """Load weights written by `save` into this policy (adapter, or full model weights when
        lora_rank == 0), e.g. to resume training."""
        self._refuse_if_sharded("load_adapter")
        self._load_weights(Path(path))

    def _load_weights(self, path: Path) -> None:
        """The weights `save` wrote to `path`: the adapter, or the full model's weights."""
        if isinstance(self.model, PeftModel):
            self._load_lora_weights(path)
        else:
            self._load_full_weights(path)

    def _load_lora_weights(self, path: Path) -> None:
        adapter_config = path / "adapter_config.json"
        if not adapter_config.is_file():
            raise FileNotFoundError(
                f"{adapter_config} not found: load_adapter expects a directory written by Policy.save "
                "with lora_rank > 0"
            )
        saved_rank = json.loads(adapter_config.read_text()).get("r")
        if saved_rank != self.config.lora_rank:
            raise ValueError(
                f"the adapter in {path} has rank {saved_rank} but this policy has lora_rank="
                f"{self.config.lora_rank}; build the policy with the same PolicyConfig as when saving"
            )
        load_lora_weights(self.model, path, self.device)

    def _load_full_weights(self, path: Path) -> None:
        from safetensors.torch import load_file

        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(
                f"no *.safetensors weights in {path}; expected a directory written by Policy.save"
            )
        state: dict[str, torch.Tensor] = {}
        for file in files:
            state.update(load_file(str(file), device=str(self.device)))
        result = self.model.load_state_dict(state, strict=False)
        # Tied weights (lm_head sharing the embedding) are saved once: their absence is expected.
        own = self.model.state_dict()
        loaded_storage = {own[k].data_ptr() for k in state if k in own}
        missing = [k for k in result.missing_keys if own[k].data_ptr() not in loaded_storage]
        if result.unexpected_keys or missing:
            raise ValueError(
                f"weights in {path} do not match this model (unexpected: {result.unexpected_keys[:5]}, "
                f"missing: {missing[:5]}); use the same base model as when saving"
            )
