"""Protocols: how an answer becomes an action, and an action's outcome the next message.

The driver (``driver.py``) knows a protocol only through ``Protocol``: the first messages of a
task, the tools it offers the chat template, per-episode state, ``parse`` (an answer's text to
an ``Action``) and ``reply`` (the messages the policy reads next). Three protocols:

- ``fenced``: one fenced Python block defining ``ModelNew`` per turn (what small models
  manage); the verdict comes back as a user message.
- ``tools``: native tool calls (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the
  format Qwen and Hermes chat templates use, or a bare JSON object): ``evaluate(code)``,
  ``profile(code)`` and ``submit(code)`` (which ends the episode); the outcome comes back as a
  ``tool`` message. Malformed JSON or an unknown tool is answered with the error as the tool's
  output and counts as a malformed answer.
- ``workdir``: the reference system's work directory (``kernels/*.cu``, a binding ``.cpp``,
  ``model_new.py``): ``write_file``, ``read_file``, ``list_files``, then ``evaluate`` /
  ``profile`` / ``submit`` on the directory as the sandbox's work-directory format defines it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from typing import Protocol as TypingProtocol

from cuda_agent.kernel_sandbox import EvalResult, Task
from cuda_agent.kernel_sandbox.candidates import CandidateFormatError, read_candidate

from .feedback import feedback, profile_lines
from .parsing import extract_candidate
from .prompts import build_messages

ActionKind = Literal["evaluate", "profile", "submit", "tool", "malformed"]


@dataclass(frozen=True)
class Action:
    """What an answer asks for: evaluate, profile or submit a candidate; a tool with an
    immediate output (``output``: no evaluation); or nothing usable (``error``)."""

    kind: ActionKind
    candidate: str | dict[str, str] | None = None
    error: str = ""
    output: str = ""
    call_id: str = ""


class Protocol(TypingProtocol):
    name: str

    def first_messages(self, task: Task, backend: str) -> list[dict[str, str]]: ...

    def tools(self) -> list[dict[str, Any]] | None: ...

    def new_state(self) -> Any: ...

    def parse(self, text: str, state: Any) -> Action: ...

    def reply(
        self,
        action: Action,
        result: EvalResult | None,
        truncated_at: int | None,
        goal: str,
        state: Any,
    ) -> list[dict[str, str]]: ...


def answer_text(code: str) -> str:
    """The ``fenced`` protocol's answer: one fenced Python block holding ``code`` (its ends
    stripped), which ``Fenced.parse`` reads back. The warm start teaches it; ``last_k`` history
    shows earlier answers in it."""
    return f"```python\n{code.strip()}\n```"


def _next_step(result: EvalResult | None, goal: str, how: str) -> str:
    if result is not None and result.correct:
        return f"It is correct. Make it faster ({goal}). {how}"
    return f"Fix it. {how}"


def _verdict(action: Action, result: EvalResult | None, truncated_at: int | None) -> str:
    text = feedback(result, truncated_at=truncated_at)
    if action.kind == "profile" and result is not None:
        text += "\n" + "\n".join(profile_lines(result))
    return text


class Fenced:
    """One fenced Python block defining ``ModelNew`` per turn."""

    name = "fenced"

    def first_messages(self, task: Task, backend: str) -> list[dict[str, str]]:
        return build_messages(task, backend)

    def tools(self) -> list[dict[str, Any]] | None:
        return None

    def new_state(self) -> Any:
        return None

    def parse(self, text: str, state: Any) -> Action:
        candidate = extract_candidate(text)
        if candidate is None:
            return Action("malformed", error="no ```python block defining class ModelNew")
        return Action("evaluate", candidate)

    def reply(self, action, result, truncated_at, goal, state) -> list[dict[str, str]]:
        ask = "Answer with the complete ModelNew in one ```python block."
        content = (
            f"{feedback(result, truncated_at=truncated_at)}\n\n{_next_step(result, goal, ask)}"
        )
        return [{"role": "user", "content": content}]


# ------------------------------------------------------------------------------ tool calls
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)


def _function(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
                "required": list(params),
            },
        },
    }


def _read_call(text: str) -> tuple[str, dict[str, Any]] | str:
    """(name, arguments) of the answer's first tool call, or why there is none."""
    found = _TOOL_CALL.search(text)
    raw = found.group(1) if found else text.strip()
    if not found:
        start = raw.find("{")
        if start < 0:
            return 'no tool call: write <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
        raw = raw[start:]
    try:
        call, _ = json.JSONDecoder().raw_decode(raw)
    except json.JSONDecodeError as exc:
        return f"the tool call is not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return 'a tool call is a JSON object {"name": ..., "arguments": {...}}'
    arguments = call.get("arguments", call.get("parameters", {}))
    if isinstance(arguments, str):  # some templates send the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return "the tool call's arguments are not valid JSON"
    if not isinstance(arguments, dict):
        return "the tool call's arguments must be a JSON object"
    return call["name"], arguments


def _tool_message(content: str) -> dict[str, str]:
    return {"role": "tool", "content": content}


def _system_with_tools(task: Task, backend: str, tools: list[dict[str, Any]], how: str) -> list:
    """The fenced prompt's system message (its worked example), told to use the tools, for
    templates that do not render ``tools=`` themselves."""
    system, user = build_messages(task, backend)
    listing = "\n".join(
        f"- {t['function']['name']}({', '.join(t['function']['parameters']['properties'])}): "
        f"{t['function']['description']}"
        for t in tools
    )
    content = (
        f"{system['content']}\n\nInstead of answering with a code block, call one tool per "
        f"turn:\n{listing}\n{how}\nCall a tool as "
        '<tool_call>{"name": "evaluate", "arguments": {"code": "..."}}</tool_call>.'
    )
    return [{"role": "system", "content": content}, user]


class Tools:
    """``evaluate(code)`` / ``profile(code)`` / ``submit(code)`` as native tool calls."""

    name = "tools"
    _TOOLS = (
        _function("evaluate", "compile, verify and time ModelNew; returns the verdict",
                  code="the complete Python module defining ModelNew"),
        _function("profile", "like evaluate, plus the time spent in each kernel",
                  code="the complete Python module defining ModelNew"),
        _function("submit", "evaluate ModelNew as the final answer and end the task",
                  code="the complete Python module defining ModelNew"),
    )  # fmt: skip

    def tools(self) -> list[dict[str, Any]] | None:
        return list(self._TOOLS)

    def first_messages(self, task: Task, backend: str) -> list[dict[str, str]]:
        return _system_with_tools(task, backend, list(self._TOOLS), "Submit when it is fast.")

    def new_state(self) -> Any:
        return None

    def parse(self, text: str, state: Any) -> Action:
        call = _read_call(text)
        if isinstance(call, str):
            return Action("malformed", error=call)
        name, arguments = call
        if name not in ("evaluate", "profile", "submit"):
            return Action(
                "malformed", error=f"unknown tool {name!r}; tools: evaluate, profile, submit"
            )
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return Action("malformed", error=f"{name} needs the argument code: the module's source")
        return Action(name, code)  # type: ignore[arg-type]

    def reply(self, action, result, truncated_at, goal, state) -> list[dict[str, str]]:
        if action.kind == "malformed":
            return [_tool_message(f"error: {action.error}")]
        how = "Call evaluate, profile or submit with the complete module."
        return [
            _tool_message(
                f"{_verdict(action, result, truncated_at)}\n\n{_next_step(result, goal, how)}"
            )
        ]


@dataclass
class WorkDirectory:
    """One episode's files, as the policy wrote them."""

    files: dict[str, str] = field(default_factory=dict)


class Workdir:
    """The reference system's work directory, written file by file through tools."""

    name = "workdir"
    _TOOLS = (
        _function("write_file", "write a file of the work directory (model_new.py, "
                  "kernels/*.cu, kernels/*.cpp, kernels/*.h)",
                  path="relative path", content="the file's whole text"),
        _function("read_file", "read a file of the work directory", path="relative path"),
        _function("list_files", "list the work directory's files"),
        _function("evaluate", "build kernels/ into cuda_extension, import model_new.py, "
                  "verify and time ModelNew; returns the verdict"),
        _function("profile", "like evaluate, plus the time spent in each kernel"),
        _function("submit", "evaluate the directory as the final answer and end the task"),
    )  # fmt: skip

    def tools(self) -> list[dict[str, Any]] | None:
        return list(self._TOOLS)

    def first_messages(self, task: Task, backend: str) -> list[dict[str, str]]:
        how = (
            "model_new.py defines ModelNew and does `import cuda_extension`; every "
            "kernels/*.cu and kernels/*.cpp is built into that module (bind your functions "
            "with PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)). Write the files, then evaluate."
        )
        return _system_with_tools(task, backend, list(self._TOOLS), how)

    def new_state(self) -> WorkDirectory:
        return WorkDirectory()

    def parse(self, text: str, state: WorkDirectory) -> Action:
        call = _read_call(text)
        if isinstance(call, str):
            return Action("malformed", error=call)
        name, args = call
        if name == "list_files":
            listing = "\n".join(f"{p} ({len(t)} chars)" for p, t in sorted(state.files.items()))
            return Action("tool", output=listing or "(the directory is empty)")
        if name in ("write_file", "read_file"):
            path = args.get("path")
            if not isinstance(path, str) or not path:
                return Action("malformed", error=f"{name} needs the argument path")
            if name == "read_file":
                if path not in state.files:
                    return Action("tool", output=f"error: no file {path!r}")
                return Action("tool", output=state.files[path])
            content = args.get("content")
            if not isinstance(content, str):
                return Action("malformed", error="write_file needs the argument content")
            trial = {"model_new.py": "", **state.files, path: content}  # paths checked early
            try:
                read_candidate(trial)
            except CandidateFormatError as exc:
                return Action("tool", output=f"error: {exc}")
            state.files[path] = content
            return Action("tool", output=f"wrote {path} ({len(content)} chars)")
        if name in ("evaluate", "profile", "submit"):
            try:
                files = read_candidate(dict(state.files))
            except CandidateFormatError as exc:
                return Action("tool", output=f"error: {exc}")
            return Action(name, files)  # type: ignore[arg-type]
        known = ", ".join(t["function"]["name"] for t in self._TOOLS)
        return Action("malformed", error=f"unknown tool {name!r}; tools: {known}")

    def reply(self, action, result, truncated_at, goal, state) -> list[dict[str, str]]:
        if action.kind == "malformed":
            return [_tool_message(f"error: {action.error}")]
        if action.kind == "tool":
            return [_tool_message(action.output)]
        how = "Change the files, then evaluate, profile or submit."
        return [
            _tool_message(
                f"{_verdict(action, result, truncated_at)}\n\n{_next_step(result, goal, how)}"
            )
        ]


PROTOCOLS: dict[str, type] = {"fenced": Fenced, "tools": Tools, "workdir": Workdir}


def protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}")
    instance: Protocol = PROTOCOLS[name]()
    return instance
