"""Entry point of `watcher-loop`, the launcher pod's init container that waits for other pods.

Exit codes: 0 every listed pod reached the mode; 1 a pod failed (or, in ``ready`` mode,
finished); 2 bad configuration, malformed pod file or timeout; 128+N on signal N.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from types import FrameType
from typing import Any

import structlog

from kubeclient import RestClient
from podutil import TERMINATION_LOG, write_termination_message
from watcher_loop.config import ConfigError, load_config
from watcher_loop.loop import EXIT_ERROR, EXIT_STOPPED, Log, run


def _render(_logger: Any, level: str, event: MutableMapping[str, Any]) -> str:
    """The informers' structured logs as one short line like ours."""
    message = event.pop("event", "")
    fields = " ".join(f"{k}={v}" for k, v in event.items() if k != "exc_info")
    return f"watcher-loop: {level}: {message}" + (f" ({fields})" if fields else "")


def configure_logging() -> None:
    structlog.configure(
        processors=[structlog.processors.format_exc_info, _render],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


@contextlib.contextmanager
def _signals_set(stop: threading.Event, received: list[int]) -> Iterator[None]:
    """SIGTERM/SIGINT set ``stop`` (and are recorded) while the context lasts."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    previous: dict[int, Callable[..., Any] | int | None] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):  # not the main thread
                previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _client_source() -> str:
    """Which configuration ``RestClient.from_config`` tried, for its error message."""
    if os.environ.get("KUBECONFIG"):
        return f"KUBECONFIG={os.environ['KUBECONFIG']}"
    if os.path.exists(os.path.expanduser("~/.kube/config")):
        return "~/.kube/config"
    return "in-cluster service account"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    log = Log()
    try:
        config = load_config(os.environ, argv)
    except ConfigError as e:
        log.error(str(e))
        write_termination_message(str(e), TERMINATION_LOG)
        return EXIT_ERROR
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0

    try:
        client = RestClient.from_config(user_agent="dgl-operator/watcher-loop")
    except Exception as e:  # kubeconfig/in-cluster config problems, whatever their type
        message = f"cannot configure the Kubernetes client ({_client_source()}): {e}"
        log.error(message)
        write_termination_message(message, TERMINATION_LOG)
        return EXIT_ERROR
    configure_logging()

    stop = threading.Event()
    received: list[int] = []
    with _signals_set(stop, received):
        code = run(config, client, stop, log=log)
    if code == EXIT_STOPPED and received:
        return 128 + received[0]
    if code != 0 and log.last_error:
        write_termination_message(log.last_error, TERMINATION_LOG)
    return code


if __name__ == "__main__":
    sys.exit(main())
