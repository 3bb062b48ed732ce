"""Pull one worker's part from the partition server (``python -m launcher.delivery.pull``).

Each file is written to ``<name>.partial`` and renamed once its SHA-256 matches the manifest.
A dropped connection resumes where it stopped (``Range``); a file whose checksum does not
match is downloaded again (at most :data:`CORRUPT_RETRIES` times); a file already in place
with the right checksum is kept (a pull run again after a failure does not start over).

Progress goes to stdout as ``pull: part <i>: <done>/<total> bytes (<pct>%)`` lines, at most one
per ``--interval`` (the launcher shows them and sums them up in ``status.progress``); a failure
ends with one line naming the file or the server, exit code 1. Usage errors exit 2.
``--done`` only tells the server that every worker has its part.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from launcher import checksums, programs
from launcher.checksums import file_sha256
from launcher.delivery.wire import TransferError, read_token
from podcontract import TRANSFER_TOKEN_PATH, logline

PROGRESS = logline.PULL
CHUNK = 1 << 20
CONNECT_RETRIES = 6  # attempts per request before giving up (backoff 0.5 s, doubling)
CORRUPT_RETRIES = 3
TIMEOUT = 60.0  # seconds without a byte before a connection counts as dropped
T = TypeVar("T")  # what a retried request returns


@dataclass
class PullResult:
    bytes_total: int
    bytes_fetched: int  # over the network (less than total when files were already in place)
    seconds: float
    corrupt_retries: int
    resumes: int


Progress = Callable[[int, int], None]


class Puller:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.sleep = sleep
        self.on_retry = on_retry

    # -- requests -------------------------------------------------------------------------

    def _open(self, method: str, path: str, headers: dict[str, str] | None = None) -> Any:
        req = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            headers={"Authorization": f"Bearer {self.token}", **(headers or {})},
        )
        return urllib.request.urlopen(req, timeout=TIMEOUT)

    def _with_retries(self, what: str, call: Callable[[], T]) -> T:
        delay = 0.5
        for attempt in range(1, CONNECT_RETRIES + 1):
            try:
                return call()
            except urllib.error.HTTPError as e:
                body = e.read().decode(errors="replace").strip()
                raise TransferError(f"{what}: the server answered {e.code} {body}".rstrip()) from e
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", None) or e
                if attempt == CONNECT_RETRIES:
                    raise TransferError(
                        f"{what}: cannot reach the partition server {self.url} ({reason}) "
                        f"after {attempt} attempts"
                    ) from e
                self.on_retry(f"{what}: {reason}; retrying in {delay:.1f}s")
                self.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def manifest(self) -> dict[str, Any]:
        def get() -> dict[str, Any]:
            with self._open("GET", "/v1/manifest") as r:
                data: dict[str, Any] = json.loads(r.read())
                return data

        return self._with_retries("reading the manifest", get)

    def done(self) -> None:
        def post() -> None:
            with self._open("POST", "/v1/done") as r:
                r.read()

        self._with_retries("telling the partition server to stop", post)

    # -- files ----------------------------------------------------------------------------

    def pull_files(
        self,
        manifest: dict[str, Any],
        rels: list[str],
        dest: Path,
        progress: Progress = lambda _d, _t: None,
    ) -> PullResult:
        started = time.monotonic()
        files = manifest["files"]
        missing = [rel for rel in rels if rel not in files]
        if missing:
            raise TransferError(f"the manifest lists no file {missing[0]}")
        total = sum(int(files[rel]["size"]) for rel in rels)
        state = {"done": 0, "fetched": 0, "corrupt": 0, "resumes": 0}
        for rel in rels:
            _safe(rel)
            size, sha = int(files[rel]["size"]), str(files[rel]["sha256"])
            target = dest / rel
            if target.is_file() and target.stat().st_size == size and file_sha256(target) == sha:
                state["done"] += size
                progress(state["done"], total)
                continue
            self._pull_file(rel, size, sha, target, state, total, progress)
        progress(state["done"], total)
        return PullResult(
            total,
            state["fetched"],
            time.monotonic() - started,
            state["corrupt"],
            state["resumes"],
        )

    def _pull_file(
        self,
        rel: str,
        size: int,
        sha: str,
        target: Path,
        state: dict[str, int],
        total: int,
        progress: Progress,
    ) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        base = state["done"]
        for _ in range(CORRUPT_RETRIES + 1):
            have = partial.stat().st_size if partial.is_file() else 0
            if have > size:
                partial.unlink()
                have = 0
            digest = _sha256_prefix(partial, have)
            while have < size:
                got = self._with_retries(
                    rel, functools.partial(self._download, rel, partial, have, size, digest)
                )
                if got > 0 and have > 0:
                    state["resumes"] += 1
                state["fetched"] += got
                have += got
                state["done"] = base + have
                progress(state["done"], total)
                if have < size:
                    self.on_retry(f"{rel}: connection dropped at {have}/{size} bytes; resuming")
            if digest.hexdigest() == sha:
                os.replace(partial, target)
                return
            state["corrupt"] += 1
            self.on_retry(f"{rel}: checksum mismatch (got {digest.hexdigest()[:12]}, want "
                          f"{sha[:12]}); downloading it again")  # fmt: skip
            partial.unlink()
            state["done"] = base
        raise TransferError(
            f"{rel}: checksum mismatch {CORRUPT_RETRIES + 1} times in a row; the copy on the "
            "partition server or the network corrupts it"
        )

    def _download(self, rel: str, partial: Path, have: int, size: int, digest: Any) -> int:
        """Append bytes from ``have`` on; returns how many arrived (a drop is not an error
        here when some bytes came: the caller resumes)."""
        headers = {"Range": f"bytes={have}-"} if have else {}
        got = 0
        path = f"/v1/files/{urllib.parse.quote(rel)}"
        try:
            out = partial.open("ab")
        except OSError as e:  # a local problem: no retry helps
            raise TransferError(f"cannot write {partial}: {e.strerror}") from e
        with out, self._open("GET", path, headers) as r:
            while have + got < size:
                try:
                    chunk = r.read(min(CHUNK, size - have - got))
                except (OSError, http.client.HTTPException):
                    if got == 0:
                        raise
                    break  # the caller resumes from here
                if not chunk:
                    break
                try:
                    out.write(chunk)
                except OSError as e:
                    raise TransferError(f"cannot write {partial}: {e.strerror}") from e
                digest.update(chunk)
                got += len(chunk)
        return got


def _safe(rel: str) -> None:
    if checksums.outside(rel) is not None:
        raise TransferError(f"the manifest names {rel!r}, outside the destination")


def _sha256_prefix(path: Path, n: int) -> Any:
    h = hashlib.sha256()
    if n:
        with path.open("rb") as f:
            left = n
            while left:
                chunk = f.read(min(CHUNK, left))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
    return h


def progress_line(part: int, done: int, total: int) -> str:
    pct = 100 * done // total if total else 100
    return f"pull: part {part}: {done}/{total} bytes ({pct}%)"


def parse_progress(line: str) -> tuple[int, int, int] | None:
    """(part, done, total) from a progress line, else None."""
    m = PROGRESS.match(line)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=programs.prog(programs.PULL), description=__doc__.split("\n")[0]
    )
    ap.add_argument("--url", required=True, help="the partition server, http://IP:PORT")
    ap.add_argument("--part", type=int, help="which part to pull")
    ap.add_argument("--dest", help="the folder the partition config goes to")
    ap.add_argument("--done", action="store_true", help="tell the server to stop, pull nothing")
    ap.add_argument("--token-file", default=TRANSFER_TOKEN_PATH)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between progress lines")
    args = ap.parse_args(argv)
    if not args.done and (args.part is None or args.dest is None):
        ap.error("--part and --dest are required (or --done)")
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= args.interval:
            last[0] = now
            print(progress_line(args.part, done, total), flush=True)

    def note(message: str) -> None:
        print(f"pull: {message}", flush=True)

    try:
        puller = Puller(args.url, read_token(args.token_file), on_retry=note)
        if args.done:
            puller.done()
            return 0
        manifest = puller.manifest()
        rels = (manifest.get("parts") or {}).get(str(args.part))
        if not rels:
            raise TransferError(f"the partition server has no part {args.part}")
        result = puller.pull_files(manifest, list(rels), Path(args.dest), progress)
    except TransferError as e:
        print(f"pull: error: part {args.part}: {e}", flush=True)
        return 1
    except OSError as e:
        print(f"pull: error: part {args.part}: {e}", flush=True)
        return 1
    rate = result.bytes_fetched / max(result.seconds, 1e-6) / 1e6
    note(
        f"part {args.part}: {result.bytes_total / 1e6:.1f} MB verified "
        f"({result.bytes_fetched / 1e6:.1f} MB fetched in {result.seconds:.1f}s, {rate:.0f} MB/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
