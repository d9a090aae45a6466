"""One process of `test_multi_gpu_update.py` (torchrun, gloo, the CPU):

    torchrun --nproc-per-node W tests/dist_update_worker.py OUT.json shard|replica

Six episodes in three groups of two. With one process it trains on all six; with two, process
0 takes groups 0 and 1 (four episodes) and process 1 group 2 (two), so with micro-batches of one
row their shares need four and two micro-batches. Updates the same in every run:
- ``free``: no bound can trip. The record (grad norm before clipping) and the LoRA weights
  after the step must equal the one-process run's.
- a supervised step (``supervised_step``, as the warm start's) on the same shares: its NLL,
  token count, grad norm and the LoRA weights after it must equal the one-process run's;
- ``epochs``: two passes over the batch (``ppo_epochs = 2``); the LoRA weights after them must
  equal the one-process run's;
- ``guarded``: process 1's sampler log-probs are 5 nats below the policy's (an importance
  ratio of e^5 on its share only, past guard_max_ratio 20); every process must skip.
Process 0 writes OUT.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    out, mode = sys.argv[1], sys.argv[2]
    from accelerate import Accelerator

    Accelerator(cpu=True)
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    from cuda_agent.agent import collate
    from cuda_agent.agent.episode import Episode, Turn
    from cuda_agent.policy import Policy, PolicyConfig, testing
    from cuda_agent.runner.config import TrainConfig
    from cuda_agent.runner.trainer.update import supervised_step, update

    torch.manual_seed(0)
    tokenizer = testing.tiny_tokenizer()
    model = testing.tiny_llama(tokenizer, seed=0)
    policy = Policy.from_model(model, tokenizer, PolicyConfig(device="cpu", lora_rank=4, seed=0))
    if mode == "shard":
        policy.shard()
    optimizer = policy.optimizer(lr=1e-2)

    gen = torch.Generator().manual_seed(1)
    everything = []  # (group, prompt, response, reward)
    for e in range(6):
        prompt = torch.randint(3, 200, (5 + e,), generator=gen).tolist()
        response = torch.randint(3, 200, (3 + (e % 3),), generator=gen).tolist()
        everything.append((e // 2, prompt, response, float(e % 2) + 0.1 * e))
    share = everything if world == 1 else [x for x in everything if (x[0] == 2) == (rank == 1)]

    def episodes(shift: float) -> list[Episode]:
        policy.eval()
        with torch.no_grad():
            scored = policy.token_logprobs([p for _, p, _, _ in share], [r for _, _, r, _ in share])
        made = []
        for i, (group, prompt, response, reward) in enumerate(share):
            sampler = tuple(float(x) - shift for x in scored.logprobs[i, : len(response)])
            turn = Turn(0, tuple(prompt), tuple(response), sampler, "", "stop", None, None,
                        reward, "")  # fmt: skip
            made.append(Episode(f"t{group}", group, "full", (turn,), "max_turns"))
        return made

    free = TrainConfig(
        micro_batch=1, guard_max_ratio=float("inf"), guard_min_ess=0.0
    ).update_config()
    record = update(policy, optimizer, collate(episodes(0.0)), free, log=lambda _m: None)
    weights = _lora_weights(policy)
    # A supervised step (warm start, rft) on the same shares: the token-mean NLL over all six.
    sft = supervised_step(
        policy,
        optimizer,
        [p for _, p, _, _ in share],
        [r for _, _, r, _ in share],
        [[1] * len(r) for _, _, r, _ in share],
        1,
    )
    sft_weights = _lora_weights(policy)
    # Two passes over the batch (ppo_epochs): the second pass's ratios against the log-probs
    # before the first, each pass's mini-batch the whole batch on both processes.
    passes = TrainConfig(
        micro_batch=1, guard_max_ratio=float("inf"), guard_min_ess=0.0, ppo_epochs=2
    ).update_config()
    twice = update(policy, optimizer, collate(episodes(0.0)), passes, log=lambda _m: None)
    twice_weights = _lora_weights(policy)
    guarded = TrainConfig(micro_batch=1, guard_max_ratio=20.0, guard_min_ess=0.0).update_config()
    shift = 5.0 if rank == 1 else 0.0
    skipped = update(policy, optimizer, collate(episodes(shift)), guarded, log=lambda _m: None)
    if rank == 0:
        report = {
            "epochs": {k: twice[k] for k in ("updates", "clip_fraction", "grad_norm")},
            "epochs_weights": {k: v.flatten().tolist() for k, v in sorted(twice_weights.items())},
            "world": world,
            "free": {k: record[k] for k in ("grad_norm", "updates", "skipped_updates")},
            "guarded": {k: skipped[k] for k in ("updates", "skipped_updates", "skip_reasons")},
            "weights": {k: v.flatten().tolist() for k, v in sorted(weights.items())},
            "supervised": sft,
            "sft_weights": {k: v.flatten().tolist() for k, v in sorted(sft_weights.items())},
        }
        Path(out).write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()
    if mode == "shard":  # past the teardown that can abort after FSDP2 over gloo
        from cuda_agent.runner.distributed import leave

        leave(0)


def _lora_weights(policy: object) -> dict[str, torch.Tensor]:
    """The LoRA weights, whole (gathered from the shards on a sharded policy; every process
    calls it), named from their layer on."""
    root = getattr(policy, "_sharded_root", None) or policy.model  # type: ignore[attr-defined]
    found = {}
    for name, param in root.named_parameters():
        if "lora_" in name:
            whole = param.full_tensor() if hasattr(param, "full_tensor") else param
            found[name[name.index("layers.") :]] = whole.detach().float().cpu().clone()
    return found


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
