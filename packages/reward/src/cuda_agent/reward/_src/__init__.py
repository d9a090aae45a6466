"""Private implementation of `cuda_agent.reward`; import from the package, not from here."""
