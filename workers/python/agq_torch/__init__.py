"""agq_torch: allreduce through an agq-switch from PyTorch (libagq's Python face).

    job = agq_torch.job_from_switch("/run/agq/ctl.sock", job_id=1)   # agqctl job get 1 --json
    client = agq_torch.AgqClient(vdev, job, rank)                     # one per process (one EAL)
    model = DDP(model)                                                # Gloo: rendezvous + broadcast
    model.register_comm_hook(agq_torch.HookState(client, world), agq_torch.allreduce_hook)

The extension module `_agq` is built by CMake into <build>/python; this
package finds it through $AGQ_BUILD_DIR (default: <repo>/build).
"""
import os
import sys
from pathlib import Path

_build = Path(os.environ.get("AGQ_BUILD_DIR", Path(__file__).resolve().parents[3] / "build"))
if str(_build / "python") not in sys.path:
    sys.path.insert(0, str(_build / "python"))
try:
    import _agq  # noqa: E402,F401 (imported to fail here, with the message below)
except ImportError as e:  # pragma: no cover - a clear message instead of a bare ImportError
    raise ImportError(f"agq_torch: cannot import the _agq extension from {_build / 'python'} ({e}); build it with "
                      f"`ninja -C build _agq` (needs pybind11-dev, scripts/setup.sh) or set AGQ_BUILD_DIR") from e

from .client import AgqClient, ClientError  # noqa: E402,F401
from .hook import HookState, allreduce_hook  # noqa: E402,F401
from .switch_job import JobError, explicit_job, job_from_switch, reset_job  # noqa: E402,F401
from .backend import ConfigError, ProcessGroupAgq, register as _register; _register()  # noqa: E402,F401,E702 "agq"
