"""What runs in a reference worker process, on task code only: the expected outputs and each
check's verdict, and the eager and ``torch.compile`` baselines (``jobs``), and which answers that
compute nothing would pass a task (``trivial_answers``, for ``validate_task``; ``trivial_rule``,
for evaluations)."""
