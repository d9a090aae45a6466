"""Whether a policy's answers hold together when a task's name is not lower case (CPU or GPU).

    python benchmarks/kernel_names.py OUT.json --model GGUF --adapter DIR [--kernelbench DIR]
        [--modes as-loaded,identifier] [--max-new-tokens 768] [--device auto]
    python benchmarks/kernel_names.py OUT.json --analyse EARLIER.json [EARLIER.json ...]

On the H100 (2026-12-06) a warm-started SmolLM2 answered 0 of the 23 KernelBench L1 problems
right. Eight failed on a name: the prompt named the task as the KernelBench loader does
(``L1_21_Sigmoid``), every training task's name is lower case, and the answer called
``l1_21_Sigmoid_kernel`` but bound ``L1_21_Sigmoid_kernel``. This script samples the same
prompts greedily with the task named two ways:

- ``as-loaded``: the name the loader gives (``L1_21_Sigmoid``), as prompts named tasks before;
- ``identifier``: ``agent.prompts.prompt_name`` of it (``l1_21_sigmoid``), as the agent's
  prompt names every task since this measurement (greedy on the CPU, the warm adapter: 0 of 23
  answers linked as loaded, 14 of 23 so). Every shipped task's name already is its
  ``prompt_name``, so no prompt the model trained on changed
  (``tests/test_kernel_names_script.py``);
- ``super-as-loaded``: as ``identifier``, but the source as KernelBench writes it,
  ``super(Model, self).__init__()`` (the agent's prompt shows ``super()`` since 2026-12-06,
  ``agent.prompts.prompt_source``).

It judges nothing in the sandbox, only what can be read without a GPU: whether the answer's
code parses, and whether it *links*: every kernel ``forward`` launches (``NAME(grid=...)``) is
bound by ``NAME = cuda_kernel(source, "FN")``, and ``FN`` is a ``__global__`` function of that
source. An answer that does not link fails whatever its kernel computes. ``refused``: the
codes of the sandbox's static checks that refuse it (``reference_model``: it names ``Model``).

On the CPU the GPU-trained warm adapter's answers once ran on past their code block: that
adapter learned to end its answers with ``<|im_start|>``, which transformers 5.17 (the GPU's)
loads as SmolLM2's eos and 5.25 does not. Sampling now stops at the chat template's end of turn
and turn start on any machine (``cuda_agent.policy.turn_tokens``), so this runs on the CPU too.

``--analyse`` reads the answers of earlier runs again (the ``text`` of each row) and writes the
figures afresh, for a change of this file's rules.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
from provenance import provenance

from cuda_agent.agent.prompts import prompt_name, prompt_source

MODES = ("as-loaded", "identifier", "super-as-loaded")
_GLOBAL = re.compile(r"__global__\s+void\s+(\w+)")


def links(code: str) -> dict[str, Any]:
    """``parses`` and ``links`` (the rule above) of one answer's code, with what was found."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {"parses": False, "links": False}
    bound: dict[str, tuple[str, str]] = {}  # handle -> (kernel source, function name)
    launched: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "cuda_kernel"
            and len(node.value.args) >= 2
            and all(isinstance(a, ast.Constant) for a in node.value.args[:2])
        ):
            source, name = (str(a.value) for a in node.value.args[:2])  # type: ignore[attr-defined]
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = (source, name)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and any(k.arg == "grid" for k in node.keywords)
        ):
            launched.add(node.func.id)
    ok = bool(launched) and all(
        n in bound and bound[n][1] in _GLOBAL.findall(bound[n][0]) for n in launched
    )
    return {"parses": True, "links": ok, "bound": sorted(bound), "launched": sorted(launched)}


def sample(args: argparse.Namespace, mode: str) -> list[dict[str, Any]]:
    from cuda_agent.runner.eval.command import EvalOptions, load_policy
    from cuda_agent.runner.kernelbench_subset import load_l1_subset

    tasks = load_l1_subset(args.kernelbench)
    options = EvalOptions(model=args.model, adapter=args.adapter, device=args.device)
    policy, _ = load_policy(options)
    answers = policy.generate([messages(t, mode) for t in tasks],
                              max_new_tokens=args.max_new_tokens, temperature=0.0, seed=0)  # fmt: skip
    return [
        {
            "task": t.name if mode == "as-loaded" else prompt_name(t.name),
            "finish_reason": s.finish_reason,
            "text": s.text,
            **read(s.text),
        }
        for t, [s] in zip(tasks, answers, strict=True)
    ]


def messages(task: Any, mode: str) -> list[dict[str, str]]:
    """The agent's first messages for ``task``; ``as-loaded`` puts the loader's name back
    where the agent's prompt names the task (``prompt_name``)."""
    from cuda_agent.agent.prompts import build_messages

    out = build_messages(task, "cuda")
    if mode == "super-as-loaded":  # the source as KernelBench writes it (before prompt_source)
        shown, loaded = prompt_source(task.source).strip(), task.source.strip()
        out = [{**m, "content": m["content"].replace(shown, loaded)} for m in out]
    if mode == "as-loaded":
        given, loaded = f"(task `{prompt_name(task.name)}`)", f"(task `{task.name}`)"
        out = [{**m, "content": m["content"].replace(given, loaded)} for m in out]
    return out


def read(text: str) -> dict[str, Any]:
    """What an answer's code shows without a GPU: whether it parses and links (``links``), and
    the static checks that refuse it (``refusals``)."""
    code = _code(text)
    return {**links(code), "refused": refusals(code)}


def refusals(code: str) -> list[str]:
    """The codes of the sandbox's static checks that refuse this answer (no GPU needed)."""
    from cuda_agent.kernel_sandbox.static_checks import check_candidate_source

    return sorted({f.code for f in check_candidate_source(code)}) if code else []


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tasks": len(rows),
        "parses": sum(r["parses"] for r in rows),
        "links": sum(r["links"] for r in rows),
        "refused": sum(bool(r["refused"]) for r in rows),
        "refused_reference_model": sum("reference_model" in r["refused"] for r in rows),
        "links_and_not_refused": sum(r["links"] and not r["refused"] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--model", default="")
    parser.add_argument("--adapter", default="")
    parser.add_argument("--kernelbench", default="")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--max-new-tokens", type=int, default=768)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--analyse", nargs="*", default=[])
    args = parser.parse_args()
    report: dict[str, Any] = {"modes": {}}
    if args.analyse:
        for path in args.analyse:
            earlier = json.loads(Path(path).read_text())
            for mode, part in earlier["modes"].items():
                rows = [{**r, **read(r["text"])} for r in part["rows"]]
                report["modes"][mode] = {**part, **figures(rows), "rows": rows}
    else:
        for mode in args.modes.split(","):
            if mode not in MODES:
                raise SystemExit(f"--modes: {mode!r} is not one of {', '.join(MODES)}")
            t0 = time.perf_counter()
            rows = sample(args, mode)
            seconds = time.perf_counter() - t0
            report["modes"][mode] = {**figures(rows), "seconds": seconds, "rows": rows}
            print(mode, figures(rows), f"{seconds:.0f} s", flush=True)
    report.update(provenance("kernel_names", " ".join(["python", *sys.argv]), 0))
    Path(args.out).write_text(json.dumps(report, indent=1))


def _code(text: str) -> str:
    from cuda_agent.agent.parsing import extract_candidate

    return extract_candidate(text) or ""


if __name__ == "__main__":
    main()
