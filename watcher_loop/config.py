"""watcher-loop's configuration: environment variables (as the operator sets them), or flags
(:mod:`podprogram.options`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from podcontract import (
    HOSTFILE_PATH,
    WATCHER_EXPECTED_PODS_ENV,
    WATCHER_FILE_ENV,
    WATCHER_MODE_ENV,
    WATCHER_NAMESPACE_ENV,
)
from podprogram.options import ConfigError, OptionParser
from watcher_loop.state import Mode

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"
DEFAULT_POLL_INTERVAL = 2.0
PROG = "watcher-loop"  # the program's name: its console script, its log lines' prefix


@dataclass(frozen=True)
class WatcherConfig:
    """What watcher-loop waits for: the pods listed in ``file``, in ``namespace``, to reach
    ``mode``, within ``timeout`` (0: no limit)."""

    file: Path
    mode: Mode
    namespace: str = DEFAULT_NAMESPACE
    expected_pods: int | None = None  # the file is incomplete until it lists this many pods
    timeout: float = 0.0  # seconds for the whole wait (file and pods); 0 = no timeout
    poll_interval: float = DEFAULT_POLL_INTERVAL  # re-read interval of an incomplete file


def _parser() -> OptionParser:
    p = OptionParser(
        PROG,
        "Wait until the pods listed in a hostfile/partfile are ready or finished.",
    )
    p.option("--file", WATCHER_FILE_ENV, "pod file to read")
    p.option("--mode", WATCHER_MODE_ENV, "'ready' or 'finished'")
    p.option("--namespace", WATCHER_NAMESPACE_ENV, "namespace of the pods")
    p.option("--expected-pods", WATCHER_EXPECTED_PODS_ENV, "pods the file must list")
    p.option("--timeout", "WATCHER_TIMEOUT", "seconds, 0 = none")
    p.option("--poll-interval", "WATCHER_POLL_INTERVAL", "file re-read seconds")
    return p


def default_namespace(namespace_file: Path = NAMESPACE_FILE) -> str:
    """The pod's own namespace (service account file), else ``default``."""
    try:
        ns = namespace_file.read_text().strip()
    except OSError:
        return DEFAULT_NAMESPACE
    return ns or DEFAULT_NAMESPACE


def load_config(
    env: Mapping[str, str],
    argv: Sequence[str] = (),
    *,
    namespace_file: Path = NAMESPACE_FILE,
) -> WatcherConfig:
    """Build the configuration; raises :class:`ConfigError` naming the bad variable or flag."""
    settings = _parser().read(env, argv)

    file, name = settings.get("--file")
    if not file:
        raise ConfigError(
            f"{name} is not set: it must name the pod file to read (e.g. {HOSTFILE_PATH})"
        )

    raw_mode, name = settings.get("--mode")
    if not raw_mode:
        raise ConfigError(f"{name} is not set: it must be 'ready' or 'finished'")
    try:
        mode = Mode(raw_mode.lower())
    except ValueError:
        raise ConfigError(f"{name} must be 'ready' or 'finished', got {raw_mode!r}") from None

    namespace, _ = settings.get("--namespace")
    if not namespace:
        namespace = default_namespace(namespace_file)

    raw, name = settings.get("--expected-pods")
    expected: int | None = None
    if raw:
        if not re.fullmatch(r"[0-9]+", raw) or int(raw) < 1:
            raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
        expected = int(raw)

    timeout = settings.seconds("--timeout", 0.0, positive=False)
    poll = settings.seconds("--poll-interval", DEFAULT_POLL_INTERVAL, positive=True)

    return WatcherConfig(
        file=Path(file),
        mode=mode,
        namespace=namespace,
        expected_pods=expected,
        timeout=timeout,
        poll_interval=poll,
    )
