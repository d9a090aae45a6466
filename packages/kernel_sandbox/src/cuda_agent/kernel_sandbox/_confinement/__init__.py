"""How a worker process is confined before it runs a job (``_worker.main``): a seccomp filter
against signals and tracing of other processes (``seccomp``) and Landlock write rules
(``landlock``), and the memory, file and descriptor limits and the network namespace
(``limits``)."""
