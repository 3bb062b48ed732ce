"""Files of this checkout the tests read: the chart, its CRD and its Prometheus rules, and the
examples' manifests."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dgl-operator"
CRD_PATH = CHART / "crds" / "qihoo.net_dgljobs.yaml"
RULES = CHART / "files" / "prometheus-rules.yaml"
EXAMPLES = REPO / "examples"
# every manifest a user is shown: each is checked against the CRD and the pod contract
EXAMPLE_MANIFESTS = sorted(EXAMPLES.rglob("*.yaml"))
