"""A stand-in benchmark for bench/run.py's test (``python -m tests.support.bench_probe CODE``):
it prints a line, records one figure, and exits with CODE. The benchmarks themselves are
``make bench``'s, hours long."""

from __future__ import annotations

import sys

from bench.support.figures import record


def main(argv: list[str]) -> int:
    code = int(argv[0])
    print(f"bench_probe: exiting {code}", flush=True)
    record("bench_probe", f"probe {code}", 3.0, "s", 2.0, "its baseline")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
