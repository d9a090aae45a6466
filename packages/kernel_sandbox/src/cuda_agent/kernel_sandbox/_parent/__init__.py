"""What runs in the parent, the caller's process (never candidate code): the worker pool
(``pool``), planning a job's checks (``plan``), brokering each check's verdict and composing
the result (``broker``), the disk caches of ``torch.compile`` baselines (``baselines``) and of
each task's trivial-answer rule (``trivial``), and the rules of the static checks
(``static_rules``, ``static_checker``). The public modules one level up (``sandbox``,
``ray_sandbox``, ``validate``, ``properties``, ``static_checks``, ``cli``) run here too.
Nothing here imports ``_candidate``, ``_reference`` or ``_confinement``
(``tests/test_sandbox_layout.py``)."""
