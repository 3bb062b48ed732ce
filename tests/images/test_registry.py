"""The push of docs/operations.md ("Install on your own cluster") on a real registry: a
tarball of hack/build_images.py copied into it with skopeo, as the document says, then pulled
from it by containerd as a node pulls it; the same manifest, and the pulled image runs."""

from __future__ import annotations

import subprocess
from typing import Any

from tests.images.containerd import Containerd
from tests.images.helpers import which


def test_a_pushed_image_is_pulled_with_its_digest_and_runs(
    built: dict[str, dict[str, Any]], containerd: Containerd, registry: str
) -> None:
    item = built["watcher-loop"]
    tag = item["reference"].rsplit(":", 1)[1]
    pushed = f"{registry}/ml/watcher-loop:{tag}"
    skopeo = which("skopeo")
    assert skopeo is not None
    push = subprocess.run(
        [
            skopeo,
            "copy",
            "--dest-tls-verify=false",  # a registry on loopback, without TLS
            f"oci-archive:{item['tarball']}",
            f"docker://{pushed}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert push.returncode == 0, push.stderr

    containerd.ctr("images", "pull", "--plain-http", pushed, timeout=300)
    listed = containerd.ctr("images", "ls").stdout.splitlines()
    row = next(line.split() for line in listed if line.startswith(pushed + " "))
    assert item["manifest_digest"] in row, (item["manifest_digest"], row)
    r = containerd.run(pushed, "watcher-loop", "--help")
    assert r.returncode == 0 and "WATCHERFILE" in r.stdout, (r.stdout, r.stderr)
