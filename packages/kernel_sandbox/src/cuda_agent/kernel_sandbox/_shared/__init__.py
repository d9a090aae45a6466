"""What the parent and both kinds of worker share: the messages between them (``protocol``),
the output exchange on the host (``exchange``) and on the GPU (``device_exchange``), the output
comparison (``compare``), timing (``timing``), loading task code and drawing inputs
(``task_runtime``), the compile cache (``compile``), and the kernel signatures ``launch``
reads (``signature``)."""
