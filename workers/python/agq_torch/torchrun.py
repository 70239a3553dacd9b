"""torchrun, usable on Debian 12's torch 1.13 with Python 3.11:

    /usr/bin/python3 -m agq_torch.torchrun --standalone --nproc_per_node=2 train.py ...

The same arguments as torchrun. Debian's /usr/bin/torchrun fails at once
with "AttributeError: 'NoneType' object has no attribute 'get'" unless
given --redirects and --tee of 1 or 2: torch 1.13 parses them by iterating
its IntFlag `Std`, and Python 3.11 iterates flags without their zero and
multi-bit members, so the defaults ("0") and 3 match nothing. This looks
the value up by value instead, then runs torch.distributed.run.main."""
import re
import sys

from torch.distributed.elastic.multiprocessing import api as _api


def _from_str(vm: str):
    if re.match(_api._VALUE_REGEX, vm):
        return _api.Std(int(vm))
    if re.match(_api._MAPPING_REGEX, vm):
        return {int(i): _api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{_api._VALUE_REGEX}> or <{_api._MAPPING_REGEX}>")


def main(argv=None):
    if _api.Std.from_str("0") is None:  # the broken parse (a fixed torch leaves it alone)
        _api.Std.from_str = staticmethod(_from_str)
    from torch.distributed.run import main as run_main
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
