"""kubectl-download's configuration: environment variables (as the operator sets them), or flags."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from podcontract import KUBE_DIR, KUBECTL_SHA256_ENV, KUBECTL_TARGET_DIR_ENV, KUBECTL_URL_ENV

DEFAULT_TARGET_DIR = Path(KUBE_DIR)
DEFAULT_SOURCE = Path("/usr/local/bin/kubectl")
DEFAULT_RETRIES = 5
DEFAULT_TIMEOUT = 60.0
DEFAULT_BACKOFF = 1.0
VERSION_TIMEOUT = 30.0
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ConfigError(ValueError):
    """A missing or invalid setting; the message names the variable (or flag)."""


@dataclass(frozen=True)
class Config:
    target_dir: Path = DEFAULT_TARGET_DIR
    url: str | None = None  # download mode when set (then sha256 is set too)
    sha256: str | None = None  # lowercase hex; required with url, optional for a copy
    source: Path = DEFAULT_SOURCE  # copy mode (url unset): a kubectl baked into the image
    retries: int = DEFAULT_RETRIES  # retries after the first download attempt
    timeout: float = DEFAULT_TIMEOUT  # seconds per download attempt
    backoff: float = DEFAULT_BACKOFF  # first retry delay in seconds (doubles, with jitter)
    version_timeout: float = VERSION_TIMEOUT  # seconds for `kubectl version --client`

    @property
    def target(self) -> Path:
        return self.target_dir / "kubectl"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="kubectl-download",
        description="Install a verified kubectl binary into a directory (an init container). "
        "Every flag overrides the environment variable named in its help.",
    )
    p.add_argument("--target-dir", help=f"directory to install into ({KUBECTL_TARGET_DIR_ENV})")
    p.add_argument("--url", help=f"download URL ({KUBECTL_URL_ENV}); needs --sha256")
    p.add_argument("--sha256", help=f"expected SHA-256 of the binary ({KUBECTL_SHA256_ENV})")
    p.add_argument("--source", help="local kubectl to copy when no URL is set (KUBECTL_SOURCE)")
    p.add_argument("--retries", help="download retries after the first try (KUBECTL_RETRIES)")
    p.add_argument("--timeout", help="seconds per download attempt (KUBECTL_TIMEOUT)")
    p.add_argument("--backoff", help="first retry delay in seconds (KUBECTL_BACKOFF)")
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


def parse_sha256(value: str, name: str) -> str:
    digest = value.strip().lower().removeprefix("sha256:")
    if not _SHA256.fullmatch(digest):
        raise ConfigError(f"{name} must be 64 hexadecimal digits (a SHA-256), got {value!r}")
    return digest


def load_config(env: Mapping[str, str], argv: Sequence[str] = ()) -> Config:
    """Build the configuration; raises :class:`ConfigError` naming the bad variable or flag."""
    args = _parser().parse_args(list(argv))

    raw, name = _pick(args.target_dir, "--target-dir", env, KUBECTL_TARGET_DIR_ENV)
    target_dir = Path(raw) if raw else DEFAULT_TARGET_DIR

    url, url_name = _pick(args.url, "--url", env, KUBECTL_URL_ENV)
    raw_sha, sha_name = _pick(args.sha256, "--sha256", env, KUBECTL_SHA256_ENV)
    sha256 = parse_sha256(raw_sha, sha_name) if raw_sha else None
    if url:
        parts = urlsplit(url)
        try:
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            _ = parts.port  # raises ValueError for a bad port
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"{url_name} must be an http:// or https:// URL, got {url!r}")
        if sha256 is None:
            raise ConfigError(
                f"{url_name} is set but {sha_name} is not: refusing to install an unverified "
                f"download (set {sha_name} to the binary's SHA-256)"
            )

    raw, _ = _pick(args.source, "--source", env, "KUBECTL_SOURCE")
    source = Path(raw) if raw else DEFAULT_SOURCE

    raw, name = _pick(args.retries, "--retries", env, "KUBECTL_RETRIES")
    retries = DEFAULT_RETRIES
    if raw:
        if not re.fullmatch(r"[0-9]+", raw) or int(raw) > 100:
            raise ConfigError(f"{name} must be an integer from 0 to 100, got {raw!r}")
        retries = int(raw)

    raw, name = _pick(args.timeout, "--timeout", env, "KUBECTL_TIMEOUT")
    timeout = _seconds(raw, name, DEFAULT_TIMEOUT, positive=True)
    raw, name = _pick(args.backoff, "--backoff", env, "KUBECTL_BACKOFF")
    backoff = _seconds(raw, name, DEFAULT_BACKOFF, positive=False)

    return Config(
        target_dir=target_dir,
        url=url or None,
        sha256=sha256,
        source=source,
        retries=retries,
        timeout=timeout,
        backoff=backoff,
    )
