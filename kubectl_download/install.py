"""Installing kubectl: download (or copy) into a temporary file next to the target while hashing,
verify the SHA-256, run ``version --client``, then rename over the target in one step.

Whatever fails, the target is either untouched or the complete, verified, working new binary:
the temporary file is removed on every error (and on SIGTERM, which the entry point turns into
an exception).
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import os
import random
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from kubectl_download.config import DownloadConfig
from podprogram.log import Log

CHUNK = 64 * 1024
MAX_BACKOFF = 30.0  # cap of the exponential part of the retry delay
MAX_RETRY_AFTER = 60.0  # cap on a server's Retry-After
RETRY_STATUSES = frozenset({408, 429})  # besides every 5xx
USER_AGENT = "dgl-operator/kubectl-download"
TEMP_PREFIX = ".kubectl-"
TEMP_SUFFIX = ".tmp"
MODE = 0o755


class InstallError(Exception):
    """Installing failed; the message is the one line to show."""


class _Retryable(Exception):
    """One download attempt failed in a way another attempt may not."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _err(e: BaseException) -> str:
    text = str(e)
    return text if text else type(e).__name__


def _first_line(data: bytes | str, limit: int = 200) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` value in seconds (the HTTP-date form is ignored)."""
    try:
        seconds = float(value or "")
    except ValueError:
        return None
    return seconds if 0 <= seconds < float("inf") else None


def backoff_delay(
    base: float,
    attempt: int,
    retry_after: float | None = None,
    rand: Callable[[], float] = random.random,
) -> float:
    """Delay before retry number ``attempt`` (1-based): ``base * 2**(attempt-1)`` capped at
    :data:`MAX_BACKOFF`, jittered down by up to half, but at least the server's Retry-After
    (capped at :data:`MAX_RETRY_AFTER`)."""
    step = min(MAX_BACKOFF, base * 2.0 ** (attempt - 1))
    delay = step / 2 + rand() * step / 2
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
    return delay


def _write(out: BinaryIO, chunk: bytes) -> None:
    try:
        out.write(chunk)
    except OSError as e:
        raise InstallError(f"cannot write into the target directory: {_err(e)}") from None


def fetch_once(url: str, out: BinaryIO, timeout: float) -> str:
    """One attempt: stream ``url`` into ``out`` (emptied first); returns the SHA-256 (hex).

    Raises ``_Retryable`` for connection problems, timeouts, truncated bodies, 5xx, 408 and
    429, and :class:`InstallError` for any other HTTP error and for local write errors.
    """
    out.seek(0)
    out.truncate()
    digest = hashlib.sha256()
    started = time.monotonic()
    request = Request(url, headers={"User-Agent": USER_AGENT})
    try:
        response = urlopen(request, timeout=timeout)
    except HTTPError as e:
        what = f"HTTP {e.code} {e.reason}"
        retry_after = _retry_after(e.headers.get("Retry-After") if e.headers else None)
        e.close()
        if e.code in RETRY_STATUSES or e.code >= 500:
            raise _Retryable(what, retry_after) from None
        raise InstallError(f"download of {url} failed: {what} (not retried)") from None
    except URLError as e:
        reason = e.reason
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise InstallError(f"download of {url} failed: {_err(reason)}") from None
        raise _Retryable(
            _err(reason) if isinstance(reason, BaseException) else str(reason)
        ) from None
    except (http.client.HTTPException, OSError) as e:
        raise _Retryable(_err(e)) from None
    with response:
        length = response.headers.get("Content-Length")
        received = 0
        while True:
            try:
                chunk = response.read(CHUNK)
            except (http.client.HTTPException, OSError) as e:
                raise _Retryable(f"reading the response: {_err(e)}") from None
            if not chunk:
                break
            digest.update(chunk)
            _write(out, chunk)
            received += len(chunk)
            if time.monotonic() - started > timeout:
                raise _Retryable(f"the attempt took longer than {timeout:g}s")
        if length is not None and length.isdigit() and received != int(length):
            raise _Retryable(f"connection closed after {received} of {length} bytes")
    return digest.hexdigest()


def download(
    config: DownloadConfig, out: BinaryIO, log: Log, sleep: Callable[[float], None] = time.sleep
) -> str:
    """Download with retries and backoff into ``out``; returns the SHA-256 (hex)."""
    assert config.url is not None
    url = config.url
    attempts = config.retries + 1
    last: _Retryable | None = None
    for attempt in range(1, attempts + 1):
        log.info(f"downloading {url} (attempt {attempt}/{attempts})")
        try:
            return fetch_once(url, out, config.timeout)
        except _Retryable as e:
            last = e
            if attempt == attempts:
                break
            delay = backoff_delay(config.backoff, attempt, e.retry_after)
            log.info(f"attempt {attempt}/{attempts} failed: {e}; retrying in {delay:.1f}s")
            sleep(delay)
    raise InstallError(f"download of {url} failed after {attempts} attempt(s); last error: {last}")


def copy_source(source: Path, out: BinaryIO) -> str:
    """Copy ``source`` into ``out``; returns the SHA-256 (hex)."""
    digest = hashlib.sha256()
    try:
        src = source.open("rb")
    except FileNotFoundError:
        raise InstallError(
            f"KUBECTL_SOURCE {source} does not exist (set KUBECTL_URL and KUBECTL_SHA256 to "
            "download kubectl instead)"
        ) from None
    except OSError as e:
        raise InstallError(f"cannot read KUBECTL_SOURCE {source}: {_err(e)}") from None
    with src:
        while True:
            try:
                chunk = src.read(CHUNK)
            except OSError as e:
                raise InstallError(f"cannot read KUBECTL_SOURCE {source}: {_err(e)}") from None
            if not chunk:
                break
            digest.update(chunk)
            _write(out, chunk)
    return digest.hexdigest()


def check_version(path: Path, timeout: float, shown: Path | None = None) -> str:
    """Run ``<path> version --client -o json``; returns ``clientVersion.gitVersion``.

    ``shown`` is the path named in errors (the final target, while ``path`` is the temporary
    file being checked)."""
    shown = shown or path
    command = f"{shown} version --client -o json"
    for tries in range(3):
        try:
            proc = subprocess.run(
                [str(path), "version", "--client", "-o", "json"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
            break
        except subprocess.TimeoutExpired:
            raise InstallError(f"`{command}` did not finish within {timeout:g}s") from None
        except OSError as e:
            if e.errno == errno.ETXTBSY and tries < 2:  # a forked child still held it open
                time.sleep(0.1)
                continue
            hint = {
                errno.ENOEXEC: " (wrong architecture, or not a binary)",
                errno.ENOENT: " (its interpreter or dynamic loader is missing)",
                errno.EACCES: " (is the target directory mounted noexec?)",
            }.get(e.errno or 0, "")
            raise InstallError(f"cannot run {shown}: {e.strerror or e}{hint}") from None
    if proc.returncode < 0:
        raise InstallError(f"`{command}` was killed by signal {-proc.returncode}")
    if proc.returncode != 0:
        detail = _first_line(proc.stderr) or _first_line(proc.stdout)
        raise InstallError(
            f"`{command}` exited with code {proc.returncode}" + (f": {detail}" if detail else "")
        )
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise InstallError(
            f"`{command}` printed no JSON: {_first_line(proc.stdout) or '(nothing)'!r}"
        ) from None
    client = data.get("clientVersion") if isinstance(data, dict) else None
    version = client.get("gitVersion") if isinstance(client, dict) else None
    if not isinstance(version, str) or not version:
        raise InstallError(f"`{command}` printed no clientVersion.gitVersion")
    return version


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is done anyway
    finally:
        os.close(fd)


def install(config: DownloadConfig, log: Log) -> str:
    """Install kubectl at ``config.target``; returns its gitVersion. Raises InstallError."""
    target_dir, target = config.target_dir, config.target
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InstallError(f"cannot create TARGET_DIR {target_dir}: {_err(e)}") from None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=target_dir)
    except OSError as e:
        raise InstallError(f"cannot write in TARGET_DIR {target_dir}: {_err(e)}") from None
    tmp = Path(tmp_name)
    installed = False
    try:
        with os.fdopen(fd, "w+b") as out:
            if config.url is not None:
                what = config.url
                digest = download(config, out, log)
            else:
                what = str(config.source)
                log.info(f"copying {config.source}")
                digest = copy_source(config.source, out)
            if config.sha256 is not None:
                if digest != config.sha256:
                    raise InstallError(
                        f"SHA-256 mismatch for {what}: expected {config.sha256} "
                        f"(KUBECTL_SHA256), got {digest}; nothing installed"
                    )
                log.info(f"SHA-256 verified: {digest}")
            out.flush()
            os.fchmod(out.fileno(), MODE)
            os.fsync(out.fileno())
        version = check_version(tmp, config.version_timeout, shown=target)
        os.replace(tmp, target)
        installed = True
        _fsync_dir(target_dir)
        return version
    except OSError as e:
        raise InstallError(f"cannot install {target}: {_err(e)}") from None
    finally:
        if not installed:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                log.info(f"could not remove the temporary file {tmp}: {_err(e)}")
