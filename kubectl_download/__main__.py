"""Entry point of `kubectl-download`, the init container that fills /opt/kube with kubectl.

Exit codes: 0 installed; 1 installing failed (download, checksum, copy, version check, write);
2 bad configuration; 128+N on signal N (nothing is left behind at the target).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from kubectl_download.config import PROG, DownloadConfig, load_config
from kubectl_download.install import InstallError, install
from podprogram.entrypoint import run_program
from podprogram.log import Log
from podprogram.signals import on_stop_signals
from podprogram.termination import TERMINATION_LOG

EXIT_FAILED = 1
EXIT_CONFIG = 2


class Interrupted(BaseException):
    """SIGTERM/SIGINT, raised where the program is so that the temporary file is removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int) -> None:
    raise Interrupted(signum)


def _install(config: DownloadConfig, log: Log) -> int:
    if config.url is not None and os.environ.get("KUBECTL_SOURCE"):
        log.info("KUBECTL_URL is set: ignoring KUBECTL_SOURCE")
    try:
        with on_stop_signals(_interrupt):
            version = install(config, log)
    except InstallError as e:
        log.error(str(e))
        return EXIT_FAILED
    except Interrupted as e:
        log.info(f"interrupted by signal {e.signum}; nothing installed")
        return 128 + e.signum
    print(f"{PROG}: installed {config.target} (kubectl {version})", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_program(
        Log(PROG),
        argv,
        load_config,
        _install,
        config_exit=EXIT_CONFIG,
        termination_log=TERMINATION_LOG,
    )


if __name__ == "__main__":
    sys.exit(main())
