"""cuda_agent.agent: prompts, protocols, chat deltas and the multi-turn loop composing sandbox
and reward around a policy."""

from .batch import EpisodeBatch, collate
from .chat import ChatRenderer, ChatTemplateError
from .driver import AgentConfig, RolloutBatch, SamplingParams, first_prompt_ids, run_episodes
from .episode import (
    Episode,
    TrainingSequence,
    Turn,
    best_of,
    best_outcome,
    episode_from_json,
    episode_to_json,
    turn_rank,
)
from .feedback import feedback
from .filters import FilterReport, drop_reason, rejection_filter
from .parsing import extract_candidate
from .prompts import build_messages, system_prompt, user_prompt
from .protocols import Action, Fenced, Protocol, answer_text, protocol
from .rollout import (
    EvaluatorLike,
    PolicyLike,
    SampleLike,
    Trajectory,
    rollout_single_turn,
)

__all__ = [
    "Action",
    "AgentConfig",
    "ChatRenderer",
    "ChatTemplateError",
    "Episode",
    "EpisodeBatch",
    "EvaluatorLike",
    "Fenced",
    "FilterReport",
    "PolicyLike",
    "Protocol",
    "RolloutBatch",
    "SampleLike",
    "SamplingParams",
    "TrainingSequence",
    "Trajectory",
    "Turn",
    "answer_text",
    "best_of",
    "best_outcome",
    "build_messages",
    "collate",
    "drop_reason",
    "episode_from_json",
    "episode_to_json",
    "extract_candidate",
    "feedback",
    "first_prompt_ids",
    "protocol",
    "rejection_filter",
    "rollout_single_turn",
    "run_episodes",
    "system_prompt",
    "turn_rank",
    "user_prompt",
]

__version__ = "0.1.0"
