"""torch.distributed backend "agq": float32 SUM all_reduce through an
agq-switch, everything else through an internal Gloo group.

    import agq_torch                      # registers the backend
    dist.init_process_group("agq", init_method=..., rank=..., world_size=...)
    model = DDP(model)                    # no hook: buckets go through the switch

Configured by environment variables (ENV below; the table in
workers/examples/README.md, "As a torch.distributed backend"):
AGQ_SWITCH_CTL, AGQ_JOB and AGQ_VDEV are required, the rest are tuning.

What goes where. all_reduce of a CPU tensor with op SUM and dtype float32
is one AgqClient operation (in place; a non-contiguous tensor through a
contiguous copy); float16 and bfloat16 are summed as float32 copies and
rounded back. Every other collective, dtype, op or device goes to a
ProcessGroupGloo built over the same store under the prefix "agq_gloo", as
do all collectives of a group whose size is not the job's worker count (a
sub-group: one process has one switch port). Gloo (torch 1.13) has no
bfloat16: collectives that only move bytes pass bfloat16 tensors to it as
float16 views of the same memory. The switch's Work (_SwitchWork) is a
Python Work around the client's torch Future: DDP's reducer calls
allreduce(...)->getFuture() and waits on that.

Tensor keys. The switch's widths and exponents for a tensor come from the
previous operation of the same key (and error feedback keeps its residual
per key), so every rank must give the same tensor the same key. A process
group sees no bucket index, only the order of calls, which collectives make
identical in every rank. An all_reduce during a backward pass (DDP's
buckets) is keyed by (size, how many of that size came before it in this
backward); the count restarts when the backward ends (a final autograd
callback). An all_reduce outside backward is keyed by its size alone.
Sizes alone would merge DDP buckets of equal size; the count keeps them
apart."""
import collections
import datetime
import inspect
import os
import threading
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllreduceOptions, PrefixStore, ProcessGroup, ProcessGroupGloo, ReduceOp, Work

from . import _agq
from .client import AgqClient
from .switch_job import JobError, job_from_switch, reset_job

BACKEND = "agq"
_CONVERTED = (torch.float16, torch.bfloat16)


class ConfigError(ValueError):
    """A missing or malformed AGQ_* environment variable (named in the message)."""


@dataclass(frozen=True)
class Knob:
    env: str
    kwarg: str        # AgqClient keyword (or "" for the backend's own)
    kind: type
    default: object
    doc: str


# The environment the backend reads. Required ones have default None.
ENV = [
    Knob("AGQ_SWITCH_CTL", "", str, None, "the switch's control endpoint (today the path of its local control "
         "socket, agq-switch --ctl-socket); the job is read from it (agqctl job get)"),
    Knob("AGQ_JOB", "", int, None, "the job id (a [[job]] of the switch's config, or added with agqctl job add)"),
    Knob("AGQ_VDEV", "", str, None, "the DPDK --vdev of this rank's port towards the switch; {rank} and "
         "{local_rank} are replaced (e.g. net_memif0,role=client,id=0,socket=/run/agq/w{rank}.sock,"
         "socket-abstract=no)"),
    Knob("AGQ_RESET_JOB", "", int, 1, "1: rank 0 zeroes the job's slots on the switch (agqctl job reset) before "
         "any rank opens its port, so a job started again on a running switch starts clean; 0: leave them"),
    Knob("AGQ_MIN_ELEMENTS", "", int, 0, "float all_reduces of fewer elements go to Gloo (exact) instead"),
    Knob("AGQ_OPEN_TIMEOUT", "", float, 30.0, "seconds a rank waits for the others at each step of the start "
         "(settings and job, job reset, ports); a rank that failed or is silent is named"),
    Knob("AGQ_FILE_PREFIX", "file_prefix", str, "", "EAL --file-prefix of the rank's DPDK, {rank} and "
         "{local_rank} replaced (default agqpg<job>r<rank>p<pid>)"),
    Knob("AGQ_MEM_MB", "mem_mb", int, 128, "EAL memory (--no-huge -m), MB"),
    Knob("AGQ_CONNECT_TIMEOUT", "connect_timeout", float, 5.0, "seconds to connect the port and see its link up"),
    Knob("AGQ_REPLY_TIMEOUT", "reply_timeout", float, 5.0, "seconds an operation may go without any RESULT "
         "since its first DATA before it fails (a switch that is gone)"),
    Knob("AGQ_ERROR_BUDGET", "error_budget", float, 1e-4, "quantization step allowed, relative to the tensor's "
         "largest value (PROTOCOL.md section 5)"),
    Knob("AGQ_INIT_WIDTH", "init_width", int, 32, "width a key's first operation asks for"),
    Knob("AGQ_MARGIN", "margin", float, 4.0, "headroom over the previous aggregate's chunk maximum"),
    Knob("AGQ_MAX_RETRIES", "max_retries", int, 25, "retransmissions of one sequence before the operation fails "
         "(and not before it waited 5 s)"),
    Knob("AGQ_IDLE_SLEEP_US", "idle_sleep_us", int, 200, "poll thread back-off cap, microseconds"),
    # Unset: not passed (the client's default); set with a client that has
    # no such option: an error.
    Knob("AGQ_ERROR_FEEDBACK", "error_feedback", int, None, "1/0: error feedback on/off (PROTOCOL.md section 5)"),
    Knob("AGQ_MIN_WIDTH_SLACK", "min_width_slack", int, None, "bits a grant may fall below the budget's width "
         "(a multiple of 4; PROTOCOL.md section 5)"),
    Knob("AGQ_FIXED_WIDTH", "fixed_width", int, None, "pin every chunk's width (0 = adaptive; 32 = the "
         "SwitchML/ATP design, for comparisons)"),
]
_OPTIONAL = [k for k in ENV if k.kwarg and k.default is None]
_KNOBS = {k.env: k for k in ENV}


def _parse(knob, env):
    raw = env.get(knob.env)
    if raw is None or raw == "":
        return knob.default
    try:
        if knob.kind is int:
            return int(raw, 0)
        return knob.kind(raw)
    except ValueError:
        raise ConfigError(f"agq backend: {knob.env}={raw!r} is not a{'n' if knob.kind is int else ''} "
                          f"{knob.kind.__name__} ({knob.doc})") from None


def config_from_env(rank, env=None):
    """The backend's settings for `rank` from `env` (default os.environ):
    (ctl, job_id, vdev, own settings, AgqClient keywords). Raises ConfigError
    naming the variable that is missing or malformed."""
    env = os.environ if env is None else env
    vals = {k.env: _parse(k, env) for k in ENV}
    for k in ENV[:3]:
        if vals[k.env] is None:
            raise ConfigError(f"agq backend: {k.env} is not set: {k.doc}")
    ctl, job_id = vals["AGQ_SWITCH_CTL"], vals["AGQ_JOB"]
    if not 0 < job_id < 65536:
        raise ConfigError(f"agq backend: AGQ_JOB={job_id} is not a job id (1..65535)")
    try:
        local_rank = int(env.get("LOCAL_RANK", rank))
    except ValueError:
        raise ConfigError(f"agq backend: LOCAL_RANK={env.get('LOCAL_RANK')!r} is not an int") from None

    def fill(var):
        try:
            return vals[var].format(rank=rank, local_rank=local_rank)
        except (KeyError, IndexError, ValueError) as e:
            raise ConfigError(f"agq backend: {var}={vals[var]!r}: only {{rank}} and {{local_rank}} may be "
                              f"replaced ({type(e).__name__}: {e})") from None
    vdev = fill("AGQ_VDEV")
    vals["AGQ_FILE_PREFIX"] = fill("AGQ_FILE_PREFIX")
    if "net_" not in vdev:
        raise ConfigError(f"agq backend: AGQ_VDEV={vdev!r} is not a DPDK virtual device (net_memif0,..., "
                          f"net_af_packet0,...)")
    own = {k.env: vals[k.env] for k in ENV if not k.kwarg}
    kwargs = {k.kwarg: vals[k.env] for k in ENV if k.kwarg and vals[k.env] is not None}
    if "error_feedback" in kwargs:
        kwargs["error_feedback"] = bool(kwargs["error_feedback"])
    return ctl, job_id, vdev, own, kwargs


def _client_accepts(name):
    """AgqClient takes `name` itself, or passes it on to an _agq.Client that does."""
    try:
        if name in inspect.signature(AgqClient.__init__).parameters:
            return True
    except (TypeError, ValueError):
        pass
    return name in (_agq.Client.__init__.__doc__ or "")


# One switch port per process (one DPDK EAL): a group created again with the
# same job and port (destroy_process_group, init_process_group) reuses it.
_CLIENTS = {}


class _Keys:
    """Tensor keys identical in every rank (module docstring)."""

    def __init__(self):
        self._ids = {}
        self._in_backward = {}
        self._armed = False
        self._lock = threading.Lock()

    def _backward_ended(self):
        with self._lock:
            self._in_backward.clear()
            self._armed = False

    def key(self, numel):
        with self._lock:
            if not self._armed:
                try:  # only possible inside a backward pass: its end restarts the counts
                    torch.autograd.Variable._execution_engine.queue_callback(self._backward_ended)
                    self._armed = True
                except RuntimeError:
                    pass
            if self._armed:
                k = self._in_backward.get(numel, 0)
                self._in_backward[numel] = k + 1
                name = ("backward", numel, k)
            else:
                name = ("plain", numel)
            tag = self._ids.get(name)
            if tag is None:
                tag = self._ids[name] = len(self._ids) + 1
            return tag


def _bf16_bits(x):
    if isinstance(x, torch.Tensor):
        return x.view(torch.float16) if x.dtype == torch.bfloat16 else x
    if isinstance(x, (list, tuple)):
        return type(x)(_bf16_bits(e) for e in x)
    return x


def _has(store, key):
    try:  # torch 1.13's Store has no check()
        store.wait([key], datetime.timedelta(milliseconds=10))
        return True
    except RuntimeError:
        return False


def _as_list(tensors):
    return [tensors] if isinstance(tensors, torch.Tensor) else tensors


class _Alive:
    """Keeps _SwitchWorks alive for their C++ holders (below)."""

    def __init__(self, recent=256):
        self.pending = {}
        self.recent = collections.deque(maxlen=recent)


class _SwitchWork(Work):
    """The Work of an all_reduce through the switch: its future, and a
    wait() that raises the operation's error as Gloo's does (torch 1.13's
    _create_work_from_future gives a Work whose wait() returns True also
    when its future failed: a failed sync dist.all_reduce would go
    unnoticed).

    A Python Work handed to C++ (DDP's reducer: allreduce(...)->getFuture())
    loses its Python half, and with it get_future, once Python holds no
    reference (seen in 1.13: "Work::getFuture not implemented"). So the
    group holds every work until get_future() or wait() was called on it,
    or its operation completed and 256 later ones did too (a caller that
    drops an async work without waiting: bounded)."""

    def __init__(self, fut, alive):
        super().__init__()
        self._fut, self._alive = fut, alive
        alive.pending[id(self)] = self
        fut.add_done_callback(self._completed)

    def _completed(self, _fut):
        if self._alive.pending.pop(id(self), None) is not None:
            self._alive.recent.append(self)

    def _release(self):
        self._alive.pending.pop(id(self), None)

    def wait(self, timeout=None):
        self._release()
        self._fut.wait()  # raises the operation's error
        return True

    def get_future(self):
        self._release()
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        return self._fut.done() and self.exception() is None

    def exception(self):
        if not self._fut.done():
            return None
        try:
            self._fut.value()
            return None
        except Exception as e:  # noqa: BLE001 - returned, as Work.exception() does
            return e

    def result(self):
        return self._fut.wait()

    def source_rank(self):
        raise RuntimeError("agq all_reduce: a collective has no source rank")


class ProcessGroupAgq(ProcessGroup):
    """The "agq" process group (module docstring). `switch_ops` counts the
    all_reduces that went through the switch, `gloo_ops` the collectives
    that went to Gloo."""

    def __init__(self, store, rank, size, timeout, env=None):
        super().__init__(rank, size)
        self.switch_ops = 0
        self.gloo_ops = 0
        self.client = self._keys = None
        self._works = _Alive()
        self._store = store
        self._wait = datetime.timedelta(seconds=_KNOBS["AGQ_OPEN_TIMEOUT"].default)
        # Each step below ends with every rank telling the others how it
        # went (_agree): a rank that fails makes every rank fail at once,
        # naming it, instead of leaving its peers waiting in Gloo's
        # rendezvous for the store's timeout (30 min by default).
        err = None
        try:
            ctl, job_id, vdev, own, kwargs = config_from_env(rank, env)
            self.ctl, self.job_id, self.vdev = ctl, job_id, vdev
            self.min_elements = own["AGQ_MIN_ELEMENTS"]
            self._wait = datetime.timedelta(seconds=own["AGQ_OPEN_TIMEOUT"])
            try:
                self.job = job_from_switch(ctl, job_id)
            except JobError as e:
                raise RuntimeError(f"AGQ_SWITCH_CTL={ctl}, AGQ_JOB={job_id}: {e}") from None
            for k in _OPTIONAL:
                if k.kwarg in kwargs and not _client_accepts(k.kwarg):
                    raise ConfigError(f"{k.env} is set, but this build's AgqClient has no {k.kwarg} option")
            workers = self.job["workers"]
            if workers < size or (workers > size and not _CLIENTS):
                raise RuntimeError(f"job {job_id} on the switch at {ctl} has {workers} workers, the process group "
                                   f"{size} ranks")
        except (ConfigError, RuntimeError) as e:
            err = str(e).removeprefix("agq backend: ")
        self._agree("config", err, "read its AGQ_* settings and the job")
        self._gloo = ProcessGroupGloo(PrefixStore("agq_gloo", store), rank, size, timeout)
        if workers != size:
            return  # a sub-group of the job's ranks (the job's port is the default group's): Gloo only
        self._open(rank, size, own, kwargs)

    def _agree(self, step, err, what):
        """Tells the other ranks this rank's outcome of `step` (None = ok) and
        learns theirs; raises this rank's error, else the first peer's."""
        rank, size, store = self.rank(), self.size(), self._store
        store.set(f"agq/{step}/{rank}", "ok" if err is None else err)
        if err is not None:
            raise RuntimeError(f"agq backend (rank {rank}): {err}")
        keys = [f"agq/{step}/{r}" for r in range(size)]
        try:
            store.wait(keys, self._wait)
        except RuntimeError:
            silent = [r for r, k in enumerate(keys) if not _has(store, k)]
            raise RuntimeError(f"agq backend (rank {rank}): rank(s) {silent} did not {what} within "
                               f"{self._wait.total_seconds():g} s (AGQ_OPEN_TIMEOUT)") from None
        for r, k in enumerate(keys):
            got = store.get(k)
            if got != b"ok":
                raise RuntimeError(f"agq backend (rank {rank}): rank {r} could not {what}: {got.decode()}")

    def _open(self, rank, size, own, kwargs):
        cache_key = (self.vdev, self.job_id, rank, size)
        fresh = cache_key not in _CLIENTS
        err = None
        if rank == 0 and fresh and own["AGQ_RESET_JOB"]:
            try:
                reset_job(self.ctl, self.job_id)
            except (JobError, OSError) as e:
                err = f"AGQ_SWITCH_CTL={self.ctl}: {e}"
        self._agree("reset", err, "reset the job on the switch (AGQ_RESET_JOB)")
        if fresh:
            kwargs.setdefault("file_prefix", "")
            if not kwargs["file_prefix"]:
                kwargs["file_prefix"] = f"agqpg{self.job_id}r{rank}p{os.getpid()}"
            try:
                _CLIENTS[cache_key] = (AgqClient(self.vdev, self.job, rank, **kwargs), _Keys())
            except Exception as e:  # noqa: BLE001 - told to the peers, then raised
                err = (f"cannot open the switch port AGQ_VDEV={self.vdev} (switch control AGQ_SWITCH_CTL="
                       f"{self.ctl}): {type(e).__name__}: {e}")
        self._agree("open", err, "open its switch port")
        # Groups sharing the port share its keys: their calls must then come
        # in the same order in every rank, as within one group.
        self.client, self._keys = _CLIENTS[cache_key]

    def getBackendName(self):
        return BACKEND

    # -- all_reduce: the switch when it can ------------------------------
    def _switchable(self, tensors, op):
        if self.client is None or len(tensors) != 1 or op != ReduceOp.SUM:
            return None
        t = tensors[0]
        if t.device.type != "cpu" or t.is_sparse or t.numel() < self.min_elements:
            return None
        if t.dtype == torch.float32 or t.dtype in _CONVERTED:
            return t
        return None

    def allreduce(self, *args, **kwargs):
        tensors = _as_list(args[0] if args else kwargs.get("tensors", kwargs.get("tensor")))
        opts = args[1] if len(args) > 1 else kwargs.get("opts")
        op = opts.reduceOp if isinstance(opts, AllreduceOptions) else kwargs.get("op", opts if opts is not None
                                                                                 else ReduceOp.SUM)
        t = self._switchable(tensors, op) if tensors is not None else None
        if t is None:
            self.gloo_ops += 1
            return self._gloo.allreduce(*args, **kwargs)
        return self._switch_allreduce(t, tensors)

    def _switch_allreduce(self, t, tensors):
        # float32 contiguous: in place; otherwise a float32 contiguous copy, copied back.
        direct = t.dtype == torch.float32 and t.is_contiguous()
        buf = t.detach() if direct else t.detach().float().contiguous()
        tag = self._keys.key(t.numel())
        try:
            fut = self.client.allreduce_async(buf, tag=tag)
        except (ValueError, RuntimeError) as e:
            raise type(e)(f"agq all_reduce of {t.numel()} elements ({t.dtype}): {e}") from e
        self.switch_ops += 1
        if direct:
            out = fut.then(lambda f: (f.value(), tensors)[1])
        else:
            def back(f):
                f.value()  # re-raises the client's error
                with torch.no_grad():
                    t.copy_(buf)
                return tensors
            out = fut.then(back)
        return _SwitchWork(out, self._works)

    # -- everything else: Gloo -------------------------------------------
    def _g(name, moves=False):
        # moves: the collective only moves bytes. torch 1.13's Gloo has no
        # bfloat16 ("Invalid scalar type", which also stops DDP from
        # broadcasting a bfloat16 model); such tensors travel as float16
        # views of the same memory, bit for bit.
        def call(self, *args, **kwargs):
            self.gloo_ops += 1
            if moves:
                args = tuple(_bf16_bits(a) for a in args)
            return getattr(self._gloo, name)(*args, **kwargs)
        call.__name__ = name
        return call

    allreduce_coalesced = _g("allreduce_coalesced")
    allgather = _g("allgather", True)
    _allgather_base = _g("_allgather_base", True)
    allgather_coalesced = _g("allgather_coalesced", True)
    alltoall = _g("alltoall", True)
    alltoall_base = _g("alltoall_base", True)
    barrier = _g("barrier")
    monitored_barrier = _g("monitored_barrier")
    broadcast = _g("broadcast", True)
    gather = _g("gather", True)
    scatter = _g("scatter", True)
    reduce = _g("reduce")
    reduce_scatter = _g("reduce_scatter")
    _reduce_scatter_base = _g("_reduce_scatter_base")
    send = _g("send", True)
    recv = _g("recv", True)
    recv_anysource = _g("recv_anysource", True)
    del _g

    def __repr__(self):
        return f"ProcessGroupAgq(rank {self.rank()}/{self.size()}, job {self.job_id}, {self.vdev})"


def _create(store, rank, size, timeout):
    return ProcessGroupAgq(store, rank, size, timeout)


def register():
    """Registers "agq" with torch.distributed (idempotent)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create)
