"""kubectl-download's configuration: environment variables (as the operator sets them), or flags
(:mod:`podprogram.options`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from podcontract import KUBE_DIR, KUBECTL_SHA256_ENV, KUBECTL_TARGET_DIR_ENV, KUBECTL_URL_ENV
from podprogram.options import ConfigError, OptionParser

DEFAULT_TARGET_DIR = Path(KUBE_DIR)
DEFAULT_SOURCE = Path("/usr/local/bin/kubectl")
DEFAULT_RETRIES = 5
DEFAULT_TIMEOUT = 60.0
DEFAULT_BACKOFF = 1.0
VERSION_TIMEOUT = 30.0
_SHA256 = re.compile(r"[0-9a-f]{64}")
PROG = "kubectl-download"  # the program's name: its console script, its log lines' prefix


@dataclass(frozen=True)
class DownloadConfig:
    """What kubectl-download installs at ``target``: ``url``'s download (verified against
    ``sha256``), or, without a url, a copy of ``source``."""

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


def _parser() -> OptionParser:
    p = OptionParser(
        PROG,
        "Install a verified kubectl binary into a directory (an init container).",
    )
    p.option("--target-dir", KUBECTL_TARGET_DIR_ENV, "directory to install into")
    p.option("--url", KUBECTL_URL_ENV, "download URL; needs --sha256")
    p.option("--sha256", KUBECTL_SHA256_ENV, "expected SHA-256 of the binary")
    p.option("--source", "KUBECTL_SOURCE", "local kubectl to copy when no URL is set")
    p.option("--retries", "KUBECTL_RETRIES", "download retries after the first try")
    p.option("--timeout", "KUBECTL_TIMEOUT", "seconds per download attempt")
    p.option("--backoff", "KUBECTL_BACKOFF", "first retry delay in seconds")
    return p


def parse_sha256(value: str, name: str) -> str:
    digest = value.strip().lower().removeprefix("sha256:")
    if not _SHA256.fullmatch(digest):
        raise ConfigError(f"{name} must be 64 hexadecimal digits (a SHA-256), got {value!r}")
    return digest


def load_config(env: Mapping[str, str], argv: Sequence[str] = ()) -> DownloadConfig:
    """Build the configuration; raises :class:`ConfigError` naming the bad variable or flag."""
    settings = _parser().read(env, argv)

    raw, _ = settings.get("--target-dir")
    target_dir = Path(raw) if raw else DEFAULT_TARGET_DIR

    url, url_name = settings.get("--url")
    raw_sha, sha_name = settings.get("--sha256")
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

    raw, _ = settings.get("--source")
    source = Path(raw) if raw else DEFAULT_SOURCE

    raw, name = settings.get("--retries")
    retries = DEFAULT_RETRIES
    if raw:
        if not re.fullmatch(r"[0-9]+", raw) or int(raw) > 100:
            raise ConfigError(f"{name} must be an integer from 0 to 100, got {raw!r}")
        retries = int(raw)

    timeout = settings.seconds("--timeout", DEFAULT_TIMEOUT, positive=True)
    backoff = settings.seconds("--backoff", DEFAULT_BACKOFF, positive=False)

    return DownloadConfig(
        target_dir=target_dir,
        url=url or None,
        sha256=sha256,
        source=source,
        retries=retries,
        timeout=timeout,
        backoff=backoff,
    )
