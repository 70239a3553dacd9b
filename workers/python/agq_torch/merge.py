"""Adaptive gradient merging: a DDP communication hook that sends DDP's
buckets in groups chosen per phase from measured times, the same groups in
every rank.

    state = agq_torch.merge.MergeState(world_size, client=client)   # the switch through libagq
    state = agq_torch.merge.MergeState(world_size, group=pg)        # any process group: "agq", Gloo
    ddp = agq_torch.merge.ddp(model, state)                         # one DDP bucket per parameter + this hook

Units and groups. DDP is asked for the finest buckets (one per parameter:
`ddp()` sets the caps), so DDP's default 25 MB buckets are split down to
units, each ready as soon as its gradient is. The hook holds consecutive
units and sends each group of them as one all_reduce (a concatenated copy;
a group of one unit goes in place) when its last unit is ready; every unit's
future completes when its group's all_reduce has.

Phases. A phase is `phase_steps` training steps under one plan (the first
phase of a bucket layout has none: every unit alone). Each rank measures,
per step, when each unit became ready (relative to the first unit) and each
group's service time (its completion minus the later of its launch and the
previous group's completion: the link serves one all_reduce after another),
and takes the per-phase medians. At a phase's end those go, as one float64
vector, to an asynchronous all_reduce(MAX) over `stats_group` (Gloo under
the "agq" backend): the slowest rank's times, identical in every rank
(inter-worker rule: every worker merges alike, so none waits for a peer's
differently cut group). At the next step's first unit every rank takes that
vector, updates the communication model (per group size, service time =
a + b * elements, least squares over the sizes seen) and computes, with the
same code on the same numbers, the plan that minimises the predicted
completion of the last group (intra-worker rule: a group is launched when
its last unit is ready, the link serves groups in order; merging saves the
per-operation cost a, splitting lets communication start earlier, under
backward), merging on the switch only units whose largest gradients are
within max_ratio (16) of each other (its quantization step is relative to
an operation's largest value). An exact dynamic programme over contiguous
groups: the best finish of units [0, j) only gets worse if its prefix
finishes later, so F[j] = min over i of max(ready[j-1], F[i]) + a + b *
(S[j] - S[i]). A new plan is taken only if it is predicted 2% better than
the current one (or the current one now mixes magnitudes). The vector
also carries a hash of the plan each rank used; ranks that disagree (a
bug) raise instead of sending different sizes.

A step whose bucket layout (the sizes DDP hands over, identical in every
rank: DDP builds buckets from rank 0's order) differs from the plan's --
DDP rebuilds its buckets after the first step -- flushes what it holds,
sends the rest of the step unit by unit, and starts a new first phase.

New groups on the switch. Each distinct group is a new libagq tag (client)
or backend key, whose first operation has no previous aggregate to size
its widths from and quantizes against libagq's fixed initial range (|x| <=
16). So a layout's first step goes exactly (float64 through stats_group:
Gloo, also under "agq") and ends by sharing the units' largest gradients
(all_reduce MAX, once per layout; refreshed by every phase's vector); each
group's contribution is then scaled by a power of two K (exact, fixed per
group) that puts its largest value near that range, and the result scaled
back. On Gloo neither is done.

Measured per step (`records`): the time from the last unit ready (backward
has computed every gradient) to the last group's completion -- how long
the tail of communication is exposed after backward -- and the groups.
`decisions` lists every plan taken (step, groups as (start, end) units)."""
import math
import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

# Tags of the groups on a client (libagq: widths adapt per tag, and ops of
# one tag are serialised): above hook.py's bucket indices and the "agq"
# backend's keys.
TAG_BASE = 1 << 20
# libagq's first operation of a tag (round 0) does not clip |x| up to its
# init_scale (the client's default, 16): a group's contribution is scaled
# by a power of two K (exact) so that its largest value, with HEADROOM over
# the largest seen, lands near there -- a round-0 grant narrower than
# requested then costs bits relative to the group's values, not to 16.
INIT_SCALE = 16.0
HEADROOM = 8.0
ADOPT_GAIN = 0.02     # a new plan must be predicted this much (relative) better
# On the switch a chunk's quantization step is budgeted relative to its
# operation's largest value (PROTOCOL.md section 5): a unit merged with one
# of much larger gradients would lose its precision. Units whose largest
# gradients differ by more than this factor are not merged (not on Gloo).
SWITCH_MAX_RATIO = 16.0
TIE_REL = 0.01        # predicted finishes within this fraction of a are equal: fewer groups win


@dataclass(frozen=True)
class Plan:
    sizes: tuple       # units' elements, in DDP bucket order
    groups: tuple      # (start, end) unit ranges, contiguous, covering all

    def ends(self):
        e = [False] * len(self.sizes)
        for _, j in self.groups:
            e[j - 1] = True
        return e

    def digest(self) -> float:
        """A number every rank computes alike from the plan (exact in float64)."""
        h = 0
        for i, j in self.groups:
            h = (h * 1000003 + i * 7919 + j) % (1 << 40)
        return float(h * 1024 + len(self.groups) % 1024)


def fit_cost(table):
    """Least squares t = a + b * n over {n: t}, a, b >= 0."""
    pts = sorted(table.items())
    if not pts:
        return 0.0, 0.0
    if len(pts) == 1:
        n, t = pts[0]
        return 0.0, t / max(n, 1)
    mx = sum(n for n, _ in pts) / len(pts)
    my = sum(t for _, t in pts) / len(pts)
    sxx = sum((n - mx) ** 2 for n, _ in pts)
    b = sum((n - mx) * (t - my) for n, t in pts) / sxx if sxx > 0 else 0.0
    if b < 0:
        return my, 0.0
    a = my - b * mx
    if a < 0:  # through the origin instead
        sn = sum(n * n for n, _ in pts)
        return 0.0, (sum(n * t for n, t in pts) / sn) if sn else 0.0
    return a, b


def predict(groups, ready, sizes, a, b):
    """Completion of the last group (seconds after the first unit was ready)."""
    finish = -math.inf
    for i, j in groups:
        finish = max(ready[j - 1], finish) + a + b * sum(sizes[i:j])
    return finish


def mixes(groups, mags, max_ratio):
    """How many groups hold units whose magnitudes differ by more than max_ratio."""
    if not max_ratio or mags is None:
        return 0
    bad = 0
    for i, j in groups:
        m = [x for x in mags[i:j] if x > 0]
        bad += bool(m) and max(m) > max_ratio * min(m)
    return bad


def best_groups(ready, sizes, a, b, mags=None, max_ratio=0.0):
    """The contiguous grouping minimising predict(); ties (within TIE_REL of
    a, plus 1 us) go to fewer groups. With `mags` (per unit, its largest
    |gradient|) and max_ratio > 0, a group's units differ by at most that
    factor (zeros join any group). Deterministic: same inputs, same answer."""
    n = len(sizes)
    pre = [0]
    for s in sizes:
        pre.append(pre[-1] + s)
    tie = TIE_REL * a + 1e-6
    fin = [-math.inf] + [0.0] * n
    cnt = [0] * (n + 1)
    arg = [0] * (n + 1)
    for j in range(1, n + 1):
        bf = bc = bi = None
        hi, lo = 0.0, math.inf
        for i in range(j - 1, -1, -1):  # group [i, j), growing to the front
            if mags is not None and max_ratio > 0 and mags[i] > 0:
                hi, lo = max(hi, mags[i]), min(lo, mags[i])
                if hi > max_ratio * lo and i < j - 1:
                    break
            f = max(ready[j - 1], fin[i]) + a + b * (pre[j] - pre[i])
            c = cnt[i] + 1
            if bf is None or f < bf - tie or (f <= bf + tie and c < bc):
                bf, bc, bi = f, c, i
        fin[j], cnt[j], arg[j] = bf, bc, bi
    groups, j = [], n
    while j > 0:
        groups.append((arg[j], j))
        j = arg[j]
    return tuple(reversed(groups))


class _Step:
    """One step's measurements on this rank."""

    def __init__(self, t0):
        self.t0 = t0
        self.sizes = []
        self.ready = []
        self.umax = []       # per unit: max |local gradient|
        self.groups = []     # [start, end, launch, done]
        self.plan = None     # the plan this step followed to its end (None: units alone, or broken)


class MergeState:
    """State of merge_hook. Exactly one of `client` (an AgqClient: groups go
    through libagq, tag TAG_BASE + k per distinct group) or `group` (a
    process group, default the default group: dist.all_reduce on Gloo or
    any; an "agq" group's switch port, its client, as with `client`).
    `stats_group` carries the per-phase measurements (default `group`, else
    the default group); `adaptive=False` sends every unit alone (measured
    just the same); on the switch `max_ratio` bounds how far the largest
    gradients of a group's units may differ (0: no bound)."""

    def __init__(self, world_size, client=None, group=None, stats_group=None, phase_steps=20,
                 adaptive=True, keep_records=True, max_ratio=SWITCH_MAX_RATIO):
        if phase_steps < 2:
            raise ValueError("merge: phase_steps must be >= 2 (the first step of a phase is not measured)")
        self.world_size = world_size
        self.client, self.group = client, group
        self.stats_group = stats_group if stats_group is not None else group
        if client is None:
            # Under "agq" the groups go to the backend's client under this
            # state's own tags: the backend keys an all_reduce by its size,
            # which follows no group across plans (nor the scale K below).
            pg = group if group is not None else (dist.distributed_c10d._get_default_group()
                                                  if dist.is_initialized() else None)
            self.client = getattr(pg, "client", None) if self._backend(pg) == "agq" else None
        self.phase_steps, self.adaptive, self.keep_records = phase_steps, adaptive, keep_records
        self.max_ratio = max_ratio
        self.plan = None
        self.layout = None
        self.cost = {}           # elements -> service time (s), from the shared measurements
        self.a = self.b = 0.0
        self.step = 0
        self.decisions = []      # (step, groups) of every plan taken
        self.records = []        # per step: step, groups, tail_s, backward_s, units
        self._tags = {}
        self._scales = {}        # (layout, start, end) -> K, fixed for the group's tag
        self._umax = None        # per unit of self.layout: max |gradient| over the ranks (shared)
        self._exact = True       # this step: every unit exactly (float64, stats_group) -- see _begin_step
        self._gloo_only = self.client is None and self._backend(group) == "gloo"
        self._cur = None
        self._held = []          # (index, buffer, future) of the open group
        self._following = False  # the step still follows self.plan
        self._phase = []         # finished _Steps of the current phase
        self._phase_len = 0
        self._pending = None     # (work, vector, plan, layout) of the phase's stats all_reduce

    @staticmethod
    def _backend(group):
        try:
            return dist.get_backend(group)
        except (RuntimeError, ValueError):
            return None

    # -- sending ------------------------------------------------------------
    def _scale(self, start, end):
        key = (self.layout, start, end)
        k = self._scales.get(key)
        if k is None:
            m = max(self._umax[start:end]) if self._umax is not None and end <= len(self._umax) else 0.0
            e = math.floor(math.log2(INIT_SCALE / (HEADROOM * m))) if m > 0 else 0
            k = self._scales[key] = 2.0 ** max(-60, min(60, e))
        return k

    def _tag(self, start, end):
        key = (self.layout, start, end)
        t = self._tags.get(key)
        if t is None:
            t = self._tags[key] = TAG_BASE + len(self._tags)
        return t

    def _launch(self, held):
        step = self._cur
        start, end = held[0][0], held[-1][0] + 1
        if len(held) == 1:
            buf = held[0][1]
        else:
            buf = torch.cat([h[1] for h in held])
        rec = [start, end, time.perf_counter(), None]
        step.groups.append(rec)
        exact = self._exact and not self._gloo_only
        k = 1.0 if exact or self._gloo_only else self._scale(start, end)
        try:
            if exact:
                wire = buf.double().div_(self.world_size)
                fut = dist.all_reduce(wire, group=self.stats_group, async_op=True).get_future()
            elif self.client is not None:
                if k != 1.0:
                    buf.mul_(k)
                fut = self.client.allreduce_async(buf, scale=1.0 / (self.world_size * k), tag=self._tag(start, end))
            else:
                buf.mul_(k / self.world_size)
                fut = dist.all_reduce(buf, group=self.group, async_op=True).get_future()
        except (ValueError, RuntimeError) as e:
            raise type(e)(f"agq merge: all_reduce of units [{start}, {end}) ({buf.numel()} elements) at step "
                          f"{self.step}: {e}") from e

        def done(f):
            rec[3] = time.perf_counter()
            try:
                f.value()
            except Exception as e:  # noqa: BLE001 - handed to every unit's future: backward raises it
                for _, _, uf in held:
                    uf.set_exception(e)
                return
            if exact:
                buf.copy_(wire)
            elif self.client is None and k != 1.0:
                buf.div_(k)
            if len(held) == 1:
                held[0][2].set_result(held[0][1])
                return
            off = 0
            for _, ub, uf in held:
                n = ub.numel()
                ub.copy_(buf[off:off + n])
                off += n
                uf.set_result(ub)
        fut.add_done_callback(done)

    def _flush(self):
        if self._held:
            held, self._held = self._held, []
            self._launch(held)

    # -- the hook -----------------------------------------------------------
    def on_bucket(self, bucket):
        now = time.perf_counter()
        i, buf = bucket.index(), bucket.buffer()
        if i == 0:
            self._begin_step(now)
        st = self._cur
        st.sizes.append(buf.numel())
        st.ready.append(now - st.t0)
        st.umax.append(float(buf.abs().max()) if buf.numel() else 0.0)
        if not self._exact and (self.layout is None or i >= len(self.layout) or self.layout[i] != buf.numel()):
            # A layout this state has no shared magnitudes for: the rest of
            # the step goes exactly (every rank decides this alike).
            self._flush()
            self._exact = True
        fut = torch.futures.Future()
        plan = self.plan if self._following else None
        if plan is not None and (i >= len(plan.sizes) or plan.sizes[i] != buf.numel()):
            # The layout changed under the plan: identical in every rank (DDP's
            # buckets are), so every rank stops following it here.
            self._following = False
            plan = None
            self._flush()
        self._held.append((i, buf, fut))
        if plan is None or self._ends[i]:
            self._flush()
        if bucket.is_last():
            self._flush()
            self._end_step()
        return fut

    def _begin_step(self, now):
        if self._cur is not None:  # a step whose last bucket never came (an error in backward)
            self._held = []
        self._cur = _Step(now)
        if self._pending is not None:
            self._replan()
        self._following = self.plan is not None
        self._ends = self.plan.ends() if self.plan is not None else None
        # A layout's first step goes exactly through stats_group (float64:
        # Gloo also under "agq"), and its end shares the units' magnitudes,
        # from which every group's K is chosen: a new tag's first switch
        # operation never carries unscaled gradients.
        self._exact = self._umax is None

    def _end_step(self):
        st, self._cur = self._cur, None
        layout = tuple(st.sizes)
        followed = self._following and self.plan is not None and layout == self.plan.sizes
        st.plan = self.plan if followed else None
        if layout != self.layout:
            self.layout, self.plan = layout, None
            self._phase, self._phase_len = [], 0
            self._umax = None
            if not self._gloo_only:
                um = torch.tensor(st.umax, dtype=torch.float64)
                dist.all_reduce(um, op=dist.ReduceOp.MAX, group=self.stats_group)
                self._umax = um.tolist()
            else:
                self._umax = list(st.umax)
        self._phase_len += 1
        if self._phase_len > 1:  # the first step of a phase (new keys, new plan) is not measured
            self._phase.append(st)
        self.step += 1
        if self.keep_records:
            self.records.append(st)
        if self._phase_len >= self.phase_steps and self._pending is None:
            self._send_stats()

    # -- phases -------------------------------------------------------------
    def _send_stats(self):
        steps, self._phase, self._phase_len = self._phase, [], 0
        n = len(self.layout)
        steps = [s for s in steps if all(g[3] is not None for g in s.groups)]
        vec = torch.zeros(3 * n + 3, dtype=torch.float64)
        plan = self.plan
        digest = plan.digest() if plan is not None else -1.0
        vec[3 * n], vec[3 * n + 1] = digest, -digest
        if steps:
            for u in range(n):
                vec[u] = statistics.median(s.ready[u] for s in steps)
                vec[2 * n + u] = max(s.umax[u] for s in steps)
            per_end = {}
            for s in steps:
                prev = -math.inf
                for start, end, launch, done in s.groups:
                    per_end.setdefault(end - 1, []).append(done - max(launch, prev))
                    prev = max(prev, done)
            for u, ts in per_end.items():
                vec[n + u] = statistics.median(ts)
            vec[3 * n + 2] = 1.0
        work = dist.all_reduce(vec, op=dist.ReduceOp.MAX, group=self.stats_group, async_op=True)
        self._pending = (work, vec, plan, self.layout)

    def _replan(self):
        work, vec, plan, layout = self._pending
        self._pending = None
        work.wait()
        n = len(layout)
        v = vec.tolist()
        if v[3 * n] != -v[3 * n + 1]:
            raise RuntimeError(f"agq merge: the ranks followed different plans in the phase before step "
                               f"{self.step} (digests {v[3 * n]} vs {-v[3 * n + 1]}): they would send different "
                               f"sizes")
        if layout != self.layout or v[3 * n + 2] == 0.0:
            return
        self._umax = v[2 * n:3 * n]
        ready = v[:n]
        groups = plan.groups if plan is not None else tuple((u, u + 1) for u in range(n))
        seen = {}
        for start, end in groups:
            seen.setdefault(sum(layout[start:end]), []).append(v[n + end - 1])
        for elems, ts in sorted(seen.items()):  # the phase's mean per size, averaged with the earlier phases'
            t = sum(ts) / len(ts)
            old = self.cost.get(elems)
            self.cost[elems] = t if old is None else 0.5 * (old + t)
        self.a, self.b = fit_cost(self.cost)
        if not self.adaptive:
            return
        ratio = 0.0 if self._gloo_only else self.max_ratio
        new = best_groups(ready, list(layout), self.a, self.b, self._umax, ratio)
        if plan is not None and mixes(plan.groups, self._umax, ratio) == 0:
            cur = predict(plan.groups, ready, layout, self.a, self.b)
            if predict(new, ready, layout, self.a, self.b) > cur - ADOPT_GAIN * max(cur, 1e-6):
                return
        if plan is None or new != plan.groups:
            self.plan = Plan(layout, new)
            self.decisions.append((self.step, new))

    # -- reporting ----------------------------------------------------------
    def step_records(self):
        """Per recorded step: step, units, groups, tail_s (last group done -
        last unit ready), backward_s (last unit ready - first), planned."""
        out = []
        for k, s in enumerate(self.records):
            if not s.groups or any(g[3] is None for g in s.groups):
                continue
            out.append(dict(step=k, units=len(s.sizes), groups=len(s.groups),
                            tail_s=max(g[3] for g in s.groups) - (s.t0 + s.ready[-1]),
                            backward_s=s.ready[-1], planned=s.plan is not None))
        return out


def merge_hook(state: MergeState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """The DDP communication hook (register with MergeState as its state)."""
    return state.on_bucket(bucket)


def ddp(module, state: MergeState, unit_mb: float = 0.0, **ddp_kwargs):
    """DistributedDataParallel(module) with buckets of at most `unit_mb` MB
    (0: one per parameter) -- DDP's first bucket too -- and merge_hook
    registered with `state`. `process_group` defaults to state.group."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    cap = unit_mb if unit_mb > 0 else 1e-9
    ddp_kwargs.setdefault("process_group", state.group)
    old = dist._DEFAULT_FIRST_BUCKET_BYTES
    dist._DEFAULT_FIRST_BUCKET_BYTES = max(1, int(cap * 1024 * 1024))
    try:
        model = DDP(module, bucket_cap_mb=cap, **ddp_kwargs)
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES = old
    model.register_comm_hook(state, merge_hook)
    return model
