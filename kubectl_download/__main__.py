"""Entry point of `kubectl-download`, the init container that fills /opt/kube with kubectl.

Exit codes: 0 installed; 1 installing failed (download, checksum, copy, version check, write);
2 bad configuration; 128+N on signal N (nothing is left behind at the target).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from kubectl_download.config import ConfigError, load_config
from kubectl_download.install import InstallError, Log, install
from podutil import TERMINATION_LOG, write_termination_message

EXIT_FAILED = 1
EXIT_CONFIG = 2


class Interrupted(BaseException):
    """SIGTERM/SIGINT, raised where the program is so that the temporary file is removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous: dict[int, Callable[..., Any] | int | None] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):  # not the main thread
                previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    log = Log()
    try:
        config = load_config(os.environ, argv)
    except ConfigError as e:
        log.error(str(e))
        write_termination_message(str(e), TERMINATION_LOG)
        return EXIT_CONFIG
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    if config.url is not None and os.environ.get("KUBECTL_SOURCE"):
        log.info("KUBECTL_URL is set: ignoring KUBECTL_SOURCE")
    try:
        with _signals_raise():
            version = install(config, log)
    except InstallError as e:
        log.error(str(e))
        write_termination_message(str(e), TERMINATION_LOG)
        return EXIT_FAILED
    except Interrupted as e:
        log.info(f"interrupted by signal {e.signum}; nothing installed")
        return 128 + e.signum
    print(f"kubectl-download: installed {config.target} (kubectl {version})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
