"""The public API of cuda_agent.policy, pinned: refactoring the modules behind it must not change
the names a caller sees, nor the parameters of `Policy`'s and `ValueModel`'s public methods."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import cuda_agent.policy
from cuda_agent.policy import Policy, ValueModel

ALL = [
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

# name -> parameter names (None: a property).
POLICY_MEMBERS: dict[str, list[str] | None] = {
    "adapters_disabled": ["self"],
    "chat_prompt_ids": ["self", "messages"],
    "decode_stats": ["self"],
    "eval": ["self"],
    "export_merged": ["self", "path"],
    "from_model": ["model", "tokenizer", "config"],
    "generate": [
        "self",
        "prompts",
        "n",
        "max_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "stop",
    ],
    "load": ["config"],
    "load_adapter": ["self", "path"],
    "optimizer": ["self", "lr", "kwargs"],
    "release_memory": ["self"],
    "save": ["self", "path"],
    "shard": ["self"],
    "sharded": None,
    "snapshots_weights": None,
    "token_logprobs": [
        "self",
        "prompt_ids",
        "response_ids",
        "with_entropy",
        "entropy_grad",
        "temperature",
    ],
    "train": ["self"],
    "trainable_parameters": ["self"],
    "weights_snapshot": ["self"],
}
VALUE_MODEL_MEMBERS: dict[str, list[str] | None] = {
    "eval": ["self"],
    "from_model": ["model", "tokenizer", "config"],
    "from_policy": ["policy", "lora_rank", "lora_alpha", "adapter_name"],
    "load": ["self", "path"],
    "save": ["self", "path"],
    "separate": ["config"],
    "train": ["self"],
    "trainable_parameters": ["self"],
    "values": ["self", "prompt_ids", "response_ids"],
}
POLICY_ATTRIBUTES = ["config", "device", "model", "tokenizer"]
VALUE_MODEL_ATTRIBUTES = [
    "adapter_name",
    "config",
    "device",
    "head",
    "hidden_size",
    "kind",
    "lora_alpha",
    "lora_rank",
    "model",
    "tokenizer",
]


def test_package_exports_exactly_the_public_names() -> None:
    assert cuda_agent.policy.__all__ == ALL
    for name in ALL:
        assert hasattr(cuda_agent.policy, name)


@pytest.mark.parametrize(
    ("cls", "members"), [(Policy, POLICY_MEMBERS), (ValueModel, VALUE_MODEL_MEMBERS)]
)
def test_public_members_and_their_parameters(
    cls: type, members: dict[str, list[str] | None]
) -> None:
    assert [n for n in dir(cls) if not n.startswith("_")] == sorted(members)
    for name, parameters in members.items():
        member = inspect.getattr_static(cls, name)
        if parameters is None:
            assert isinstance(member, property), name
            continue
        assert list(inspect.signature(getattr(cls, name)).parameters) == parameters, name
        assert inspect.getdoc(getattr(cls, name)) or name in ("train", "eval"), name


def _public_attributes(instance: Any) -> list[str]:
    return sorted(n for n in vars(instance) if not n.startswith("_"))


def test_public_instance_attributes(make_policy: Any, make_model: Any, tiny_tokenizer: Any) -> None:
    from cuda_agent.policy import PolicyConfig

    lora, full = make_policy(), make_policy(lora_rank=0)
    assert _public_attributes(lora) == POLICY_ATTRIBUTES
    critics = [
        ValueModel.from_policy(lora),
        ValueModel.from_policy(full),
        ValueModel.from_model(
            make_model(), tiny_tokenizer, PolicyConfig(device="cpu", lora_rank=4)
        ),
    ]
    assert [c.kind for c in critics] == ["adapter", "shared", "separate"]
    for critic in critics:
        assert _public_attributes(critic) == VALUE_MODEL_ATTRIBUTES
