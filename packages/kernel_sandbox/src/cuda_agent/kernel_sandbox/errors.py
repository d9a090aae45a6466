"""Exceptions that candidate code sees (and the harness turns into verdicts)."""

from __future__ import annotations


class CandidateError(Exception):
    """The candidate used the sandbox's launcher API wrongly (bad signature, wrong argument)."""


class CompileError(CandidateError):
    """A kernel did not compile; ``log`` holds the trimmed compiler messages."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class TaskError(ValueError):
    """A task file is not a valid KernelBench-format module; the message names the fix."""
