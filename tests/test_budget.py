"""The warm start's examples are rollouts' first prompts and the answer format rollouts parse."""

from __future__ import annotations

from types import SimpleNamespace

from cuda_agent.agent import Fenced, build_messages
from cuda_agent.kernel_sandbox import builtin_tasks
from cuda_agent.policy.testing import tiny_tokenizer
from cuda_agent.runner.budget import warmstart_examples


def test_a_warm_start_example_is_the_rollout_prompt_and_a_fenced_answer_it_parses() -> None:
    tokenizer = tiny_tokenizer()
    tasks = [t for t in builtin_tasks() if "cpu" in t.solutions][:3]
    examples = warmstart_examples(SimpleNamespace(tokenizer=tokenizer), tasks, "cpu", "primary")
    assert [e.task for e in examples] == [t.name for t in tasks]
    for task, example in zip(tasks, examples, strict=True):
        # the tokens the chat template gives the task's first messages, as before
        rendered = tokenizer.apply_chat_template(
            build_messages(task, "cpu"), add_generation_prompt=True, tokenize=True
        )
        ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
        assert example.prompt_ids == [int(i) for i in ids]
        assert example.response_ids[-1] == tokenizer.eos_token_id
        answer = tokenizer.decode(example.response_ids[:-1])
        action = Fenced().parse(answer, None)
        assert action.kind == "evaluate" and "class ModelNew" in str(action.candidate)


def test_a_warm_start_answer_ends_with_the_templates_end_of_turn_not_the_tokenizers_eos() -> None:
    """transformers 5.17 loads SmolLM2's GGUF tokenizer with eos = ``<|im_start|>``: the
    answers taught must still close their turn as the chat template does."""
    tokenizer = tiny_tokenizer()
    tokenizer.eos_token = "<|im_start|>"
    tasks = [t for t in builtin_tasks() if "cpu" in t.solutions][:2]
    examples = warmstart_examples(SimpleNamespace(tokenizer=tokenizer), tasks, "cpu", "primary")
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert [e.response_ids[-1] for e in examples] == [im_end, im_end]
