"""Private implementation of `cuda_agent.rl_core`; import from the package, not from here."""
