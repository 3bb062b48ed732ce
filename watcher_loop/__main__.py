"""Entry point of `watcher-loop`, the launcher pod's init container that waits for other pods.

Exit codes: 0 every listed pod reached the mode; 1 a pod failed (or, in ``ready`` mode,
finished); 2 bad configuration, malformed pod file or timeout; 128+N on signal N.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import MutableMapping, Sequence
from typing import Any

import structlog

from kubeclient import RestClient
from podprogram.entrypoint import run_program
from podprogram.log import Log
from podprogram.signals import on_stop_signals
from podprogram.termination import TERMINATION_LOG
from watcher_loop.config import PROG, WatcherConfig, load_config
from watcher_loop.loop import EXIT_ERROR, EXIT_STOPPED, run


def _render(_logger: Any, level: str, event: MutableMapping[str, Any]) -> str:
    """The informers' structured logs as one short line like ours."""
    message = event.pop("event", "")
    fields = " ".join(f"{k}={v}" for k, v in event.items() if k != "exc_info")
    return f"{PROG}: {level}: {message}" + (f" ({fields})" if fields else "")


def configure_logging() -> None:
    structlog.configure(
        processors=[structlog.processors.format_exc_info, _render],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def _client_source() -> str:
    """Which configuration ``RestClient.from_config`` tried, for its error message."""
    if os.environ.get("KUBECONFIG"):
        return f"KUBECONFIG={os.environ['KUBECONFIG']}"
    if os.path.exists(os.path.expanduser("~/.kube/config")):
        return "~/.kube/config"
    return "in-cluster service account"


def _wait(config: WatcherConfig, log: Log) -> int:
    try:
        client = RestClient.from_config(user_agent="dgl-operator/watcher-loop")
    except Exception as e:  # kubeconfig/in-cluster config problems, whatever their type
        log.error(f"cannot configure the Kubernetes client ({_client_source()}): {e}")
        return EXIT_ERROR
    configure_logging()

    stop = threading.Event()
    received: list[int] = []

    def stopped(signum: int) -> None:
        received.append(signum)
        stop.set()

    with on_stop_signals(stopped):
        code = run(config, client, stop, log=log)
    if code == EXIT_STOPPED and received:
        return 128 + received[0]
    return code


def main(argv: Sequence[str] | None = None) -> int:
    return run_program(
        Log(PROG), argv, load_config, _wait, config_exit=EXIT_ERROR, termination_log=TERMINATION_LOG
    )


if __name__ == "__main__":
    sys.exit(main())
