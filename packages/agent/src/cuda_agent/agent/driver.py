"""The multi-turn loop: write, evaluate, read the feedback, refine. The only place with
concurrency.

Each turn, the live episodes of a micro-batch sample together (one ``generate`` call; the first
turn samples ``n`` answers per task from one prompt), its usable answers go to the sandbox at
once (``evaluate_many`` in a background thread: the pool evaluates them concurrently) and the
next micro-batch samples meanwhile; when a micro-batch's verdicts are in, each of its episodes
gets its reward, its feedback and its next prompt. (``micro_batches=1``: every live episode
samples in one call, then all are evaluated.) An episode stops when its reward reaches the target,
at ``max_turns``, at its token budget, after ``max_malformed`` unusable answers in a row, when it
submits the same candidate twice in a row, or when the policy or the harness fails. Single-turn
rollouts are ``max_turns=1``.

With a local policy (a tokenizer with a chat template) the episode is token in, token out: the
next prompt is the previous prompt, the answer's tokens as sampled and the rendered feedback
(``chat.ChatRenderer.delta``). A policy without a tokenizer (a remote endpoint) is given the
conversation as chat messages instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.kernel_sandbox import EvalResult, Task
from cuda_agent.reward import MilestoneValues, milestone_reward

from .chat import ChatRenderer
from .episode import Episode, History, Turn
from .feedback import LOOP_NOTE
from .protocols import Action, Protocol, answer_text, protocol

RewardFn = Callable[[EvalResult], float]


@dataclass(frozen=True)
class SamplingParams:
    n: int = 4  # answers per task (episodes per group)
    max_new_tokens: int = 320  # per turn
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None


@dataclass(frozen=True)
class AgentConfig:
    max_turns: int = 4
    history: History = "full"
    keep_last: int = 1  # last_k: how many earlier turns (code and feedback) a prompt keeps
    token_budget: int = 0  # tokens an episode's sequence may reach (0: no budget)
    target_reward: float = MilestoneValues().faster_than_compile  # milestone 3
    max_malformed: int = 2  # unusable answers in a row that end an episode
    stop_on_repeat: bool = True  # the same candidate twice in a row ends the episode
    protocol: str = "fenced"
    goal: str = "the target is 5% faster than torch.compile"
    # Groups split into this many micro-batches that take turns: one samples while the others'
    # answers are evaluated (1: sample everything, then evaluate everything).
    micro_batches: int = 2
    # Identical answers to one task in one evaluation call (a group whose samples agree) get
    # one verdict, the sandbox judging the program once: they are the same program, and their
    # separate timings would differ by noise alone, which a group-relative advantage turns
    # into a training signal. The copies carry ``extra["shared_verdict"]``.
    share_verdicts: bool = True
    # The policy samples as a guest of the sandbox's device (``evaluator.device_work``, where
    # the evaluator has it and the policy names its ``device``): no timing runs beside the
    # sampling on that device, while the other micro-batches' correctness checks go on; a
    # timing waits for the sampling under way. False: timings may share the GPU with the
    # sampling (faster, noisier speedups).
    quiet_timing: bool = True

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.keep_last < 0 or self.token_budget < 0:
            raise ValueError("max_turns must be >= 1, keep_last and token_budget >= 0")
        if self.history not in ("full", "last_k"):
            raise ValueError(f"history must be 'full' or 'last_k', not {self.history!r}")
        if self.max_malformed < 1 or self.micro_batches < 1:
            raise ValueError("max_malformed and micro_batches must be >= 1")


@dataclass(frozen=True)
class RolloutBatch:
    """The episodes of one batch and where its wall time went (``sampling``, ``evaluation``:
    waiting for verdicts while nothing sampled, ``agent``: everything else, the loop's own
    overhead; ``sandbox``: the wall time the sandbox had answers to judge, overlapping
    sampling or not), the number of ``evaluations`` (answers given a verdict), of
    ``sandbox_jobs`` (programs the sandbox judged: fewer when identical answers shared one,
    ``AgentConfig.share_verdicts``), and ``sandbox_windows``: each ``evaluate_many`` call's
    (start, end) in ``time.monotonic()`` seconds."""

    episodes: list[Episode]
    seconds: dict[str, float]
    evaluations: int = 0
    sandbox_windows: tuple[tuple[float, float], ...] = ()
    sandbox_jobs: int = 0


@dataclass
class _Live:
    task: Task
    group: int
    messages: list[dict[str, Any]]  # the conversation so far (full history)
    first: list[dict[str, Any]]  # the task's first messages
    prompt: list[int] | list[dict[str, Any]]  # what the policy is given next
    context: list[int]  # tokens of ``prompt`` not yet part of a turn
    state: Any = None  # the protocol's, for this episode
    turns: list[Turn] = field(default_factory=list)
    malformed: int = 0
    stop: str = ""


def run_episodes(
    policy: Any,
    evaluator: Any,
    tasks: Sequence[Task],
    sampling: SamplingParams = SamplingParams(),
    config: AgentConfig = AgentConfig(),
    reward_fn: RewardFn = milestone_reward,
    malformed_reward: float = MilestoneValues().fail,
    on_turn: Callable[[int, Turn], None] | None = None,
) -> RolloutBatch:
    """``sampling.n`` episodes per task, ordered by task then sample. ``on_turn(episode, turn)``
    is called as each turn is judged (a live display; its errors are not caught)."""
    started = time.perf_counter()
    spent = {"sampling": 0.0, "evaluation": 0.0}
    proto = protocol(config.protocol)
    renderer = _renderer(policy, proto.tools())
    backend = evaluator.backend
    live: list[_Live] = []
    firsts = []
    for g, task in enumerate(tasks):
        first = proto.first_messages(task, backend)
        prompt: list[Any] = renderer.prompt(first) if renderer else list(first)
        firsts.append(prompt)
        for _ in range(sampling.n):
            ids = list(prompt) if renderer else []
            live.append(
                _Live(task, g, list(first), list(first), list(prompt), ids, proto.new_state())
            )
    position = {id(e): i for i, e in enumerate(live)}
    # Micro-batches of whole groups: while one samples, the others' answers are evaluated.
    parts = max(1, min(config.micro_batches, len(tasks)))
    chunks = [list(range(len(tasks)))[m::parts] for m in range(parts)]
    micro = [[e for e in live if e.group in chunk] for chunk in chunks]
    micro_firsts = [[firsts[g] for g in chunk] for chunk in chunks]
    turn_of = [0] * parts
    hold = _device_hold(policy, evaluator, config)
    pending: dict[int, tuple[Future[list[EvalResult | None]], list[Any], list[Action]]] = {}
    windows: list[tuple[float, float]] = []  # each evaluate_many call's (start, end)

    def resolve(m: int) -> None:
        future, answered, actions = pending.pop(m)
        t0 = time.perf_counter()
        results = future.result()
        spent["evaluation"] += time.perf_counter() - t0  # waited for, not overlapped
        for (episode, sample), action, result in zip(answered, actions, results, strict=True):
            _advance(episode, sample, action, result, proto, renderer, sampling, config,
                     turn_of[m] - 1, reward_fn, malformed_reward)  # fmt: skip
            if on_turn is not None:
                on_turn(position[id(episode)], episode.turns[-1])

    with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="cuda-agent-eval") as pool:
        while True:
            progressed = False
            for m in range(parts):
                if m in pending:
                    resolve(m)
                # (after the last turn every episode has stopped: ``_advance`` decides it)
                active = [e for e in micro[m] if not e.stop]
                if not active:
                    continue
                progressed = True
                turn = turn_of[m]
                turn_of[m] += 1
                t0 = time.perf_counter()
                shared = micro_firsts[m] if turn == 0 else None
                samples = _sample(policy, active, shared, sampling, config, turn, hold)
                spent["sampling"] += time.perf_counter() - t0
                if samples is None:
                    continue  # every active episode ended (budget or a policy error)
                answered = [(e, x) for e, x in zip(active, samples, strict=True) if x is not None]
                actions = [proto.parse(x.text, e.state) for e, x in answered]
                jobs = [(e.task, a) for (e, _), a in zip(answered, actions, strict=True)]
                job = pool.submit(_evaluate, evaluator, jobs, windows, config.share_verdicts)
                pending[m] = (job, answered, actions)
            if not progressed and not pending:
                break
    episodes = [
        Episode(e.task.name, e.group, config.history, tuple(e.turns), e.stop, tuple(e.messages))
        for e in live
    ]
    total = time.perf_counter() - started
    spent["agent"] = max(0.0, total - spent["sampling"] - spent["evaluation"])
    spent["total"] = total
    spent["sandbox"] = _covered(windows)
    judged = [t.result for e in episodes for t in e.turns if t.result is not None]
    programs = sum("shared_verdict" not in r.extra for r in judged)
    return RolloutBatch(episodes, spent, len(judged), tuple(sorted(windows)), programs)


def first_prompt_ids(tokenizer: Any, task: Task, backend: str, protocol_name: str) -> list[int]:
    """The token ids of ``task``'s first prompt exactly as ``run_episodes`` gives it to a local
    policy: the protocol's first messages under the chat template (``ChatRenderer.prompt``,
    with the protocol's tools). The warm start's examples are built on it."""
    proto = protocol(protocol_name)
    return ChatRenderer(tokenizer, proto.tools()).prompt(proto.first_messages(task, backend))


def _covered(windows: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``windows``."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(windows):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


def _renderer(policy: Any, tools: list[dict[str, Any]] | None) -> ChatRenderer | None:
    tokenizer = getattr(policy, "tokenizer", None)
    return ChatRenderer(tokenizer, tools) if getattr(tokenizer, "chat_template", None) else None


def _device_hold(
    policy: Any, evaluator: Any, config: AgentConfig
) -> Callable[[], AbstractContextManager[Any]]:
    """What the policy's sampling holds (``AgentConfig.quiet_timing``): the evaluator's
    ``device_work`` on the policy's device where both exist, else nothing."""
    device, work = getattr(policy, "device", None), getattr(evaluator, "device_work", None)
    if not config.quiet_timing or device is None or work is None:
        return contextlib.nullcontext
    return lambda: work(str(device))


def _sample(
    policy: Any,
    active: list[_Live],
    firsts: list[Any] | None,
    sampling: SamplingParams,
    config: AgentConfig,
    turn: int,
    hold: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> list[Any] | None:
    """One answer per active episode (None for an episode that ended instead), sampled
    inside ``hold()``."""
    allowance = {}
    for e in active:
        room = sampling.max_new_tokens
        if config.token_budget and e.prompt and isinstance(e.prompt[0], int):
            room = min(room, config.token_budget - len(e.prompt))
        if room <= 0:
            e.stop = "token_budget"
        else:
            allowance[id(e)] = room
    asking = [e for e in active if id(e) in allowance]
    if not asking:
        return None
    answers: dict[int, Any] = {}
    seed = None if sampling.seed is None else sampling.seed + 7919 * turn
    # Episodes that may write the same number of tokens sample together; the first turn of a
    # full batch samples n answers per task from one prompt.
    by_room: dict[int, list[_Live]] = {}
    for e in asking:
        by_room.setdefault(allowance[id(e)], []).append(e)
    for room, group in by_room.items():
        kwargs: dict[str, Any] = dict(max_new_tokens=room, temperature=sampling.temperature,
                                      top_p=sampling.top_p, seed=seed)  # fmt: skip
        if sampling.top_k:  # (remote endpoints take no top_k)
            kwargs["top_k"] = sampling.top_k
        try:
            with hold():
                if firsts is not None and len(group) == len(active) == len(firsts) * sampling.n:
                    rows = policy.generate(firsts, n=sampling.n, **kwargs)
                    flat = [s for row in rows for s in row]
                else:
                    rows = policy.generate([e.prompt for e in group], n=1, **kwargs)
                    flat = [row[0] for row in rows]
        except Exception as exc:  # a policy failure ends these episodes, not the batch
            for e in group:
                e.stop = "error"
                e.messages.append({"role": "error", "content": f"{type(exc).__name__}: {exc}"})
            continue
        for e, s in zip(group, flat, strict=True):
            answers[id(e)] = s
    return [answers.get(id(e)) for e in active]


def _evaluate(
    evaluator: Any,
    jobs: list[tuple[Task, Action]],
    windows: list[tuple[float, float]],
    share: bool = True,
) -> list[EvalResult | None]:
    """Verdicts for the usable answers (concurrently, on the sandbox's pool); None for the
    rest. A harness failure becomes a ``runtime_error`` verdict for the answers it hit. The
    call's (start, end) goes to ``windows``. ``share``: identical answers to one task are
    judged once (``AgentConfig.share_verdicts``)."""
    started = time.monotonic()
    try:
        return _judge(evaluator, jobs, share)
    finally:
        windows.append((started, time.monotonic()))


def _judge(
    evaluator: Any, jobs: list[tuple[Task, Action]], share: bool = True
) -> list[EvalResult | None]:
    usable = [(task, a.candidate) for task, a in jobs if a.candidate is not None]
    # first[i]: the index in ``usable`` of the first answer identical to answer i
    first: list[int] = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, (task, candidate) in enumerate(usable):
        first.append(seen.setdefault(_same_program(task, candidate), i) if share else i)
    programs = sorted(set(first))
    try:
        judged = dict(zip(programs, evaluator.evaluate_many([usable[i] for i in programs]),
                          strict=True))  # fmt: skip
        verdicts = iter(judged[f] if f == i else _shared(judged[f]) for i, f in enumerate(first))
        found = [next(verdicts) if a.candidate is not None else None for _, a in jobs]
    except Exception as exc:
        failed = EvalResult(status="runtime_error", message=f"the evaluation failed: {exc}")
        found = [failed if a.candidate is not None else None for _, a in jobs]
    return found


def _same_program(task: Task, candidate: Any) -> tuple[str, str, str]:
    """What makes two answers one program: the task and the candidate, by content (source
    text, or a work directory's files; a path, which the protocols never give, by its name)."""
    if isinstance(candidate, Mapping):
        text = json.dumps(sorted(candidate.items()))
    else:
        text = f"{type(candidate).__name__}:{candidate}"
    return task.name, task.digest, text


def _shared(verdict: EvalResult) -> EvalResult:
    """``verdict`` for a copy of the answer it judged."""
    return dataclasses.replace(verdict, extra={**verdict.extra, "shared_verdict": True})


def _advance(
    e: _Live,
    sample: Any,
    action: Action,
    result: EvalResult | None,
    proto: Protocol,
    renderer: ChatRenderer | None,
    sampling: SamplingParams,
    config: AgentConfig,
    turn: int,
    reward_fn: RewardFn,
    malformed_reward: float,
) -> None:
    """Record the turn, decide whether the episode goes on, and build its next prompt."""
    truncated = sampling.max_new_tokens if sample.finish_reason == "length" else None
    if result is not None:
        reward = reward_fn(result)
    else:  # a tool with an immediate output earns nothing either way
        reward = malformed_reward if action.kind == "malformed" else 0.0
    reply = proto.reply(action, result, truncated, config.goal, e.state)
    if reply and sample.finish_reason == "repetition":  # the policy ended it for looping
        reply[-1] = {**reply[-1], "content": f"{LOOP_NOTE} {reply[-1]['content']}"}
    response_ids = [int(i) for i in getattr(sample, "response_ids", []) or []]
    previous = e.turns[-1].candidate if e.turns else None
    e.turns.append(
        Turn(
            index=turn,
            context_ids=tuple(e.context),
            response_ids=tuple(response_ids),
            sampler_logprobs=tuple(float(x) for x in getattr(sample, "sampler_logprobs", []) or []),
            text=sample.text,
            finish_reason=sample.finish_reason,
            candidate=action.candidate,
            result=result,
            reward=reward,
            feedback=str(reply[-1]["content"]) if reply else "",
            action=action.kind,
        )
    )
    asked = list(e.messages)
    e.messages += [{"role": "assistant", "content": sample.text}, *reply]
    e.malformed = e.malformed + 1 if action.kind == "malformed" else 0
    if reward >= config.target_reward:
        e.stop = "target"
    elif action.kind == "submit":
        e.stop = "submitted"
    elif e.malformed >= config.max_malformed:
        e.stop = "malformed"
    elif config.stop_on_repeat and action.candidate is not None and action.candidate == previous:
        # (a tool turn between two evaluations of the same code is no repeat: it has no code)
        e.stop = "repeated"
    elif turn + 1 >= config.max_turns:
        e.stop = "max_turns"
    if e.stop:
        return
    if config.history == "full":
        if renderer is None:
            e.prompt = list(e.messages)
            return
        e.context = renderer.delta(asked, response_ids, reply)
        e.prompt = [*e.prompt, *response_ids, *e.context]
        return
    kept = _kept_messages(e, config.keep_last)
    e.prompt = renderer.prompt(kept) if renderer else kept
    e.context = list(e.prompt) if renderer else []  # type: ignore[arg-type]


def _kept_messages(e: _Live, keep_last: int) -> list[dict[str, Any]]:
    """Kevin's history: the task, then for the last ``keep_last`` turns only the code each
    submitted and the feedback it got (the reasoning is dropped)."""
    messages = list(e.first)
    for t in e.turns[-keep_last:] if keep_last else []:
        code = answer_text(t.candidate) if isinstance(t.candidate, str) else "(no usable code)"
        messages += [
            {"role": "assistant", "content": code},
            {"role": "user", "content": t.feedback},
        ]
    if not keep_last:
        messages += [{"role": "user", "content": e.turns[-1].feedback}] if e.turns else []
    return messages
