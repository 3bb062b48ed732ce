"""Lines said by two threads of one process arrive whole (podcontract.logline.say): an
out-of-core DGL server's reader thread said "warming done" while its main thread said which
part it had mapped, and dglrun read ``[worker-0/server-0] out-of-core: warming done: ...
out-of-core: part 0: ...``, the second line's label lost (e2e/test_dgljob.py's DistParMETIS
test failed on it in CI, and here once in 8 runs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from podcontract import logline


class SlowStream:
    """A stream whose every write lets the other threads run (as a pipe's write may)."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        time.sleep(0.0005)
        return len(text)

    def flush(self) -> None:
        time.sleep(0.0005)


def said_by_two_threads(say: Callable[[str, Any], None]) -> tuple[set[str], set[str]]:
    """The lines two threads meant to write, and the lines the stream got."""
    stream = SlowStream()
    meant = {f"thread {t}: line {i}" for t in "ab" for i in range(30)}

    def write(t: str) -> None:
        for i in range(30):
            say(f"thread {t}: line {i}", stream)

    threads = [threading.Thread(target=write, args=(t,)) for t in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return meant, set("".join(stream.writes).splitlines())


def test_lines_two_threads_say_arrive_whole() -> None:
    meant, got = said_by_two_threads(logline.say)
    assert got == meant, sorted(got ^ meant)[:4]


def test_twin_print_runs_two_threads_lines_together() -> None:
    """What the first test forbids: print writes a line's text and its newline apart."""
    meant, got = said_by_two_threads(lambda line, s: print(line, file=s, flush=True))
    assert got != meant
    assert any(line.count("thread") == 2 for line in got), sorted(got)[:4]
