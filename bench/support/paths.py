"""The checkout's folders the benchmarks read."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the GraphSAGE example: its dataset generator, entry points and DGLJob manifests
EXAMPLE = REPO / "examples" / "graphsage"
