"""The DDP communication hook: each gradient bucket goes through the switch
and comes back into the bucket divided by the world size. It returns at
once with a torch Future (libagq's poll thread does the work), so backward
keeps computing later buckets while earlier ones travel. Gloo (or any
process group) still does rendezvous and the parameter broadcast.

check_every = k > 0 also allreduces a copy of every bucket of every k-th
step with the process group (Gloo) and compares, element by element, the
switch's result with it against libagq's per-element error bound (the
protocol's bound for the width granted, PROTOCOL.md section 2): the
quantization error on real gradients, measured. Those steps are slower.
The bound is the protocol's for what this step encoded: with the client's
error feedback on (its default) every rank encodes its gradient plus the
residual the bucket's previous step left, so the result differs from Gloo's
sum of the raw gradients by that residual too (at most the previous step's
bound); the checks record it (`error_feedback`), and a bit-exact check of
the bound wants AgqClient(..., error_feedback=False)."""
import torch
import torch.distributed as dist

# Gloo sums float32 in its own order: allow its rounding beside the bound.
FLOAT_SLACK = 2.0 ** -20


class HookState:
    def __init__(self, client, world_size: int, check_every: int = 0, group=None):
        self.client = client
        self.world_size = world_size
        self.check_every = check_every
        self.group = group
        self.step = 0
        self.launches = []  # (step, bucket index, elements)
        self.checks = []    # per checked bucket: step, bucket, elements, max_abs, rms, max_over_bound, violations
        self.in_flight_at_return = 0  # buckets still travelling when the hook returned (it does not wait)

    def checking(self) -> bool:
        return self.check_every > 0 and self.step % self.check_every == 0

    def __repr__(self):
        return f"HookState(job {self.client.job['id']}, rank {self.client.rank}, world {self.world_size})"


def _compare(state, step, index, ref, bound):
    def cmp(fut):
        got = fut.value()
        err = (got - ref).abs()
        slack = FLOAT_SLACK * float(ref.abs().max()) if ref.numel() else 0.0
        violations = int((err > bound + slack).sum())
        finite = bound[torch.isfinite(bound)]
        ratio = float((err / bound.clamp_min(1e-30)).max()) if err.numel() else 0.0
        state.checks.append(dict(step=step, bucket=index, elements=ref.numel(),
                                 max_abs=float(err.max()) if err.numel() else 0.0,
                                 rms=float(err.pow(2).mean().sqrt()) if err.numel() else 0.0,
                                 max_bound=float(finite.max()) if finite.numel() else 0.0,
                                 max_over_bound=ratio, violations=violations,
                                 error_feedback=getattr(state.client, "error_feedback", False)))
        return got
    return cmp


def allreduce_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()  # the flat gradient bucket (torch 1.13: GradBucket.buffer())
    step, index = state.step, bucket.index()
    state.launches.append((step, index, buf.numel()))
    if bucket.is_last():
        state.step += 1
    # The tag is the bucket index: the same bucket's previous aggregate
    # chooses this one's widths and exponents, identically in every worker.
    checking = state.check_every > 0 and step % state.check_every == 0
    if checking:
        ref = buf.clone()
        dist.all_reduce(ref, group=state.group)  # the reference, before the bucket is overwritten
        ref /= state.world_size
        bound = torch.empty_like(buf)
    try:
        fut = state.client.allreduce_async(buf, scale=1.0 / state.world_size, tag=index,
                                           bound=bound if checking else None)
    except (ValueError, RuntimeError) as e:
        # NaN/Inf in the gradients, a closed client: backward raises it
        # instead of aggregating garbage.
        raise type(e)(f"agq allreduce of DDP bucket {index} at step {step}: {e}") from e
    if not fut.done():
        state.in_flight_at_return += 1
    return fut.then(_compare(state, step, index, ref, bound)) if checking else fut
