"""The trainer: one RL or supervised update of the policy (and the critic), composed of
``rl_core``'s formulas and nothing else.

- ``update_config``: the update's configuration as one typed value (the advantage's kind,
  the loss, the stability guard), built from the flat ``TrainConfig``;
- ``loss``: advantages and the per-micro-batch loss (rl_core composed);
- ``update``: an RL update over micro-batches with its guards, and the supervised step;
- ``collective``: the micro-batch loop, safe across processes (counts and denominators
  agreed).

The stages (``stages/``) call ``update`` and ``supervised_step``; ``train.py`` orders them.
"""
