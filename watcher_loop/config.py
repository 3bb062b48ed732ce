"""watcher-loop's configuration: environment variables (as the operator sets them), or flags."""

from __future__ import annotations

import argparse
import math
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
from watcher_loop.state import Mode

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"
DEFAULT_POLL_INTERVAL = 2.0


class ConfigError(ValueError):
    """A missing or invalid setting; the message names the variable (or flag)."""


@dataclass(frozen=True)
class Config:
    file: Path
    mode: Mode
    namespace: str = DEFAULT_NAMESPACE
    expected_pods: int | None = None  # the file is incomplete until it lists this many pods
    timeout: float = 0.0  # seconds for the whole wait (file and pods); 0 = no timeout
    poll_interval: float = DEFAULT_POLL_INTERVAL  # re-read interval of an incomplete file


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="watcher-loop",
        description="Wait until the pods listed in a hostfile/partfile are ready or finished. "
        "Every flag overrides the environment variable named in its help.",
    )
    p.add_argument("--file", help=f"pod file to read ({WATCHER_FILE_ENV})")
    p.add_argument("--mode", help=f"'ready' or 'finished' ({WATCHER_MODE_ENV})")
    p.add_argument("--namespace", help=f"namespace of the pods ({WATCHER_NAMESPACE_ENV})")
    p.add_argument("--expected-pods", help=f"pods the file must list ({WATCHER_EXPECTED_PODS_ENV})")
    p.add_argument("--timeout", help="seconds, 0 = none (WATCHER_TIMEOUT)")
    p.add_argument("--poll-interval", help="file re-read seconds (WATCHER_POLL_INTERVAL)")
    return p


def _pick(flag: str | None, flag_name: str, env: Mapping[str, str], var: str) -> tuple[str, str]:
    """``(value, name to blame)``: the flag if given, else the variable ('' when unset)."""
    if flag is not None:
        return flag.strip(), flag_name
    return env.get(var, "").strip(), var


def _seconds(value: str, name: str, default: float, *, positive: bool) -> float:
    if not value:
        return default
    try:
        out = float(value)
    except ValueError:
        out = math.nan
    if not math.isfinite(out) or out < 0 or (positive and out == 0):
        kind = "a positive number of seconds" if positive else "a number of seconds >= 0"
        raise ConfigError(f"{name} must be {kind}, got {value!r}")
    return out


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
) -> Config:
    """Build the configuration; raises :class:`ConfigError` naming the bad variable or flag."""
    args = _parser().parse_args(list(argv))

    file, name = _pick(args.file, "--file", env, WATCHER_FILE_ENV)
    if not file:
        raise ConfigError(
            f"{name} is not set: it must name the pod file to read (e.g. {HOSTFILE_PATH})"
        )

    raw_mode, name = _pick(args.mode, "--mode", env, WATCHER_MODE_ENV)
    if not raw_mode:
        raise ConfigError(f"{name} is not set: it must be 'ready' or 'finished'")
    try:
        mode = Mode(raw_mode.lower())
    except ValueError:
        raise ConfigError(f"{name} must be 'ready' or 'finished', got {raw_mode!r}") from None

    namespace, _ = _pick(args.namespace, "--namespace", env, WATCHER_NAMESPACE_ENV)
    if not namespace:
        namespace = default_namespace(namespace_file)

    raw, name = _pick(args.expected_pods, "--expected-pods", env, WATCHER_EXPECTED_PODS_ENV)
    expected: int | None = None
    if raw:
        if not re.fullmatch(r"[0-9]+", raw) or int(raw) < 1:
            raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
        expected = int(raw)

    raw, name = _pick(args.timeout, "--timeout", env, "WATCHER_TIMEOUT")
    timeout = _seconds(raw, name, 0.0, positive=False)
    raw, name = _pick(args.poll_interval, "--poll-interval", env, "WATCHER_POLL_INTERVAL")
    poll = _seconds(raw, name, DEFAULT_POLL_INTERVAL, positive=True)

    return Config(
        file=Path(file),
        mode=mode,
        namespace=namespace,
        expected_pods=expected,
        timeout=timeout,
        poll_interval=poll,
    )
