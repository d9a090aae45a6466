"""Evaluation: a model's episodes on tasks, how sure the figures are, and their pages.

- ``evaluate``: the episodes of a set of tasks (samples, turns), their verdicts and figures
  (``eval.json``, resumable row by row);
- ``comparison``: bootstrap intervals over tasks and paired gains (``cuda-agent compare``);
- ``report``: an evaluation's ``eval.md`` and page;
- ``command``: ``cuda-agent eval``.

The training stages call ``evaluate`` for their held-out evaluations (``stages/evaluation.py``).
"""
