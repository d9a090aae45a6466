"""cuda_agent.policy: load a causal LM (hub id, local dir, GGUF), add LoRA, sample, score, save."""

from cuda_agent.policy._config import DEFAULT_MODEL, PolicyConfig
from cuda_agent.policy._loading import ModelNotAvailableError
from cuda_agent.policy._optim import PolicyOptimizer
from cuda_agent.policy._persistence import WeightsSnapshot
from cuda_agent.policy._policy import Policy
from cuda_agent.policy._remote import RemotePolicy, RemotePolicyError, RemoteSample
from cuda_agent.policy._sampling import Sample
from cuda_agent.policy._scoring import TokenLogprobs
from cuda_agent.policy._turns import TurnTokens, end_of_turn_id, turn_tokens
from cuda_agent.policy._value import TokenValues, ValueModel

__all__ = [
    "DEFAULT_MODEL",
    "ModelNotAvailableError",
    "Policy",
    "PolicyConfig",
    "PolicyOptimizer",
    "RemotePolicy",
    "RemotePolicyError",
    "RemoteSample",
    "Sample",
    "TokenLogprobs",
    "TokenValues",
    "TurnTokens",
    "ValueModel",
    "WeightsSnapshot",
    "end_of_turn_id",
    "turn_tokens",
]
