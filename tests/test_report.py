"""``report.html`` and the closing table, tested like a page: a small real run (a tiny random
model, in this process) and a scripted evaluation are parsed with ``html.parser`` and each
section is checked against the files it was written from: the config, every evaluated task with
its verdict, its kernel and its turns, the curves embedded byte for byte, the timeline against
``metrics.jsonl``. A model's answer holding ``<script>`` stays text. ``--json`` prints the
summary alone on stdout; ``cuda-agent report`` rebuilds the page of an older run and refuses a
directory that is neither a run's nor an evaluation's with one line and exit code 2."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy import Sample
from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.cli import main
from cuda_agent.runner.eval.evaluate import evaluate_tasks
from cuda_agent.runner.report.terminal import train_table
from cuda_agent.runner.testing import copy_builtin_tasks

SMALL = [
    "--backend", "cpu", "--warmstart-steps", "1", "--eval-after-warmstart", "yes",
    "--rl-warmup-steps", "0", "--rft-tasks", "1", "--rft-samples", "1", "--rft-turns", "2",
    "--rft-steps", "1", "--value-steps", "0", "--steps", "1", "--turns", "2",
    "--tasks-per-step", "1", "--group-size", "2", "--lora-rank", "4", "--eval-train", "false",
    "--eval-turns", "2", "--max-new-tokens", "40", "--seed", "3", "--quiet", "--json",
]  # fmt: skip
TASKS = {t.name: t for t in builtin_tasks()}
HOSTILE = "<script>alert('answer')</script>"


# ----------------------------------------------------------------------------- the page
@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    within: list[Element]  # the open elements around it, outermost first
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def inside(self, **attrs: str) -> bool:
        return any(all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
                   for e in self.within)  # fmt: skip


class Page(HTMLParser):
    """Every element of a page with its attributes, the text inside it and its ancestors."""

    VOID: ClassVar[set[str]] = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, list(self._open))
        self.elements.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.parts.append(data)

    def find(self, tag: str = "", **attrs: str) -> list[Element]:
        wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.elements if (not tag or e.tag == tag)
                and all(e.attrs.get(k) == v for k, v in wanted.items())]  # fmt: skip

    def one(self, tag: str = "", **attrs: str) -> Element:
        found = self.find(tag, **attrs)
        assert len(found) == 1, f"{tag} {attrs}: {len(found)} found"
        return found[0]

    def sections(self) -> list[str]:
        return [e.attrs["id"] for e in self.find("section")]


def _page(path: Path) -> Page:
    return Page(path.read_text())


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("report-model"))


@pytest.fixture(scope="module")
def run(tmp_path_factory, model) -> tuple[Path, str, str]:
    """A finished run with every stage that writes something, ``--json``: the run directory
    and what the command wrote on stdout and stderr."""
    root = tmp_path_factory.mktemp("report-run")
    copy_builtin_tasks(root / "tasks", ("relu", "silu"))  # the warm start teaches one line
    copy_builtin_tasks(root / "heldout", ("tanh", "elu"), compact=False)
    out, err = io.StringIO(), io.StringIO()
    argv = ["train", "--model", str(model), "--tasks", str(root / "tasks"), "--eval-tasks",
            str(root / "heldout"), *SMALL, "--out", str(root / "run")]  # fmt: skip
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0, err.getvalue()[-2000:]
    return root / "run", out.getvalue(), err.getvalue()


@dataclass
class TurnScript:
    """Chat messages in: the answer to turn k of a task is ``answers[task][k]`` (the last one
    for later turns; no code for a task it does not know)."""

    answers: dict[str, list[str]]

    def generate(self, prompts, *, n=1, **kwargs):
        rows = []
        for messages in prompts:
            task = re.search(r"\(task `([^`]+)`\)", messages[1]["content"]).group(1)
            turn = sum(m["role"] == "assistant" for m in messages)
            texts = self.answers.get(task, ["No kernel from me."])
            rows.append([Sample([], [], texts[min(turn, len(texts) - 1)], "stop", [])] * n)
        return rows


def _answer(code: str, before: str = "Here it is:") -> str:
    return f"{before}\n```python\n{code}```"


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory) -> Path:
    """relu: correct at once; silu: wrong then right (a diff), both answers carrying markup
    in their text and code; add_mul: no code."""
    out = tmp_path_factory.mktemp("report-eval") / "eval"
    silu = TASKS["silu"].solutions["cpu"]
    wrong = silu.replace("x[i] / (1.f + expf(-x[i]))", "x[i]")
    assert wrong != silu
    marked = f"# </pre>{HOSTILE}\n{silu}"
    policy = TurnScript({
        "relu": [_answer(TASKS["relu"].solutions["cpu"])],
        "silu": [_answer(wrong, f"First try {HOSTILE}:"), _answer(marked)],
    })  # fmt: skip
    config = SandboxConfig(backend="cpu", workers=1, repeats=3, timing_budget_s=0.2)
    with Sandbox(config) as sandbox:
        evaluate_tasks(policy, sandbox, [TASKS[n] for n in ("relu", "silu", "add_mul")],
                       turns=2, out_dir=out, model="scripted", log=lambda _: None)  # fmt: skip
    return out


# ----------------------------------------------------------------------------- tests
def test_the_run_report_shows_every_section_from_the_run_files(run) -> None:
    run_dir, _, _ = run
    page = _page(run_dir / "report.html")
    assert page.sections() == ["results", "curves", "timeline", "tasks-heldout", "episodes",
                               "config"]  # fmt: skip
    # the configuration, option by option
    config = json.loads((run_dir / "config.json").read_text())
    for key, value in config.items():
        row = page.one("tr", data_key=key)
        assert row.inside(id="config")
        assert (value if isinstance(value, str) else json.dumps(value)) in row.text
    # the held-out figures: every evaluation with its intervals, the paired gains
    names = sorted(p.name for p in (run_dir / "eval").iterdir())
    assert names == ["heldout_after", "heldout_before", "heldout_warmstart"]
    for name in names:
        result = json.loads((run_dir / "eval" / name / "eval.json").read_text())
        (row,) = [e for e in page.find("tr", data_eval=name) if e.inside(id="results")]
        ci = result["ci95"]["pass_at_1"]
        assert f"{ci['estimate']:.1%} [{ci['low']:.1%}, {ci['high']:.1%}]" in row.text
        # every task, with its verdict at this evaluation and each turn it took
        for task in result["per_task"]:
            article = page.one("article", data_task=task["task"])
            assert article.inside(id="tasks-heldout")
            line = [e for e in page.find("tr", data_eval=name) if article in e.within]
            assert len(line) == 1 and line[0].attrs["data-status"] == task["status"]
            assert ("correct" if task["correct"] else task["status"]) in line[0].text
            episodes = run_dir / "eval" / name / "episodes" / f"{task['task']}.jsonl"
            turns = sum(len(json.loads(x)["turns"]) for x in episodes.read_text().splitlines())
            shown = [e for e in page.find("div") if "turn" in e.attrs.get("class", "")
                     and article in e.within and e.inside(data_eval=name)]  # fmt: skip
            assert len(shown) == turns == task["turns"]
        assert (run_dir / "eval" / name / "report.html").is_file()  # each evaluation's own
    assert len(page.find("tr", data_metric="pass_at_1")) == 2  # over before, over warm start
    # the curves, embedded byte for byte
    curves = sorted((run_dir / "curves").glob("*.png"))
    images = [e for e in page.find("img") if e.inside(id="curves")]
    assert curves and len(images) == len(curves)
    embedded = {base64.b64decode(i.attrs["src"].removeprefix("data:image/png;base64,"))
                for i in images}  # fmt: skip
    assert embedded == {p.read_bytes() for p in curves}
    # the timeline: the stages of metrics.jsonl in order, with their record counts
    stages: list[list[Any]] = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        stage = json.loads(line)["stage"]
        if stages and stages[-1][0] == stage:
            stages[-1][1] += 1
        else:
            stages.append([stage, 1])
    rows = [e for e in page.find("tr") if "data-stage" in e.attrs]
    assert [[r.attrs["data-stage"], int(r.attrs["data-records"])] for r in rows] == stages
    assert all(r.inside(id="timeline") for r in rows)
    # the collected episodes, and nothing fetched or run
    collected = (run_dir / "rft" / "episodes.jsonl").read_text().splitlines()
    assert len([e for e in page.find("details") if e.inside(id="episodes")]) == len(collected)
    assert not page.find("script") and not page.find("link")
    assert all(e.attrs.get("src", "data:").startswith("data:") for e in page.find("img"))


def test_the_run_ends_with_a_table_and_json_on_stdout(run) -> None:
    run_dir, stdout, stderr = run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert json.loads(stdout) == summary  # --json: the summary alone on stdout
    assert summary["report"] == str(run_dir / "report.html")
    table = train_table(summary)
    assert table in stderr  # the lines a person reads went to stderr
    gain = summary["heldout_gain_after_over_before"]["pass_at_1"]
    lines = table.splitlines()
    assert lines[0].startswith(f"run finished: {run_dir} in ")
    assert lines[1] == "heldout tasks (2), 95% intervals over tasks:"
    labels = [re.split(r"\s{2,}", line.strip())[0] for line in lines[3:8]]
    assert labels == ["before", "after warm start", "after", "gain over before",
                      "gain over after warm start"]  # fmt: skip
    assert f"{gain['before']:.1%} [{gain['before_ci95'][0]:.1%}" in lines[3]
    assert f"{gain['gain']:+.1%} [{gain['ci95_low']:+.1%}, {gain['ci95_high']:+.1%}]" in lines[6]
    assert f"report:  {run_dir / 'report.html'}" in lines
    assert "relu" not in table and "silu" not in table  # no list of task names


def test_the_evaluation_report_shows_kernels_and_turns_and_escapes_answers(evaluation) -> None:
    text = (evaluation / "report.html").read_text()
    page = Page(text)
    assert page.sections() == ["results", "tasks-eval", "config"]
    result = json.loads((evaluation / "eval.json").read_text())
    assert [e.attrs["data-task"] for e in page.find("article")] == ["relu", "silu", "add_mul"]
    for row in result["per_task"]:  # each task's verdict
        article = page.one("article", data_task=row["task"])
        line = [e for e in page.find("tr", data_eval="eval") if article in e.within]
        assert len(line) == 1 and line[0].attrs["data-status"] == row["status"]
        assert ("correct" if row["correct"] else row["status"]) in line[0].text
    assert [r["correct"] for r in result["per_task"]] == [True, True, False]
    relu, silu, add_mul = (page.one("article", data_task=t) for t in ("relu", "silu", "add_mul"))
    # the best kernel, highlighted (Pygments' spans), as the evaluation kept it
    kernels = [e for e in page.find("pre") if e.attrs.get("class") == "hl"]
    relu_kernel = next(e for e in kernels if relu in e.within)
    assert relu_kernel.text == (evaluation / "kernels" / "relu.py").read_text()
    assert any(e.tag == "span" and relu_kernel in e.within for e in page.elements)
    # silu turn by turn: wrong, then right, the change between them, the sandbox's verdicts
    turns = [e for e in page.find("div") if "turn" in e.attrs.get("class", "") and silu in e.within]
    assert [t.attrs["data-turn"] for t in turns] == ["0", "1"]
    assert turns[0].text.startswith("turn 1: incorrect;")
    assert turns[1].text.startswith("turn 2 (best): correct;")
    assert turns[1].attrs["class"] == "turn best"
    diff = next(e for e in page.find("pre") if e.attrs.get("class") == "diff" and silu in e.within)
    assert "-    for (long i = 0; i < n; ++i) out[i] = x[i];" in diff.text
    assert "+    for (long i = 0; i < n; ++i) out[i] = x[i] / (1.f + expf(-x[i]));" in diff.text
    # the answers' markup is shown as text, never as markup
    assert HOSTILE in turns[0].text and HOSTILE in turns[1].text
    assert "<script" not in text.lower() and not page.find("script")
    # add_mul: no code in any turn, and the page says so
    assert "no code: the model wrote no kernel" in add_mul.text


def test_report_rebuilds_an_older_run_and_refuses_other_directories(run, tmp_path, capsys):
    run_dir, _, _ = run
    older = tmp_path / "older"
    shutil.copytree(run_dir, older, ignore=shutil.ignore_patterns("checkpoints", "adapter",
                                                                  "tensorboard"))  # fmt: skip
    for path in [older / "report.html", *older.glob("eval/*/report.html")]:
        path.unlink()
    assert main(["report", str(older)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {older / 'report.html'}"
    before, after = _page(run_dir / "report.html"), _page(older / "report.html")
    assert after.sections() == before.sections()
    for attr in ("data-task", "data-eval", "data-stage", "data-key", "data-turn"):
        assert [e.attrs.get(attr) for e in after.elements if attr in e.attrs] == [
            e.attrs.get(attr) for e in before.elements if attr in e.attrs
        ]
    # an evaluation from before the episodes were kept: its page says so
    shutil.rmtree(older / "eval" / "heldout_after" / "episodes")
    assert main(["report", str(older / "eval" / "heldout_after")]) == 0
    assert "episodes not recorded" in (older / "eval" / "heldout_after" / "report.html").read_text()
    # neither a run nor an evaluation: one line, exit code 2
    capsys.readouterr()
    for wrong in (tmp_path / "empty", tmp_path / "missing"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        assert main(["report", str(wrong)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"cuda-agent: {wrong} is neither")


def test_eval_prints_the_table_or_json(model, tmp_path, capsys) -> None:
    (tmp_path / "tasks").mkdir()
    shutil.copytree(Path(str(resources.files("cuda_agent.kernel_sandbox") / "builtin" / "relu")),
                    tmp_path / "tasks" / "relu")  # fmt: skip
    argv = ["eval", "--model", str(model), "--tasks", str(tmp_path / "tasks"), "--backend",
            "cpu", "--device", "cpu", "--max-new-tokens", "8", "--quiet", "--out",
            str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert re.search(r"pass@1 +0\.0% \[0\.0%, 0\.0%\]", printed)
    assert f"report:  {tmp_path / 'out' / 'report.html'}" in printed
    assert (tmp_path / "out" / "report.html").is_file()
    assert main([*argv, "--json"]) == 0  # the same --out: resumed, nothing left to do
    captured = capsys.readouterr()
    assert json.loads(captured.out) == json.loads((tmp_path / "out" / "eval.json").read_text())
    assert "report:  " in captured.err


def test_every_command_has_a_help_page(capsys) -> None:
    for argv in (["--help"], ["report", "--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
    assert "report.html" in capsys.readouterr().out
