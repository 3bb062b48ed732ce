"""The one kubectl runner of the soak and the benchmarks (localcluster/kubectl.py), run against
a stand-in binary that records what it was given and answers as kubectl does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from localcluster import kubectl as kubectl_module
from localcluster.kubectl import Kubectl, KubectlError

# prints its arguments and its standard input as JSON, and adds that line to "calls" beside it;
# "fail" exits 1 with kubectl's error on stderr, "hang" outlives the timeout
STAND_IN = """#!/bin/sh
case "$*" in
  *fail*) echo 'Error from server (NotFound): dgljobs.qihoo.net "nope" not found' >&2; exit 1;;
  *hang*) exec sleep 30;;
esac
stdin=$(cat)
code='import json, sys; a = sys.argv[1:]; print(json.dumps({"argv": a[:-1], "stdin": a[-1]}))'
python3 -c "$code" "$@" "$stdin" | tee -a "$(dirname "$0")/calls"
"""


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Kubectl:
    binary = tmp_path / "bin" / "kubectl"
    binary.parent.mkdir()
    binary.write_text(STAND_IN)
    binary.chmod(0o755)
    monkeypatch.setattr(kubectl_module, "k8s_binaries", lambda _name: binary.parent)
    return Kubectl(tmp_path / "admin.kubeconfig", timeout=5)


def test_a_call_is_kubectl_with_the_kubeconfig_and_its_output_is_returned(kube: Kubectl) -> None:
    out = json.loads(kube.run("get", "pods", "-A"))
    assert out["argv"] == ["--kubeconfig", str(kube.kubeconfig), "get", "pods", "-A"]
    assert kube.json("get", "nodes")["argv"][-2:] == ["-o", "json"]


def test_a_failure_quotes_the_command_and_kubectl_s_error(kube: Kubectl) -> None:
    with pytest.raises(KubectlError) as e:
        kube.run("get", "dgljob", "fail")
    assert str(e.value) == (
        'kubectl get dgljob fail: Error from server (NotFound): dgljobs.qihoo.net "nope" not found'
    )
    assert isinstance(e.value, RuntimeError)  # (what callers that know no KubectlError catch)
    assert kube.run("delete", "fail", check=False) == ""  # unchecked: its output, no raise


def test_apply_is_server_side_with_the_object_on_stdin(kube: Kubectl) -> None:
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    kube.apply(obj)
    (call,) = [json.loads(line) for line in (kube.binary.parent / "calls").read_text().splitlines()]
    assert call["argv"][2:] == ["apply", "--server-side", "--force-conflicts", "-f", "-"]
    assert json.loads(call["stdin"]) == obj


def test_a_call_that_hangs_times_out(kube: Kubectl) -> None:
    quick = Kubectl(kube.kubeconfig, timeout=0.5)
    with pytest.raises(subprocess.TimeoutExpired):
        quick.run("hang")


def test_called_with_a_list_and_stdin_it_is_the_form_volumes_and_kueue_take(kube: Kubectl) -> None:
    out = json.loads(kube(["apply", "-f", "-"], '{"kind": "Namespace"}'))
    assert out["argv"][2:] == ["apply", "-f", "-"] and out["stdin"] == '{"kind": "Namespace"}'
