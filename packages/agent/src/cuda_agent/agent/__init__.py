"""cuda_agent.agent: prompts, candidate parsing and rollouts composing sandbox and reward."""

from .feedback import feedback
from .parsing import extract_candidate
from .prompts import build_messages, system_prompt, user_prompt
from .rollout import (
    EvaluatorLike,
    PolicyLike,
    SampleLike,
    SamplingParams,
    Trajectory,
    rollout_single_turn,
)

__all__ = [
    "EvaluatorLike",
    "PolicyLike",
    "SampleLike",
    "SamplingParams",
    "Trajectory",
    "build_messages",
    "extract_candidate",
    "feedback",
    "rollout_single_turn",
    "system_prompt",
    "user_prompt",
]

__version__ = "0.1.0"
