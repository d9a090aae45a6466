"""``TrainConfig``: everything a training run needs, with the embedded CPU default."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrainConfig:
    """A training run. Defaults are the embedded default: SmolLM2-135M on the CPU backend.

    Stages: evaluate (before) -> warm start (supervised on reference solutions, the reference
    system's rejection fine-tuning in miniature) -> ``steps`` RL steps -> evaluate (after).
    """

    out: str = ""  # empty = runs/<timestamp>
    model: str = "smollm2-135m-gguf"
    backend: str = "auto"  # sandbox backend: auto | cpu | cuda
    device: str = "auto"  # policy device
    tasks: str = ""  # empty = the built-in task suite; else a directory or a task file
    seed: int = 0
    # warm start (supervised)
    warmstart_steps: int = 24
    warmstart_lr: float = 3e-3
    warmstart_batch: int = 4
    # RL
    steps: int = 2
    tasks_per_step: int = 3
    group_size: int = 4
    max_new_tokens: int = 512
    temperature: float = 1.0
    lr: float = 2e-5
    micro_batch: int = 4
    eps_low: float = 0.2
    eps_high: float = 0.28
    max_grad_norm: float = 1.0
    # LoRA
    lora_rank: int = 16
    lora_alpha: int = 32
    # evaluation before / after (greedy, one answer per task)
    eval_tasks: int = 0  # 0 = all tasks

    def __post_init__(self) -> None:
        positive = (
            "tasks_per_step",
            "group_size",
            "max_new_tokens",
            "micro_batch",
            "warmstart_batch",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        for name in ("steps", "warmstart_steps", "eval_tasks", "lora_rank"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        if self.backend not in ("auto", "cpu", "cuda"):
            raise ValueError("--backend must be auto, cpu or cuda")
        if not 0 <= self.eps_low < 1 or self.eps_high < 0:
            raise ValueError("--eps-low must be in [0, 1) and --eps-high >= 0")

    def out_dir(self) -> Path:
        return Path(self.out or time.strftime("runs/%Y%m%d-%H%M%S"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, path: Path) -> TrainConfig:
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
