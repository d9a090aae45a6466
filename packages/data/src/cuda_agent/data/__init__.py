"""cuda_agent.data: kernel tasks as data (loaders, task sets, synthesis, filters)."""

__version__ = "0.1.0"
