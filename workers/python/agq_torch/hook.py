"""The DDP communication hook: each gradient bucket goes through the switch
and comes back into the bucket divided by the world size. It returns at
once with a torch Future (libagq's poll thread does the work), so backward
keeps computing later buckets while earlier ones travel. Gloo (or any
process group) still does rendezvous and the parameter broadcast."""
import torch


class HookState:
    def __init__(self, client, world_size: int):
        self.client = client
        self.world_size = world_size
        self.steps = []  # per bucket launch: (bucket index, elements)

    def __repr__(self):
        return f"HookState(job {self.client.job['id']}, rank {self.client.rank}, world {self.world_size})"


def allreduce_hook(state: HookState, bucket) -> torch.futures.Future:
    buf = bucket.buffer()  # the flat gradient bucket (torch 1.13: GradBucket.buffer())
    state.steps.append((bucket.index(), buf.numel()))
    # The tag is the bucket index: the same bucket's previous aggregate
    # chooses this one's widths and exponents, identically in every worker.
    return state.client.allreduce_async(buf, scale=1.0 / state.world_size, tag=bucket.index())
