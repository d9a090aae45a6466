"""cuda_agent.runner: the thin runner (config, stages, checkpoints, metrics, CLI)."""

from .config import TrainConfig

__all__ = ["TrainConfig"]
__version__ = "0.1.0"
