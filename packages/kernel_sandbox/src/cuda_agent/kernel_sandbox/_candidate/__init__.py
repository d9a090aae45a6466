"""What runs in a candidate worker process, beside hostile code: loading and building the
candidate (``evaluate``, ``extension_hooks``), its trials (``trials``), the runtime checks
(``runtime_checks``, ``decoys``) and their verdicts (``verdict``). Compile workers run
``evaluate.prepare`` too. The candidates' own API, ``launch`` (one level up), runs here as well,
and in any process that calls their kernels."""
