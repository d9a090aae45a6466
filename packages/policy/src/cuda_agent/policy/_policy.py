"""Policy: a causal LM (+ LoRA) that samples responses and scores them with gradients.

This module holds construction (LoRA, dtype, checkpointing), modes and parameters, `shard()`,
prompts, and the two entry points:
- `generate` left-pads prompts x n rows into one batch and hands it to its decoding strategy;
- `token_logprobs` right-pads (prompt, response) pairs and computes, for response token j,
      log p(y_j | x, y_<j) = log_softmax(head(h_{len(x) - 1 + j}))[y_j]
  with the head applied to response positions only (`_scoring.py`), through its scoring
  strategy.
The strategies (`_strategies.py`) are chosen at construction and swapped by `shard()`; they run
on the policy's `LocalModel` (`_local_model.py`: the model, the decoders, the scoring forward).
Saving, loading and export come from `PersistenceMixin` (`_persistence.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict
from typing import Any

import torch
from peft import PeftModel

from cuda_agent.policy._arguments import checked_sampling_args
from cuda_agent.policy._config import (
    PolicyConfig,
    resolve_device,
    resolve_dtype,
    resolve_kv_cache,
)
from cuda_agent.policy._decoding import DecodeStats, StaticDecoder, Warp
from cuda_agent.policy._generation import DecodeRequest, fork_rng_seeded, left_padded
from cuda_agent.policy._loading import (
    adapter_parameters,
    adapters_disabled,
    load_pretrained,
    resolve_model_source,
    wrap_with_lora,
)
from cuda_agent.policy._local_model import LocalModel
from cuda_agent.policy._memory import fix_cpu_mmap_threshold, release_device_memory
from cuda_agent.policy._optim import PolicyOptimizer
from cuda_agent.policy._persistence import PersistenceMixin
from cuda_agent.policy._sampling import Sample, build_sample
from cuda_agent.policy._scoring import (
    TokenLogprobs,
    right_padded_batch,
    set_checkpoint_min_tokens,
)
from cuda_agent.policy._sharding import ShardedRoot, shard
from cuda_agent.policy._strategies import (
    Decoding,
    GenerateDecoding,
    LocalScoring,
    Scoring,
    ShardedDecoding,
    ShardedScoring,
    StaticDecoding,
)
from cuda_agent.policy._turns import turn_tokens

_DEFAULT_CONFIG = PolicyConfig()


class Policy(PersistenceMixin):
    """A causal LM with optional LoRA: `generate` samples, `token_logprobs` scores with grad.

    Build it with `Policy.load(config)` or `Policy.from_model(model, tokenizer, config)`.
    Attributes: `model` (a peft `PeftModel` when lora_rank > 0, else the transformers model),
    `tokenizer`, `device`, `config`.
    """

    def __init__(
        self, model: Any, tokenizer: Any, config: PolicyConfig, device: torch.device
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.device = device
        # The transformers model itself (LoRA layers are injected into it in place).
        self._hf_model: Any = model.get_base_model() if isinstance(model, PeftModel) else model
        # The policy's own adapter (a critic may add another to the same model: ValueModel).
        self._adapter: str | None = model.active_adapter if isinstance(model, PeftModel) else None
        self._eos_ids = self._collect_eos_ids()
        self._pad_id: int = tokenizer.pad_token_id
        # What the strategies run on: the model, its decoders and the scoring forward.
        self._local = LocalModel(self._hf_model, tokenizer, device, self._eos_ids, self._pad_id)
        # A private stream of per-call seeds, so seed=None runs are reproducible from config.seed.
        self._seed_stream = torch.Generator().manual_seed(config.seed)
        self._sharded_root: ShardedRoot | None = None  # set by shard()
        # How generate decodes and token_logprobs scores (_strategies.py); shard() swaps both.
        static = resolve_kv_cache(config.kv_cache, device) == "static"
        self._decoding: Decoding = StaticDecoding() if static else GenerateDecoding()
        self._scoring: Scoring = LocalScoring()

    # ------------------------------------------------------------------ construction
    @classmethod
    def load(cls, config: PolicyConfig = _DEFAULT_CONFIG) -> Policy:
        """Load `config.model` (alias, hub id, directory or .gguf) and apply LoRA.

        Raises ModelNotAvailableError, naming the fix, when the model cannot be found offline.
        """
        source = resolve_model_source(config.model)
        device = resolve_device(config.device)
        if device.type == "cpu":
            fix_cpu_mmap_threshold()  # before the weights' blocks (_memory.py)
        model, tokenizer = load_pretrained(source, resolve_dtype(config.dtype, device))
        return cls.from_model(model, tokenizer, config)

    @classmethod
    def from_model(
        cls, model: Any, tokenizer: Any, config: PolicyConfig = _DEFAULT_CONFIG
    ) -> Policy:
        """Wrap an already-built transformers causal LM (or a peft model, used as is).

        Casts to the configured dtype, enables gradient checkpointing if asked (for forwards of
        at least `checkpoint_min_tokens` tokens), applies LoRA
        (seeded by config.seed) and moves the model to the configured device.
        """
        device = resolve_device(config.device)
        dtype = resolve_dtype(config.dtype, device)
        if device.type == "cpu":
            fix_cpu_mmap_threshold()  # freed activations go back to the system (_memory.py)
        if tokenizer.eos_token_id is None:
            raise ValueError(
                "the tokenizer has no eos token; set tokenizer.eos_token before wrapping it"
            )
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token  # padding is always masked out
        if not isinstance(model, PeftModel):
            model.to(dtype=dtype)
            if config.gradient_checkpointing:
                # Non-reentrant: no reliance on input-embedding grad hooks under LoRA.
                kwargs = {"use_reentrant": False}
                if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
                    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
                else:
                    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
            if config.lora_rank > 0:
                with fork_rng_seeded(config.seed, torch.device("cpu")):
                    model = wrap_with_lora(
                        model,
                        rank=config.lora_rank,
                        alpha=config.lora_alpha,
                        dropout=config.lora_dropout,
                        target_modules=config.lora_target_modules,
                    )
            else:
                model.requires_grad_(True)
        set_checkpoint_min_tokens(model, config.checkpoint_min_tokens)
        model.to(device)
        return cls(model, tokenizer, config, device)

    def _collect_eos_ids(self) -> frozenset[int]:
        """Sampling stops at any of: the chat template's end of turn and turn start
        (``_turns.py``), the tokenizer's eos, the generation config's eos."""
        turns = turn_tokens(self.tokenizer)
        ids = {int(self.tokenizer.eos_token_id)}
        ids.update(i for i in (turns.end_of_turn, turns.turn_start) if i is not None)
        configured = getattr(self._hf_model.generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            ids.add(configured)
        elif configured is not None:
            ids.update(int(i) for i in configured)
        return frozenset(ids)

    # ------------------------------------------------------------------ modes and parameters
    def train(self) -> Policy:
        """Training mode. Sampling's KV cache is not needed while training: an uncompiled
        decoder's (the CPU's) is freed, about 0.7 GB in the CPU default's steps; the next
        sampling call allocates its own. A compiled decoder keeps it (its graphs hold it)."""
        self.model.train()
        if self._local.decoder is not None:
            self._local.decoder.release()
        return self

    def eval(self) -> Policy:
        self.model.eval()
        return self

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The policy's own LoRA parameters (lora_rank > 0; not a critic's adapter beside
        them), or every parameter (full fine-tuning)."""
        if self._adapter is not None:
            own = adapter_parameters(self.model, self._adapter)
            return [p for p in own if p.requires_grad]
        return [p for p in self.model.parameters() if p.requires_grad]

    def adapters_disabled(self) -> AbstractContextManager[None]:
        """A context in which the policy is its base model: every LoRA adapter (a critic's too)
        switched off, e.g. for the log-probs of a KL reference. Afterwards every parameter's
        requires_grad is as it was before (peft's own switch would leave only the active
        adapter trainable). Needs a LoRA policy (lora_rank > 0)."""
        if not isinstance(self.model, PeftModel):
            raise ValueError(
                "a fully fine-tuned policy (lora_rank == 0) has no adapter to switch off, so its "
                "base model is not at hand; load the base model as a policy of its own instead"
            )
        return adapters_disabled(self.model)

    def optimizer(self, lr: float, **kwargs: Any) -> PolicyOptimizer:
        """AdamW over `trainable_parameters()`, stepped through accelerate (one device or
        several processes); keyword arguments as `PolicyOptimizer`."""
        kwargs.setdefault("cpu", self.device.type == "cpu")
        return PolicyOptimizer(self.trainable_parameters(), lr=lr, **kwargs)

    @property
    def sharded(self) -> bool:
        return self._sharded_root is not None

    def shard(self) -> Policy:
        """Shard the model over the processes of the default process group (FSDP2,
        `_sharding.py`): each decoder layer is one unit, the embeddings and head the root.

        Call it after the process group exists (torchrun / accelerate launch, then any
        `accelerate.Accelerator()`), and before `optimizer()`, which must see the sharded
        parameters. `token_logprobs`, the optimizer step, `generate` and `save` then work as
        before; each process passes its own share of the batch. `generate` then runs
        transformers' `generate` (uncompiled; every layer is gathered at every step).
        `export_merged`, `load_adapter` and a critic on the policy's backbone are refused.
        """
        if self._sharded_root is None:
            self._sharded_root = shard(self._hf_model, self.device)
            self._decoding = ShardedDecoding(self._sharded_root)
            self._scoring = ShardedScoring(self._sharded_root)
        return self

    # ------------------------------------------------------------------ prompting
    def chat_prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of `messages` under the tokenizer's chat template, ending with the
        assistant generation prompt."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat template; set tokenizer.chat_template (a Jinja string)"
            )
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True
        )
        ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded  # BatchEncoding or list
        return [int(i) for i in ids]

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int] | Sequence[Mapping[str, str]]],
        *,
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        stop: Sequence[str] = (),
    ) -> list[list[Sample]]:
        """Sample `n` responses per prompt: result[i][j] is sample j of prompts[i].

        A prompt is token ids, or chat messages (`[{"role": ..., "content": ...}]`, put through
        the chat template as by `chat_prompt_ids`); `Sample.prompt_ids` holds the ids either way.

        All prompts x n rows run as one left-padded batch with the KV cache, in eval mode (the
        previous mode is restored). temperature 0 means greedy. seed=None draws the seed from
        the policy's own stream (seeded by config.seed); the global RNG state is left untouched.
        """
        stop = checked_sampling_args(n, max_new_tokens, temperature, top_p, top_k, stop)
        if not prompts:
            if self._decoding.collective:  # sharded: the others' gathers need this process
                self.generate([[self._pad_id]], max_new_tokens=max_new_tokens, seed=0)
            return []
        prompt_ids = [self._prompt_ids(p) for p in prompts]
        if any(len(p) == 0 for p in prompt_ids):
            raise ValueError("every prompt needs at least one token")

        rows = [list(p) for p in prompt_ids for _ in range(n)]
        input_ids, attention_mask = left_padded(rows, self._pad_id)
        run_seed = (
            seed
            if seed is not None
            else int(torch.randint(0, 2**62, (1,), generator=self._seed_stream))
        )
        was_training = self.model.training
        self.model.eval()
        try:
            with fork_rng_seeded(run_seed, self.device):
                request = DecodeRequest(
                    input_ids.to(self.device),
                    attention_mask.to(self.device),
                    max_new_tokens,
                    Warp(temperature=temperature, top_p=top_p, top_k=top_k),
                    stop,
                    self.config.repetition_stop,
                )
                new_tokens, logprobs = self._decoding.decode(self._local, request)
        finally:
            self.model.train(was_training)

        samples = [
            build_sample(
                self.tokenizer, row, ids, lps, self._eos_ids, stop, self.config.repetition_stop
            )
            for row, ids, lps in zip(rows, new_tokens.tolist(), logprobs.tolist(), strict=True)
        ]
        return [samples[i * n : (i + 1) * n] for i in range(len(prompt_ids))]

    def release_memory(self) -> dict[str, int]:
        """The device allocator's unused reserve given back (``_memory.release_device_memory``):
        call it before other processes need the GPU (the sandbox's workers). Bytes allocated,
        reserved and released; zeros on the CPU."""
        return release_device_memory(self.device)

    def decode_stats(self) -> dict[str, float]:
        """The static-cache decoder's counters (`DecodeStats`): calls, new shapes and the
        seconds their first steps took; zeros before the first static-cache sampling."""
        decoder = self._local.decoder
        return asdict(decoder.stats if decoder is not None else DecodeStats())

    # The static-cache decoder and the head's separability are the local model's; tests and
    # benchmarks reach them here.
    @property
    def _decoder(self) -> StaticDecoder | None:
        return self._local.decoder

    @_decoder.setter
    def _decoder(self, decoder: StaticDecoder | None) -> None:
        self._local.decoder = decoder

    @property
    def _separable_head(self) -> bool:
        return self._local.separable_head

    @_separable_head.setter
    def _separable_head(self, separable: bool) -> None:
        self._local.separable_head = separable

    def _prompt_ids(self, prompt: Sequence[int] | Sequence[Mapping[str, str]]) -> list[int]:
        if len(prompt) and all(isinstance(m, Mapping) for m in prompt):
            return self.chat_prompt_ids([dict(m) for m in prompt])  # type: ignore[arg-type]
        if not all(isinstance(t, int) for t in prompt):
            raise TypeError("a prompt is a list of token ids or a list of chat messages (dicts)")
        return [int(t) for t in prompt]  # type: ignore[arg-type]

    # ------------------------------------------------------------------ scoring
    def token_logprobs(
        self,
        prompt_ids: list[list[int]],
        response_ids: list[list[int]],
        *,
        with_entropy: bool = False,
        entropy_grad: bool = True,
        temperature: float = 1.0,
    ) -> TokenLogprobs:
        """log p(response token | prompt, earlier response tokens) for a batch, with grad.

        Sequences are right-padded into one forward pass; the vocabulary head is applied to the
        response positions only, in chunks (see _scoring), so no [B, T, vocab] tensor is built.
        Runs in the current mode (call eval() first to disable dropout). `with_entropy` also
        returns each position's entropy, with grad; `entropy_grad=False` returns it as a plain
        value (a statistic): the same numbers, and the backward of the log-probs then holds
        none of the entropy's [chunk, vocab] tensors. `temperature` (> 0) scores under
        softmax(logits / temperature), the distribution `generate` samples from at that
        temperature (without top-k / top-p): an RL update on answers sampled at T compares its
        log-probs with the sampler's at T; the entropy is that distribution's too.
        """
        batch = right_padded_batch(prompt_ids, response_ids, self._pad_id, self.device, temperature)
        mask = batch.mask
        if batch.empty:
            zeros = torch.zeros(mask.shape, dtype=torch.float32, device=self.device)
            zeros = self._scoring.idle(self._local, zeros)  # sharded: the collectives need us
            return TokenLogprobs(zeros, mask, zeros.clone() if with_entropy else None)
        logprobs_n, entropy_n = self._scoring.score(self._local, batch, with_entropy, entropy_grad)
        zeros = torch.zeros(mask.shape, dtype=torch.float32, device=self.device)
        logprobs = zeros.masked_scatter(mask, logprobs_n)
        entropy = zeros.masked_scatter(mask, entropy_n) if with_entropy else None
        return TokenLogprobs(logprobs=logprobs, mask=mask, entropy=entropy)
