"""AgqClient: torch tensors in, torch Futures out, over libagq's Client.

One completion thread per client turns libagq's completions into torch
futures; the submitting thread (PyTorch's autograd thread in a DDP hook)
never waits. Tensors stay referenced here until their operation is done,
so the poll thread never writes into freed memory."""
import atexit
import threading

import torch

from . import _agq
from .switch_job import client_args

ClientError = _agq.ClientError


class AgqClient:
    def __init__(self, vdev: str, job: dict, rank: int, error_feedback: bool = True, **options):
        """vdev: the DPDK --vdev of this rank's port (a memif client of the
        switch); job: job_from_switch() or explicit_job(); error_feedback:
        keep, per tag, what quantization and truncation removed from this
        rank's contribution and add it into the tag's next allreduce
        (PROTOCOL.md section 5; off for bit-exact comparisons); options:
        _agq.Client keywords (file_prefix, connect_timeout, error_budget,
        init_width, min_width_slack, fixed_width, ...)."""
        self.job, self.rank = job, rank
        self.error_feedback = bool(error_feedback)
        self._c = _agq.Client(vdev, **client_args(job, rank), error_feedback=self.error_feedback, **options)
        self._lock = threading.Lock()
        self._pending = {}
        self.history = []  # (tag, stats) of every completed operation, in completion order
        self._closed = False
        self._thread = threading.Thread(target=self._complete_loop, name="agq-completions", daemon=True)
        self._thread.start()
        # An orderly memif disconnect also when the script forgets close().
        # (A switch that dies instead is survived: the module's DPDK waits
        # for the poll thread before it unmaps the lost link's rings, pitfall
        # P7, workers/python/unmap_wrap.cpp.)
        atexit.register(self.close)

    @staticmethod
    def _check(tensor, what="tensor"):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"agq allreduce: {what} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype != torch.float32:
            raise TypeError(f"agq allreduce: {what} must be torch.float32, got {tensor.dtype} "
                            f"(convert it, or allreduce it with Gloo)")
        if tensor.device.type != "cpu":
            raise TypeError(f"agq allreduce: {what} must be a CPU tensor, got device {tensor.device}")
        if not tensor.is_contiguous():
            raise ValueError(f"agq allreduce: {what} must be contiguous (call .contiguous())")

    def allreduce_async(self, tensor, scale: float = 1.0, tag: int = 0, bound=None,
                        _stats=None) -> torch.futures.Future:
        """Sum of `tensor` over the job's workers times `scale`, in place.
        The future's value is `tensor`. `bound` (same shape, float32) gets
        each element's error bound. Raises ValueError on NaN/Inf."""
        if self._closed:
            raise ClientError("agq allreduce on a closed client")
        self._check(tensor)
        arr = tensor.detach().view(-1).numpy()
        barr = None
        if bound is not None:
            self._check(bound, "bound")
            if bound.numel() != tensor.numel():
                raise ValueError(f"agq allreduce: bound has {bound.numel()} elements, tensor {tensor.numel()}")
            barr = bound.detach().view(-1).numpy()
        fut = torch.futures.Future()
        with self._lock:  # the completion thread pops under the same lock: no lost completion
            op = self._c.submit(arr, arr, float(scale), int(tag), barr)
            self._pending[op] = (fut, tensor, arr, bound, barr, tag, _stats)
        return fut

    def allreduce(self, tensor, scale: float = 1.0, tag: int = 0, bound=None) -> dict:
        """Synchronous allreduce_async(); returns the operation's stats
        (granted widths, retransmissions, fallbacks, error bound...)."""
        stats = []
        fut = self.allreduce_async(tensor, scale, tag, bound, _stats=stats)
        fut.wait()
        return stats[0]

    def _complete_loop(self):
        while not self._closed:
            for op, ok, error, stats in self._c.take_completed(0.1):
                with self._lock:
                    entry = self._pending.pop(op, None)
                if entry is None:
                    continue
                fut, tensor, _arr, _bound, _barr, tag, want = entry
                self.history.append((tag, stats))
                if want is not None:
                    want.append(stats)
                if ok:
                    fut.set_result(tensor)
                else:
                    fut.set_exception(ClientError(error))

    def diagnostic(self) -> str:
        return self._c.diagnostic()

    def close(self):
        if self._closed:
            return
        self._c.close()  # pending operations complete with "client closed"
        for op, ok, error, stats in self._c.take_completed(0):
            with self._lock:
                entry = self._pending.pop(op, None)
            if entry is not None:
                entry[0].set_exception(ClientError(error or "client closed"))
        self._closed = True
        self._thread.join(1.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
