"""Where one DGL process's time goes, for out_of_core_bench.py: ``python -m bench.ooc_profile
ARGS...`` runs what dglrun asked to run (``-P -m dglprocess run SCRIPT ARGS`` or ``-P -m
outofcore run SCRIPT ARGS``) with a few DGL functions timed, and at exit writes
``$OOC_BENCH_RECORDS/profile-<host>-<role>-<pid>.json``.

The timers go in when the script calls ``dgl.distributed.initialize``: after outofcore's patch
(installed before the script runs), so that they time the patch's functions too.

* A trainer, per epoch of its training loader (the ``DistDataLoader`` that shuffles; an epoch
  runs from its ``__iter__`` to the next ``__iter__`` of any loader, or the process's end: a
  loop that samples ahead trains its last minibatches after the loader's ``StopIteration``):
  the epoch's wall time; ``sampling``,
  the time in the loader's ``__next__`` (sampling, and with the patch's pipeline also the
  prefetches it starts); ``features``, the time in ``KVClient.pull``; ``compute``, the rest
  (forward, backward, the optimizer, DDP's all-reduce). With outofcore's patch, the pulls'
  parts too (:data:`outofcore.patch.STATS`: the local rows' gather, which takes the page
  faults, and the wait for the other machines' rows), and the major page faults of the
  trainer's thread during its pulls. The rows each epoch pulled, per data name, are kept as
  bit masks (``touched-<host>-<pid>.npz``): the bench's union of them over the trainers is
  the features an epoch touched, what the bytes read from disk are held against. How many
  times each row was pulled, over all epochs, per data name, is kept too
  (``pulls-<host>-<pid>.npz``): the bench's sum of them over the trainers says how much of
  the pulls the hottest rows take.
* A server: the time spent answering each kind of request (``PullRequest``: other machines'
  feature pulls; ``SamplingRequest``: their neighbour sampling) and its major page faults.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import runpy
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECORDS_ENV = "OOC_BENCH_RECORDS"

_epochs: list[dict[str, float]] = []
_current: dict[str, float] | None = None
_served: dict[str, list[float]] = {}  # request class -> [seconds, count, major faults]
_train_loader: list[Any] = []
_touched: list[dict[str, Any]] = []  # per epoch: data name -> bool mask of the rows pulled
_row_bytes: dict[str, int] = {}
_pulls: dict[str, Any] = {}  # data name -> per row, the pulls of it (every epoch)


def _majflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt


def _patch_stats() -> dict[str, float]:
    patch = sys.modules.get("outofcore.patch")
    return dict(getattr(patch, "STATS", {}) or {})


def _begin_epoch() -> None:
    global _current
    _current = {"started": time.perf_counter(), "sampling": 0.0, "features": 0.0, "faults": 0}
    _current.update({f"patch.{k}": v for k, v in _patch_stats().items()})
    _touched.append({})


def _end_epoch() -> None:
    global _current
    if _current is None:
        return
    epoch = _current
    _current = None
    epoch["wall"] = time.perf_counter() - epoch.pop("started")
    epoch["compute"] = epoch["wall"] - epoch["sampling"] - epoch["features"]
    for k, v in _patch_stats().items():
        epoch[f"patch.{k}"] = v - epoch.get(f"patch.{k}", 0.0)
    _epochs.append(epoch)


def _wrap(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    setattr(owner, name, make(getattr(owner, name)))


def _timed_iter(original: Callable[..., Any]) -> Callable[..., Any]:
    def __iter__(self: Any) -> Any:
        _end_epoch()  # (any loader's: a loop that samples ahead trains after StopIteration)
        if getattr(self, "shuffle", False):
            _train_loader[:] = [self]
            _begin_epoch()
        return original(self)

    return __iter__


def _timed_next(original: Callable[..., Any]) -> Callable[..., Any]:
    def __next__(self: Any) -> Any:
        mine = _current is not None and _train_loader and _train_loader[0] is self
        started = time.perf_counter()
        try:
            return original(self)
        finally:
            if mine and _current is not None:
                _current["sampling"] += time.perf_counter() - started

    return __next__


def _timed_pull(original: Callable[..., Any]) -> Callable[..., Any]:
    def pull(self: Any, name: str, id_tensor: Any) -> Any:
        if _current is None:
            return original(self, name, id_tensor)
        started, faults = time.perf_counter(), _majflt()
        try:
            return original(self, name, id_tensor)
        finally:
            _current["features"] += time.perf_counter() - started
            _current["faults"] += _majflt() - faults
            _touch(self, name, id_tensor)

    return pull


def _touch(client: Any, name: str, id_tensor: Any) -> None:
    import numpy as np

    shape = client._full_data_shape[name]
    mask = _touched[-1].get(name)
    if mask is None:
        mask = _touched[-1][name] = np.zeros(shape[0], dtype=bool)
        _row_bytes[name] = (
            int(np.prod(shape[1:], dtype=np.int64)) * client._data_store[name].element_size()
        )
    ids = id_tensor.numpy()
    mask[ids] = True
    counts = _pulls.get(name)
    if counts is None:
        counts = _pulls[name] = np.zeros(shape[0], dtype=np.int32)
    np.add.at(counts, ids, 1)


def _timed_request(cls: type, original: Callable[..., Any]) -> Callable[..., Any]:
    def process_request(self: Any, server_state: Any) -> Any:
        started, faults = time.perf_counter(), _majflt()
        try:
            return original(self, server_state)
        finally:
            entry = _served.setdefault(cls.__name__, [0.0, 0, 0])
            entry[0] += time.perf_counter() - started
            entry[1] += 1
            entry[2] += _majflt() - faults

    return process_request


def _requests(base: type) -> list[type]:
    found: list[type] = []
    todo: list[type] = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _install_timers() -> None:
    from dgl.distributed import DistDataLoader, kvstore, rpc

    _wrap(DistDataLoader, "__iter__", _timed_iter)
    _wrap(DistDataLoader, "__next__", _timed_next)
    _wrap(kvstore.KVClient, "pull", _timed_pull)
    for cls in _requests(rpc.Request):
        if "process_request" in vars(cls):
            timed = _timed_request(cls, vars(cls)["process_request"])
            setattr(cls, "process_request", timed)  # noqa: B010 (a class only known at run time)


def _write() -> None:
    _end_epoch()
    records = os.environ.get(RECORDS_ENV)
    role = os.environ.get("DGL_ROLE", "")
    if not records or not role:
        return
    doc = {
        "host": socket.gethostname(),
        "role": role,
        "epochs": _epochs,
        "served": {k: {"seconds": v[0], "count": v[1], "faults": v[2]} for k, v in _served.items()},
    }
    path = Path(records, f"profile-{doc['host']}-{role}-{os.getpid()}.json")
    if _touched:
        import numpy as np

        masks = {
            f"{e}/{name}": np.packbits(m) for e, t in enumerate(_touched) for name, m in t.items()
        }
        np.savez(Path(records, f"touched-{doc['host']}-{os.getpid()}.npz"), **masks)
        np.savez(Path(records, f"pulls-{doc['host']}-{os.getpid()}.npz"), **_pulls)
        doc["row_bytes"] = _row_bytes
    path.write_text(json.dumps(doc))


def main() -> None:
    import dgl.distributed

    initialize = dgl.distributed.initialize

    def timed_initialize(*args: Any, **kwargs: Any) -> Any:
        _install_timers()
        return initialize(*args, **kwargs)

    dgl.distributed.initialize = timed_initialize
    atexit.register(_write)
    argv = [a for a in sys.argv[1:] if a != "-P"]
    if argv[:1] == ["-m"]:
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:  # (bench/ooc_worker.py put the script's folder on PYTHONPATH, as `python SCRIPT`)
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
