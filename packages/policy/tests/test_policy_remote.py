"""RemotePolicy against a real OpenAI-compatible server on loopback: `transformers serve`.

The server is started once per module as a subprocess, fully offline, serving the tiny random
Llama of `cuda_agent.policy.testing`. Tests that need it are skipped when the serving extras
(fastapi, uvicorn, openai, pydantic) are not installed. Error handling is also checked against
a port nobody listens on, a socket that never answers, and a small stub for malformed replies.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.policy import testing
from cuda_agent.policy._remote import RemotePolicy, RemotePolicyError, RemoteSample

SERVING_EXTRAS = ("fastapi", "uvicorn", "openai", "pydantic")
STARTUP_TIMEOUT_S = 120.0
CONVERSATIONS = [
    [{"role": "user", "content": "Write a CUDA kernel."}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Add two vectors of floats, fast please!"},
    ],
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _log_tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


# ---------------------------------------------------------------------- the real server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """(base_url, model id, model dir) of a `transformers serve` subprocess on loopback."""
    missing = testing.missing_serving_extras()
    if missing:
        pytest.skip(f"transformers serving extras not installed: {', '.join(missing)}")
    try:
        with testing.serve_tiny_model(tmp_path_factory.mktemp("remote")) as found:
            yield found
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def remote(served: tuple[str, str, Path]) -> RemotePolicy:
    base_url, model, _ = served
    return RemotePolicy(base_url, model, timeout_s=120, max_concurrency=4)


@pytest.fixture(scope="module")
def local_greedy(served: tuple[str, str, Path]) -> Any:
    """Greedy text of the same checkpoint run in-process: what the server must return."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = served[2]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    def run(conversation: list[dict[str, str]], max_new_tokens: int) -> str:
        inputs: Any = tokenizer.apply_chat_template(
            conversation, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        output = model.generate(
            **inputs,
            do_sample=False,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
        )
        return str(
            tokenizer.decode(output[0, inputs["input_ids"].shape[-1] :], skip_special_tokens=True)
        )

    return run


@pytest.mark.slow
def test_models_lists_the_served_model(remote: RemotePolicy, served: tuple[str, str, Path]) -> None:
    assert remote.models() == [served[1]]


@pytest.mark.slow
def test_greedy_text_is_the_served_models_own(remote: RemotePolicy, local_greedy: Any) -> None:
    results = remote.generate(CONVERSATIONS, max_new_tokens=12, temperature=0.0)
    assert len(results) == len(CONVERSATIONS)
    for conversation, samples in zip(CONVERSATIONS, results, strict=True):
        assert len(samples) == 1
        (sample,) = samples
        assert isinstance(sample, RemoteSample)
        assert sample.text and sample.text == local_greedy(conversation, 12)
        assert sample.finish_reason == "length"
        assert sample.usage is not None and sample.usage["completion_tokens"] == 12
        assert sample.sampler_logprobs is None  # not asked for


@pytest.mark.slow
def test_generate_returns_n_samples_per_conversation(remote: RemotePolicy) -> None:
    # transformers serve ignores `n` (one choice per reply): the missing ones are asked again.
    results = remote.generate(CONVERSATIONS, n=3, max_new_tokens=6, temperature=3.0, seed=11)
    assert [len(samples) for samples in results] == [3, 3]
    for samples in results:
        for sample in samples:
            assert sample.text
            assert sample.finish_reason in ("stop", "length")
            assert sample.usage is not None and 1 <= sample.usage["completion_tokens"] <= 6
        # Each extra request had its own seed: not the same sample three times.
        assert len({sample.text for sample in samples}) > 1


@pytest.mark.slow
def test_small_max_new_tokens_finishes_with_length(remote: RemotePolicy) -> None:
    (samples,) = remote.generate(CONVERSATIONS[:1], max_new_tokens=3, temperature=0.0)
    assert samples[0].finish_reason == "length"
    assert samples[0].usage is not None and samples[0].usage["completion_tokens"] == 3


@pytest.mark.slow
def test_stop_string_finishes_with_stop(remote: RemotePolicy) -> None:
    (full,) = remote.generate(CONVERSATIONS[:1], max_new_tokens=40, temperature=0.0)[0]
    # A printable ASCII character that the greedy answer reaches after a few characters.
    candidates = [c for c in full.text[1:] if c.isascii() and c.isprintable() and c.strip()]
    if not candidates:
        pytest.skip(f"greedy answer has no printable ASCII character to stop on: {full.text!r}")
    stop = candidates[0]
    (stopped,) = remote.generate(
        CONVERSATIONS[:1], max_new_tokens=40, temperature=0.0, stop=[stop]
    )[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text.startswith(full.text[: full.text.index(stop)])
    assert len(stopped.text) < len(full.text)


@pytest.mark.slow
def test_seed_makes_sampling_reproducible(served: tuple[str, str, Path]) -> None:
    # transformers serve seeds one global RNG per request: only sequential requests reproduce.
    policy = RemotePolicy(served[0], served[1], max_concurrency=1)
    conversation = CONVERSATIONS[:1]

    def texts(seed: int) -> list[str]:
        results = policy.generate(conversation, n=2, max_new_tokens=8, temperature=3.0, seed=seed)
        return [sample.text for sample in results[0]]

    by_seed = {seed: texts(seed) for seed in range(4)}
    # Sampling really is random here (else the reproducibility check below would prove nothing)...
    assert len({tuple(t) for t in by_seed.values()}) > 1
    # ...and a seed gives the same samples again.
    assert texts(2) == by_seed[2]


@pytest.mark.slow
def test_http_error_names_the_status_and_the_servers_message(served: tuple[str, str, Path]) -> None:
    wrong_model = RemotePolicy(served[0], "no-such-model")
    with pytest.raises(RemotePolicyError, match="HTTP 400") as info:
        wrong_model.generate(CONVERSATIONS[:1], max_new_tokens=2)
    assert info.value.status == 400
    assert f"{served[0]}/chat/completions" in str(info.value)
    assert "no-such-model" in str(info.value)  # the server's own explanation

    unknown_route = RemotePolicy(served[0] + "/no-such-route", served[1])
    with pytest.raises(RemotePolicyError, match="HTTP 404") as info:
        unknown_route.models()
    assert info.value.status == 404
    assert "Not Found" in str(info.value)


# ---------------------------------------------------------------------- no server needed


def test_server_not_running_raises_with_the_url() -> None:
    base_url = f"http://127.0.0.1:{_free_port()}/v1"
    policy = RemotePolicy(base_url, "m", timeout_s=5)
    with pytest.raises(RemotePolicyError, match="cannot reach the server") as info:
        policy.generate(CONVERSATIONS[:1])
    assert f"{base_url}/chat/completions" in str(info.value)
    assert info.value.status is None
    with pytest.raises(RemotePolicyError, match=re.escape(f"{base_url}/models")):
        policy.models()


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # connections are queued but never read from
        base_url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        start = time.monotonic()
        with pytest.raises(RemotePolicyError, match=re.escape("timeout of 0.5 s")) as info:
            RemotePolicy(base_url, "m", timeout_s=0.5).models()
        assert time.monotonic() - start < 10
    assert f"{base_url}/models" in str(info.value)


class _Stub(BaseHTTPRequestHandler):
    """Replies with the canned (status, body) of the server; records the JSON bodies posted."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server: Any = self.server
        server.requests.append((body, self.headers.get("Authorization")))
        status, reply = server.reply(body)
        data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.requests = []
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    server.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield server
    server.shutdown()
    server.server_close()


def test_request_fields_and_reply_parsing(stub: Any) -> None:
    def reply(body: dict[str, Any]) -> tuple[int, Any]:
        # Like a server that ignores `n`: one choice, with OpenAI-style logprobs.
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": f"seed {body['seed']}"},
            "finish_reason": "eos_token",
            "logprobs": {
                "content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.0}]
            },
        }
        return 200, {"choices": [choice], "usage": {"completion_tokens": 2}}

    stub.reply = reply
    policy = RemotePolicy(stub.base_url, "my-model", api_key="secret", max_concurrency=1)
    (samples,) = policy.generate(
        CONVERSATIONS[:1],
        n=3,
        max_new_tokens=5,
        temperature=0.7,
        top_p=0.9,
        seed=40,
        stop=["\n"],
        logprobs=True,
    )
    seeds = [int(s.text.removeprefix("seed ")) for s in samples]
    assert seeds[0] == 40 and len(set(seeds)) == 3
    assert all(0 <= seed < 2**31 for seed in seeds)
    assert all(s.finish_reason == "stop" for s in samples)
    assert samples[0].sampler_logprobs == [-0.5, -1.0]
    assert samples[0].usage == {"completion_tokens": 2}
    first, auth = stub.requests[0]
    assert auth == "Bearer secret"
    assert first == {
        "model": "my-model",
        "messages": CONVERSATIONS[0],
        "max_tokens": 5,
        "temperature": 0.7,
        "top_p": 0.9,
        "stop": ["\n"],
        "logprobs": True,
        "n": 3,
        "seed": 40,
    }
    # The two follow-up requests ask for one choice each (n left out), with their own seeds,
    # which are not those of the next seed's calls (40 + 1, 40 + 2).
    assert [b.get("n") for b, _ in stub.requests[1:]] == [None, None]
    assert not {41, 42} & set(seeds)
    # The same call again sends the same seeds.
    stub.requests.clear()
    again = policy.generate(CONVERSATIONS[:1], n=3, seed=40)
    assert [s.text for s in again[0]] == [s.text for s in samples]


def test_optional_fields_are_left_out(stub: Any) -> None:
    stub.reply = lambda body: (
        200,
        {"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]},
    )
    (samples,) = RemotePolicy(stub.base_url, "m").generate(CONVERSATIONS[:1])
    assert samples == [RemoteSample(text="x", finish_reason="length")]
    (body, auth), *_ = stub.requests
    assert auth is None
    assert set(body) == {"model", "messages", "max_tokens", "temperature", "top_p"}


@pytest.mark.parametrize(
    ("status", "reply", "match"),
    [
        (200, b"<html>not json</html>", "not JSON: <html>not json</html>"),
        (200, {"id": "x"}, "malformed reply, no 'choices'"),
        (200, {"error": {"message": "model crashed"}}, "HTTP 200: model crashed"),
        (500, {"error": {"message": "x" * 2000}}, r"HTTP 500: x+\.\.\. \(truncated\)"),
        (503, b"overloaded", "HTTP 503: overloaded"),
    ],
)
def test_bad_replies_raise_remote_policy_error(
    stub: Any, status: int, reply: Any, match: str
) -> None:
    stub.reply = lambda body: (status, reply)
    with pytest.raises(RemotePolicyError, match=match) as info:
        RemotePolicy(stub.base_url, "m").generate(CONVERSATIONS[:1])
    assert info.value.status == status
    assert f"{stub.base_url}/chat/completions" in str(info.value)
    assert len(str(info.value)) < 700


def test_a_failed_request_stops_the_rest(stub: Any) -> None:
    stub.reply = lambda body: (400, {"error": {"message": "bad request"}})
    with pytest.raises(RemotePolicyError, match="HTTP 400: bad request"):
        RemotePolicy(stub.base_url, "m", max_concurrency=1).generate(CONVERSATIONS[:1] * 50)
    assert len(stub.requests) < 25  # the requests not yet started were dropped


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0},
        {"max_new_tokens": 0},
        {"temperature": -0.1},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"stop": [""]},
        {"stop": ["ok", ""]},
    ],
)
def test_invalid_sampling_arguments_raise_value_error(kwargs: dict[str, Any]) -> None:
    # Validation happens before any request: no server at this address is needed.
    policy = RemotePolicy(f"http://127.0.0.1:{_free_port()}/v1", "m")
    with pytest.raises(ValueError):
        policy.generate(CONVERSATIONS[:1], **kwargs)


def test_invalid_conversations_and_constructor_arguments_raise_value_error() -> None:
    policy = RemotePolicy(f"http://127.0.0.1:{_free_port()}/v1", "m")
    assert policy.generate([]) == []
    with pytest.raises(ValueError, match="conversation 1"):
        policy.generate([CONVERSATIONS[0], []])
    with pytest.raises(ValueError, match="base_url"):
        RemotePolicy("127.0.0.1:8000/v1", "m")
    with pytest.raises(ValueError, match="max_concurrency"):
        RemotePolicy("http://127.0.0.1:8000/v1", "m", max_concurrency=0)
    with pytest.raises(ValueError, match="timeout_s"):
        RemotePolicy("http://127.0.0.1:8000/v1", "m", timeout_s=0)
    with pytest.raises(ValueError, match="model"):
        RemotePolicy("http://127.0.0.1:8000/v1", "")
