"""localcluster/node.py's bridges on the real kernel, in a network namespace of the test's own
(``unshare --net``: nothing on the host changes): a pod's gateway keeps its MAC address while
pods (veth ports) come and go."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from localcluster import node

REPO = Path(__file__).resolve().parents[2]

# In the new namespace: bridge_up as the cluster does, then a port whose MAC is lower than any
# random one (a Linux bridge without a set address would take it), then the port removed.
SCRIPT = textwrap.dedent(
    """
    import json, subprocess, sys
    from localcluster import node

    def mac(dev):  # (/sys/class/net is the host's: ask ip, which is in this namespace)
        out = subprocess.run(["ip", "-j", "link", "show", "dev", dev], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)[0]["address"]

    def ip(*a):
        subprocess.run(["ip", *a], check=True, capture_output=True)

    name = sys.argv[1]
    seen = {}
    if name == "plain":
        ip("link", "add", "name", name, "type", "bridge")
        ip("link", "set", name, "up")
    else:
        node.bridge_up(name, "10.88.7.1/24")
    seen["up"] = mac(name)
    ip("link", "add", "vport", "address", "00:00:00:00:00:01", "type", "veth", "peer", "vpod")
    ip("link", "set", "vport", "master", name)
    ip("link", "set", "vport", "up")
    seen["port added"] = mac(name)
    ip("link", "del", "vport")
    seen["port removed"] = mac(name)
    print(json.dumps(seen))
    """
)


def run_in_netns(bridge: str) -> dict[str, str]:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the bridge test needs root, unshare and ip (iproute2)")
        pytest.skip("needs root, unshare and ip (iproute2)")
    out = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", SCRIPT, bridge],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr
    seen: dict[str, str] = json.loads(out.stdout)
    return seen


def test_a_bridge_mac_is_fixed_per_node() -> None:
    assert node.bridge_mac("dglk0") == "02:64:67:6c:00:00"
    assert node.bridge_mac("dglk3") == "02:64:67:6c:00:03"
    assert len({node.bridge_mac(f"dglk{k}") for k in range(300)}) == 300


def test_the_gateway_keeps_its_mac_when_pods_come_and_go() -> None:
    seen = run_in_netns("dglk2")
    assert set(seen.values()) == {node.bridge_mac("dglk2")}, seen


def test_without_a_set_address_the_kernel_would_follow_the_lowest_port() -> None:
    """The failure the fixed address prevents, shown on the same kernel."""
    seen = run_in_netns("plain")
    assert seen["port added"] == "00:00:00:00:00:01", seen
    assert seen["port removed"] != seen["port added"], seen
