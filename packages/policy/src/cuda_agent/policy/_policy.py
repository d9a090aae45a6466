"""Policy: a causal LM (+ LoRA) that samples responses and scores them with gradients."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from peft.utils import load_peft_weights, set_peft_model_state_dict
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

from cuda_agent.policy._arguments import checked_sampling_args
from cuda_agent.policy._config import (
    PolicyConfig,
    resolve_device,
    resolve_dtype,
    resolve_kv_cache,
)
from cuda_agent.policy._decoding import StaticDecoder, Warp
from cuda_agent.policy._loading import (
    adapter_parameters,
    load_pretrained,
    resolve_model_source,
    wrap_with_lora,
)
from cuda_agent.policy._optim import PolicyOptimizer
from cuda_agent.policy._sampling import (
    Sample,
    SamplerLogprobRecorder,
    StopOnStrings,
    build_sample,
    sampling_processors,
)
from cuda_agent.policy._scoring import (
    ScoringBatch,
    TokenLogprobs,
    adapter_autocast,
    logprobs_from_hidden,
    right_padded_batch,
)
from cuda_agent.policy._sharding import ShardedRoot, full_state_dict, is_sharded, shard

_DEFAULT_CONFIG = PolicyConfig()


@dataclass(frozen=True)
class _Request:
    """One `generate` call's rows, left-padded on the policy's device, and its settings."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    max_new_tokens: int
    warp: Warp
    stop: Sequence[str]


POLICY_CONFIG_FILE = "policy_config.json"


@contextmanager
def _fork_rng_seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed the RNGs that sampling on `device` uses, restoring the caller's RNG state afterwards."""
    cuda_devices = []
    if device.type == "cuda":
        cuda_devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda_devices):
        torch.random.default_generator.manual_seed(seed)
        for index in cuda_devices:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield


def _head_is_separable(hf_model: Any, device: torch.device) -> bool:
    """True when logits == output_head(decoder(...).last_hidden_state).

    token_logprobs relies on it to apply the vocabulary head to response positions only;
    models that post-process logits (soft-capping, scaling) fail this check and take the
    plain full-logits path instead.
    """
    try:
        decoder, head = hf_model.get_decoder(), hf_model.get_output_embeddings()
    except (AttributeError, NotImplementedError, ValueError):
        return False
    if decoder is None or head is None:
        return False
    was_training = hf_model.training
    hf_model.eval()
    try:
        ids = torch.tensor([[0, 1, 2]], device=device)
        with torch.no_grad():
            full = hf_model(input_ids=ids, use_cache=False).logits
            split = head(decoder(input_ids=ids, use_cache=False).last_hidden_state)
    finally:
        hf_model.train(was_training)
    return bool(
        full.shape == split.shape
        and torch.allclose(full.float(), split.float(), rtol=1e-3, atol=1e-3)
    )


class Policy:
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
        self._separable_head = _head_is_separable(self._hf_model, device)
        # A private stream of per-call seeds, so seed=None runs are reproducible from config.seed.
        self._seed_stream = torch.Generator().manual_seed(config.seed)
        self._decoder: StaticDecoder | None = None  # built on the first static-cache sampling
        self._sharded_root: ShardedRoot | None = None  # set by shard()

    # ------------------------------------------------------------------ construction
    @classmethod
    def load(cls, config: PolicyConfig = _DEFAULT_CONFIG) -> Policy:
        """Load `config.model` (alias, hub id, directory or .gguf) and apply LoRA.

        Raises ModelNotAvailableError, naming the fix, when the model cannot be found offline.
        """
        source = resolve_model_source(config.model)
        device = resolve_device(config.device)
        model, tokenizer = load_pretrained(source, resolve_dtype(config.dtype, device))
        return cls.from_model(model, tokenizer, config)

    @classmethod
    def from_model(
        cls, model: Any, tokenizer: Any, config: PolicyConfig = _DEFAULT_CONFIG
    ) -> Policy:
        """Wrap an already-built transformers causal LM (or a peft model, used as is).

        Casts to the configured dtype, enables gradient checkpointing if asked, applies LoRA
        (seeded by config.seed) and moves the model to the configured device.
        """
        device = resolve_device(config.device)
        dtype = resolve_dtype(config.dtype, device)
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
                with _fork_rng_seeded(config.seed, torch.device("cpu")):
                    model = wrap_with_lora(
                        model,
                        rank=config.lora_rank,
                        alpha=config.lora_alpha,
                        dropout=config.lora_dropout,
                        target_modules=config.lora_target_modules,
                    )
            else:
                model.requires_grad_(True)
        model.to(device)
        return cls(model, tokenizer, config, device)

    def _collect_eos_ids(self) -> frozenset[int]:
        ids = {int(self.tokenizer.eos_token_id)}
        configured = getattr(self._hf_model.generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            ids.add(configured)
        elif configured is not None:
            ids.update(int(i) for i in configured)
        return frozenset(ids)

    # ------------------------------------------------------------------ modes and parameters
    def train(self) -> Policy:
        self.model.train()
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
        return self

    def _refuse_if_sharded(self, what: str) -> None:
        if self._sharded_root is not None:
            raise RuntimeError(f"{what} is not supported on a sharded policy; do it before shard()")

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
            if self._sharded_root is not None:
                # Every process must take part in the other processes' weight gathers.
                self.generate([[self._pad_id]], max_new_tokens=max_new_tokens, seed=0)
            return []
        prompt_ids = [self._prompt_ids(p) for p in prompts]
        if any(len(p) == 0 for p in prompt_ids):
            raise ValueError("every prompt needs at least one token")

        rows = [list(p) for p in prompt_ids for _ in range(n)]
        prompt_length = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), prompt_length), self._pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), prompt_length), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, prompt_length - len(row) :] = torch.tensor(row)
            attention_mask[i, prompt_length - len(row) :] = 1

        cache = resolve_kv_cache(self.config.kv_cache, self.device)
        run_seed = (
            seed
            if seed is not None
            else int(torch.randint(0, 2**62, (1,), generator=self._seed_stream))
        )
        was_training = self.model.training
        self.model.eval()
        try:
            with _fork_rng_seeded(run_seed, self.device):
                request = _Request(
                    input_ids.to(self.device),
                    attention_mask.to(self.device),
                    max_new_tokens,
                    Warp(temperature=temperature, top_p=top_p, top_k=top_k),
                    stop,
                )
                if self._sharded_root is not None:
                    new_tokens, logprobs = self._sharded_root.run(
                        self._decode_with_generate, request
                    )
                elif cache == "static":
                    new_tokens, logprobs = self._decode_static(request)
                else:
                    new_tokens, logprobs = self._decode_with_generate(request)
        finally:
            self.model.train(was_training)

        samples = [
            build_sample(self.tokenizer, row, ids, lps, self._eos_ids, stop)
            for row, ids, lps in zip(rows, new_tokens.tolist(), logprobs.tolist(), strict=True)
        ]
        return [samples[i * n : (i + 1) * n] for i in range(len(prompt_ids))]

    def _decode_static(self, request: _Request) -> tuple[torch.Tensor, torch.Tensor]:
        """Our own decoding loop (`_decoding.py`), compiled into CUDA graphs on CUDA."""
        if self._decoder is None:
            self._decoder = StaticDecoder(self._hf_model, compile=self.device.type == "cuda")
        stops = StopOnStrings(self.tokenizer, request.stop, 0) if request.stop else None
        decoded = self._decoder.decode(
            request.input_ids,
            request.attention_mask,
            max_new_tokens=request.max_new_tokens,
            warp=request.warp,
            eos_ids=sorted(self._eos_ids),
            pad_id=self._pad_id,
            stop_found=stops.rows_with_stop if stops else None,
            stop_lookback=stops.window if stops else 0,
        )
        return decoded.tokens, decoded.logprobs

    def _decode_with_generate(self, request: _Request) -> tuple[torch.Tensor, torch.Tensor]:
        """transformers' `generate` with a dynamic cache; the sampler's log-probs recorded."""
        input_ids, attention_mask, stop = request.input_ids, request.attention_mask, request.stop
        temperature, top_p, top_k = request.warp.temperature, request.warp.top_p, request.warp.top_k
        max_new_tokens, prompt_length = request.max_new_tokens, input_ids.shape[1]
        recorder = SamplerLogprobRecorder()
        processors = LogitsProcessorList(
            [*sampling_processors(temperature, top_p, top_k), recorder]
        )
        criteria = StoppingCriteriaList(
            [StopOnStrings(self.tokenizer, stop, prompt_length)] if stop else []
        )
        # Warpers run as our own processors (before the recorder), so generate's are all off
        # (its global default top_k is 50). Greedy ignores them, so they are only set to sample.
        neutral_warpers = {"temperature": 1.0, "top_k": 0, "top_p": 1.0} if temperature > 0 else {}
        generation_config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=temperature > 0,
            num_beams=1,
            use_cache=True,
            **neutral_warpers,
            pad_token_id=self._pad_id,
            eos_token_id=sorted(self._eos_ids),
        )
        with self._neutral_generation_defaults():
            sequences = self._hf_model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=generation_config,
                logits_processor=processors,
                stopping_criteria=criteria,
            )
        new_tokens = sequences[:, prompt_length:]
        return new_tokens.cpu(), recorder.finish(new_tokens).cpu()

    def _prompt_ids(self, prompt: Sequence[int] | Sequence[Mapping[str, str]]) -> list[int]:
        if len(prompt) and all(isinstance(m, Mapping) for m in prompt):
            return self.chat_prompt_ids([dict(m) for m in prompt])  # type: ignore[arg-type]
        if not all(isinstance(t, int) for t in prompt):
            raise TypeError("a prompt is a list of token ids or a list of chat messages (dicts)")
        return [int(t) for t in prompt]  # type: ignore[arg-type]

    @contextmanager
    def _neutral_generation_defaults(self) -> Iterator[None]:
        """generate fills unset options from model.generation_config (a hub model may ship, say,
        repetition_penalty=1.05 or top_k=20), which would silently change the sampling
        distribution; swap in a neutral one for the call."""
        saved = self._hf_model.generation_config
        self._hf_model.generation_config = GenerationConfig()
        try:
            yield
        finally:
            self._hf_model.generation_config = saved

    # ------------------------------------------------------------------ scoring
    def token_logprobs(
        self,
        prompt_ids: list[list[int]],
        response_ids: list[list[int]],
        *,
        with_entropy: bool = False,
    ) -> TokenLogprobs:
        """log p(response token | prompt, earlier response tokens) for a batch, with grad.

        Sequences are right-padded into one forward pass; the vocabulary head is applied to the
        response positions only, in chunks (see _scoring), so no [B, T, vocab] tensor is built.
        Runs in the current mode (call eval() first to disable dropout).
        """
        batch = right_padded_batch(prompt_ids, response_ids, self._pad_id, self.device)
        mask = batch.mask
        if batch.empty:
            zeros = torch.zeros(mask.shape, dtype=torch.float32, device=self.device)
            if self._sharded_root is not None:
                # Every process must take part in the forward's and the backward's collectives:
                # score one dummy token and keep it in the graph with weight 0.
                dummy = right_padded_batch(
                    [[self._pad_id]], [[self._pad_id]], self._pad_id, self.device
                )
                logprobs_n, _ = self._sharded_root.run(self._flat_logprobs, dummy, False)
                zeros = zeros + 0.0 * logprobs_n.sum()
            return TokenLogprobs(zeros, mask, zeros.clone() if with_entropy else None)
        if self._sharded_root is not None:
            logprobs_n, entropy_n = self._sharded_root.run(self._flat_logprobs, batch, with_entropy)
        else:
            logprobs_n, entropy_n = self._flat_logprobs(batch, with_entropy)
        zeros = torch.zeros(mask.shape, dtype=torch.float32, device=self.device)
        logprobs = zeros.masked_scatter(mask, logprobs_n)
        entropy = zeros.masked_scatter(mask, entropy_n) if with_entropy else None
        return TokenLogprobs(logprobs=logprobs, mask=mask, entropy=entropy)

    def _flat_logprobs(
        self, batch: ScoringBatch, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """([N] log-probs, [N] entropies) of the N real response tokens of `batch`."""
        input_ids, attention_mask = batch.input_ids, batch.attention_mask
        positions, targets, mask = batch.positions, batch.targets, batch.mask

        head: Any
        if self._separable_head:
            decoder, head = self._hf_model.get_decoder(), self._hf_model.get_output_embeddings()
            with adapter_autocast(self._hf_model):
                states_bth = decoder(
                    input_ids=input_ids, attention_mask=attention_mask, use_cache=False
                ).last_hidden_state
            vocab_size = int(head.weight.shape[0])
        else:  # logits post-processed by the model: take them whole (more memory, still exact)
            with adapter_autocast(self._hf_model):
                states_bth = self._hf_model(
                    input_ids=input_ids, attention_mask=attention_mask, use_cache=False
                ).logits
            head, vocab_size = torch.nn.Identity(), int(states_bth.shape[-1])
        index_brh = positions[..., None].expand(-1, -1, states_bth.shape[-1])
        selected_brh = states_bth.gather(1, index_brh)
        return logprobs_from_hidden(
            head, selected_brh[mask], targets[mask], vocab_size, with_entropy=with_entropy
        )

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """Write the LoRA adapter (or the full model when lora_rank == 0), the tokenizer and
        policy_config.json to directory `path`.

        On a sharded policy every process must call it (the weights are gathered); process 0
        writes.
        """
        path = Path(path)
        if self._sharded_root is None:
            self._write(path, None)
            return
        import torch.distributed as dist

        state = self._gathered_state()  # collective
        try:
            if dist.get_rank() == 0:
                self._write(path, state)
        finally:
            dist.barrier()

    def _gathered_state(self) -> dict[str, torch.Tensor]:
        """The weights `save` writes, gathered whole from the shards (every process calls it;
        keys as the unsharded model names them). LoRA: the adapter only, not the base model."""
        assert self._sharded_root is not None
        if not isinstance(self.model, PeftModel):
            return {
                k.removeprefix("hf_model."): v
                for k, v in full_state_dict(self._sharded_root).items()
            }
        state = {}
        for name, param in self._sharded_root.named_parameters():
            if "lora_" in name:
                whole = param.full_tensor() if is_sharded(param) else param  # type: ignore[attr-defined]
                state["base_model.model." + name.removeprefix("hf_model.")] = whole.detach().cpu()
        return state

    def _write(self, path: Path, state: dict[str, torch.Tensor] | None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if isinstance(self.model, PeftModel):
            # The vocabulary is never resized, so embedding matrices need not be saved.
            adapters = [self._adapter] if self._adapter is not None else None
            self.model.save_pretrained(
                str(path), save_embedding_layers=False, selected_adapters=adapters, state_dict=state
            )
        else:
            self.model.save_pretrained(str(path), state_dict=state)
        self.tokenizer.save_pretrained(str(path))
        (path / POLICY_CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2) + "\n")

    def export_merged(self, path: str | Path) -> Path:
        """Write a plain transformers model directory (LoRA merged into the weights, in the
        model's dtype) plus the tokenizer, for serving or sharing: `from_pretrained(path)` loads
        it without peft. The policy itself is left as it was (still an adapter, still trainable).
        """
        self._refuse_if_sharded("export_merged")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = self._hf_model.state_dict()
        if isinstance(self.model, PeftModel):
            from peft.tuners.lora import LoraLayer

            adapter = self._adapter or self.model.active_adapter
            merged: dict[str, torch.Tensor] = {}
            with torch.no_grad():
                for name, module in self._hf_model.named_modules():
                    if isinstance(module, LoraLayer) and adapter in module.lora_A:
                        lora: Any = module  # a Linear LoRA layer (peft's types stop at the mixin)
                        base = lora.get_base_layer().weight
                        delta = lora.get_delta_weight(adapter).to(torch.float32)
                        merged[f"{name}.weight"] = (base.float() + delta).to(base.dtype)
            state = {
                key.replace(".base_layer.", "."): value
                for key, value in state.items()
                if "lora_" not in key
            }
            state.update(merged)
        self._hf_model.save_pretrained(str(path), state_dict=state)
        self.tokenizer.save_pretrained(str(path))
        return path

    def load_adapter(self, path: str | Path) -> None:
        """Load weights written by `save` into this policy (adapter, or full model weights when
        lora_rank == 0), e.g. to resume training."""
        self._refuse_if_sharded("load_adapter")
        path = Path(path)
        if isinstance(self.model, PeftModel):
            self._load_lora(path)
        else:
            self._load_full(path)

    def _load_lora(self, path: Path) -> None:
        adapter_config = path / "adapter_config.json"
        if not adapter_config.is_file():
            raise FileNotFoundError(
                f"{adapter_config} not found: load_adapter expects a directory written by Policy.save "
                "with lora_rank > 0"
            )
        saved_rank = json.loads(adapter_config.read_text()).get("r")
        if saved_rank != self.config.lora_rank:
            raise ValueError(
                f"the adapter in {path} has rank {saved_rank} but this policy has lora_rank="
                f"{self.config.lora_rank}; build the policy with the same PolicyConfig as when saving"
            )
        weights = load_peft_weights(str(path), device=str(self.device))
        result: Any = set_peft_model_state_dict(self.model, weights)
        missing = [k for k in result.missing_keys if "lora_" in k]
        if result.unexpected_keys or missing:
            raise ValueError(
                f"adapter in {path} does not match this model (unexpected: {result.unexpected_keys[:5]}, "
                f"missing: {missing[:5]}); use the same base model and lora_target_modules as when saving"
            )

    def _load_full(self, path: Path) -> None:
        from safetensors.torch import load_file

        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(
                f"no *.safetensors weights in {path}; expected a directory written by Policy.save"
            )
        state: dict[str, torch.Tensor] = {}
        for file in files:
            state.update(load_file(str(file), device=str(self.device)))
        result = self.model.load_state_dict(state, strict=False)
        # Tied weights (lm_head sharing the embedding) are saved once: their absence is expected.
        own = self.model.state_dict()
        loaded_storage = {own[k].data_ptr() for k in state if k in own}
        missing = [k for k in result.missing_keys if own[k].data_ptr() not in loaded_storage]
        if result.unexpected_keys or missing:
            raise ValueError(
                f"weights in {path} do not match this model (unexpected: {result.unexpected_keys[:5]}, "
                f"missing: {missing[:5]}); use the same base model as when saving"
            )
