"""Static checks: every hack pattern gets its flag and an actionable reason; no honest built-in
solution or documented example is flagged; the sandbox refuses flagged candidates up front."""

from __future__ import annotations

import textwrap

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox.candidates import EXAMPLES, read_candidate
from cuda_agent.kernel_sandbox.static_checks import check_candidate_source, static_findings

HEADER = """
import torch
import torch.nn.functional as F
from torch import nn
from cuda_agent.kernel_sandbox.launch import cpu_kernel

k = cpu_kernel("void k(float* o, const float* x, long n) {}", "k")
"""


def _codes(body: str, prelude: str = "", **kw) -> set[str]:
    source = HEADER + textwrap.dedent(prelude) + textwrap.dedent(body)
    return {f.code for f in check_candidate_source(source, **kw)}


def _forward(lines: str, prelude: str = "", **kw) -> set[str]:
    body = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + textwrap.indent(
        textwrap.dedent(lines), "        "
    )
    return _codes(body, prelude, **kw)


HONEST = """
out = torch.empty_like(x.contiguous())
k(out, x, x.numel())
return out.view(x.shape)
"""


@pytest.mark.parametrize(
    ("forward", "prelude", "code"),
    [
        ("return torch.relu(x)", "", "torch_compute"),
        ("return F.relu(x)", "", "torch_compute"),
        ("return x.clamp(min=0)", "", "torch_compute"),
        ("return torch.matmul(x, x)", "", "torch_compute"),
        ("try:\n    k(x, x, 1)\nexcept Exception:\n    pass\nreturn x", "", "fallback"),
        ("return Model()(x)", "", "reference_model"),
        ("t = threading.Thread(target=print)\nreturn x", "import threading\n", "concurrency"),
        ("s = torch.cuda.Stream()\nreturn x", "", "side_stream"),
        ("torch.cuda.synchronize = lambda *a: None\nreturn x", "", "patching"),
        ("time.perf_counter = lambda: 0.0\nreturn x", "import time\n", "patching"),
        ("setattr(torch, 'relu', None)\nreturn x", "", "patching"),
        ("gc.collect()\nreturn x", "import gc\n", "introspection"),
        ("f = sys._getframe()\nreturn x", "import sys\n", "introspection"),
        ("m = sys.modules['cuda_agent_task']\nreturn x", "import sys\n", "introspection"),
        ("open('/etc/passwd').read()\nreturn x", "", "file_access"),
        ("v = os.environ['HOME']\nreturn x", "import os\n", "file_access"),
        ("os._exit(0)", "import os\n", "file_access"),
        ("CACHE[x.data_ptr()] = x\nreturn x", "CACHE = {}\n", "output_cache"),
        ("self.last = x\nreturn x", "", "output_cache"),
        ("return getattr(torch, 're' + 'lu')(x)", "", "introspection"),
    ],
)
def test_each_hack_pattern_is_flagged(forward, prelude, code):
    assert code in _forward(forward, prelude)


def test_honest_forward_is_clean_and_library_ops_can_be_allowed():
    assert _forward(HONEST) == set()
    assert _forward("return torch.matmul(x, x)", allowed_torch_ops=("matmul",)) == set()


def test_subclassing_the_reference_and_memoising_are_flagged():
    assert "reference_model" in _codes("class ModelNew(Model):\n    pass\n")
    memo = "import functools\n@functools.lru_cache\ndef f(n):\n    return n\n"
    assert "output_cache" in _codes(memo)


def test_super_of_the_reference_copied_from_kernelbench_says_what_to_write():
    # KernelBench's modules call super(Model, self).__init__(); a model copies it into ModelNew
    body = "class ModelNew(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n"
    [finding] = [f for f in check_candidate_source(HEADER + body) if f.code == "reference_model"]
    assert "write super().__init__()" in finding.reason
    plain = "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    assert "reference_model" not in _codes(plain)
    # any other use of Model keeps the general reason
    [other] = [
        f for f in check_candidate_source(HEADER + "y = Model\n") if f.code == "reference_model"
    ]
    assert other.reason.startswith("refers to Model, the reference")


def test_layers_may_hold_weights_but_not_compute():
    body = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x)
"""
    assert "torch_compute" in _codes(body)


def test_streams_in_kernel_sources_are_flagged():
    source = HEADER + 'src = "cudaStream_t s; cudaStreamCreate(&s);"\n'
    assert {f.code for f in check_candidate_source(source)} == {"side_stream"}


def test_findings_say_where_and_what_to_do():
    (finding,) = check_candidate_source(
        HEADER
        + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    )
    assert finding.line == HEADER.count("\n") + 4
    assert ".relu()" in finding.reason and "kernel" in finding.reason


def test_unparsable_source_is_left_to_the_worker():
    assert check_candidate_source("def broken(:\n") == []


def test_no_builtin_solution_or_example_is_flagged():
    for task in builtin_tasks():
        for backend, source in task.solutions.items():
            assert check_candidate_source(source) == [], (task.name, backend)
    for path in sorted(EXAMPLES.iterdir()):
        if path.suffix == ".py" or path.is_dir():
            assert static_findings(read_candidate(path)) == [], path.name


def test_the_sandbox_refuses_flagged_candidates_before_running_them():
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    with Sandbox(SandboxConfig(backend="cpu", workers=1)) as sandbox:
        result = sandbox.evaluate(
            relu,
            HEADER + "\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.relu(x)\n",
        )
        assert result.status == "rejected" and result.flags == ("torch_compute",)
        assert "torch.relu" in result.message and not result.correct
        assert result.extra["findings"][0]["code"] == "torch_compute"
        # No worker was needed for that verdict.
        assert all(not lane.candidate.alive() for lane in sandbox._lanes.lanes)


def test_compute_libraries_are_refused():
    for library in ("numpy", "cupy", "scipy", "numba", "jax"):
        assert "library_compute" in _forward(HONEST, prelude=f"import {library}\n"), library
    assert "library_compute" in _forward(HONEST, prelude="from scipy import special\n")


def test_unreached_helpers_are_not_judged_but_reached_ones_are():
    helpers = "\ndef get_inputs():\n    return [torch.rand(4, 4)]\n"
    assert _forward(HONEST) == set()
    assert _codes(helpers + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                  + textwrap.indent(textwrap.dedent(HONEST), "        ")) == set()  # fmt: skip
    # reached from the forward, through an alias, or by module-level code: judged
    reached = "\ndef helper(x):\n    return torch.relu(x)\n\nalias = helper\n"
    body = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return alias(x)\n"
    assert "torch_compute" in _codes(reached + body)
    at_import = "\ndef prep():\n    return torch.rand(3).sum()\n\nVALUE = prep()\n"
    assert "torch_compute" in _codes(at_import + "\nclass ModelNew(nn.Module):\n    pass\n")
    # whole-module rules still see an unreached helper
    hostile = "\ndef get_inputs():\n    return open('/etc/passwd').read()\n"
    assert "file_access" in _codes(hostile + "\nclass ModelNew(nn.Module):\n    pass\n")
