"""dglrun's overhead: its local run against the same partition + training started by hand.

Both runs partition the same synthetic graph into 2 parts and train GraphSAGE for 2 epochs on
2 workers (each a network + mount namespace, 1 DGL server + 1 trainer). The baseline does by
hand what a person following DGL's docs would: partition, copy each part, write ip_config, start
the processes with DGL's environment contract, wait. dglrun adds checksums, supervision and
progress. Prints wall times (best of N) and the ratio; target <= 1.15x. A third run is dglrun
with DGL's own start (``DGL_OPERATOR_FAST_START=0``: the two fixed 3 s waits that
``python -m dglprocess`` takes out are kept), and the ratio of the two dglruns. Needs root and
the DGL environment ($DGL_PYTHON, set by `make bench`).

    python -m bench.pipeline_bench [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.support.figures import record
from bench.support.graphs import dgl_env
from bench.support.paths import EXAMPLE, REPO

GRAPH, DATASET, EPOCHS, BATCH = "graphsage", "ogbn-synth", "2", "128"


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def by_hand(py: str, data: Path, ws: Path) -> float:
    started = time.monotonic()
    subprocess.run(
        [
            py,
            str(EXAMPLE / "load_and_partition_graph.py"),
            "--graph_name",
            GRAPH,
            "--workspace",
            str(ws),
            "--rel_data_path",
            "dataset",
            "--num_parts",
            "2",
            "--balance_train",
            "--balance_edges",
            "--dataset",
            DATASET,
            "--dataset_root",
            str(data),
        ],
        check=True,
        capture_output=True,
        env=dgl_env(),
    )
    tag = f"{os.getpid() % 10000:04d}"
    bridge, ips = f"hbr{tag}", ["10.232.7.2", "10.232.7.3"]
    holders: list[subprocess.Popen[bytes]] = []
    try:
        sh("ip", "link", "add", "name", bridge, "type", "bridge")
        sh("ip", "link", "set", bridge, "up")
        for i, ip in enumerate(ips):
            ns = f"hand{tag}-{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", f"hv{tag}{i}", "type", "veth", "peer", "name", f"hp{tag}{i}")
            sh("ip", "link", "set", f"hp{tag}{i}", "netns", ns)
            sh("ip", "link", "set", f"hv{tag}{i}", "master", bridge)
            sh("ip", "link", "set", f"hv{tag}{i}", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", f"hp{tag}{i}", "name", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            holders.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "unshare",
                        "--mount",
                        "--propagation",
                        "private",
                        "--",
                        "sh",
                        "-c",
                        "mount -t tmpfs -o size=2g tmpfs /dev/shm && exec sleep infinity",
                    ]
                )
            )
            time.sleep(0.2)
            wl = ws / f"w{i}"
            wl.mkdir()
            shutil.copy2(ws / "dataset" / f"{GRAPH}.json", wl)
            shutil.copytree(ws / "dataset" / f"part{i}", wl / f"part{i}")
            (wl / "ip_config.txt").write_text("".join(f"{x} 30050\n" for x in ips))
        procs = []
        common = {
            "DGL_NUM_SERVER": "1",
            "DGL_NUM_SAMPLER": "0",
            "DGL_NUM_CLIENT": "2",
            "DGL_GRAPH_FORMAT": "csc",
            "OMP_NUM_THREADS": "1",
            "GLOO_SOCKET_IFNAME": "eth0",
        }
        for role in ("server", "client"):
            for i, holder in enumerate(holders):
                wl = ws / f"w{i}"
                e = {
                    **common,
                    "DGL_ROLE": role,
                    "DGL_IP_CONFIG": str(wl / "ip_config.txt"),
                    "DGL_CONF_PATH": str(wl / f"{GRAPH}.json"),
                    "DGLRUN_OUTPUT_DIR": str(wl / "out"),
                }
                if role == "server":
                    e["DGL_SERVER_ID"] = str(i)
                else:
                    e.update(
                        DGL_DIST_MODE="distributed",
                        DGL_GROUP_ID="0",
                        MASTER_ADDR=ips[0],
                        MASTER_PORT="29500",
                        RANK=str(i),
                        WORLD_SIZE="2",
                        LOCAL_RANK="0",
                    )
                procs.append(
                    subprocess.Popen(
                        [
                            "nsenter",
                            "-t",
                            str(holder.pid),
                            "-n",
                            "-m",
                            f"--wd={REPO}",
                            "--",
                            py,
                            str(EXAMPLE / "train_dist.py"),
                            "--graph_name",
                            GRAPH,
                            "--ip_config",
                            str(wl / "ip_config.txt"),
                            "--part_config",
                            str(wl / f"{GRAPH}.json"),
                            "--num_epochs",
                            EPOCHS,
                            "--batch_size",
                            BATCH,
                        ],
                        env=dgl_env(**e),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"the hand-started run failed: exit codes {codes}")
        return time.monotonic() - started
    finally:
        for h in holders:
            h.kill()
            h.wait()
        for i in range(len(ips)):
            subprocess.run(["ip", "netns", "del", f"hand{tag}-{i}"], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def with_dglrun(py: str, data: Path, ws: Path, **env: str) -> float:
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "launcher.cli",
            "-g",
            GRAPH,
            "--num-partitions",
            "2",
            "--balance-train",
            "--balance-edges",
            "--partition-entry-point",
            str(EXAMPLE / "load_and_partition_graph.py"),
            "--partition-args",
            f"--dataset {DATASET} --dataset_root {data}",
            "--train-entry-point",
            str(EXAMPLE / "train_dist.py"),
            "--num-epochs",
            EPOCHS,
            "--batch-size",
            BATCH,
            "--transport",
            "local",
            "--workspace",
            str(ws),
            "--python",
            py,
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
        env=dgl_env(PYTHONPATH=str(REPO), **env),
    )
    return time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    py = os.environ.get("DGL_PYTHON")
    if not py or not Path(py).exists():
        print("pipeline_bench: set DGL_PYTHON to the DGL environment's python (make bench does)")
        return 2
    if os.geteuid() != 0:
        print("pipeline_bench: needs root (network namespaces)")
        return 2
    cache = Path(os.environ.get("DGL_OPERATOR_CACHE", Path.home() / ".cache" / "dgl-operator"))
    data = cache / "datasets"
    if not (data / "ogbn_synth" / "RELEASE_v1.txt").exists():
        subprocess.run(
            [py, str(EXAMPLE / "make_dataset.py"), "--root", str(data)],
            check=True,
            env=dgl_env(),
            capture_output=True,
        )
    hand, tool, dgl_start = [], [], []
    for _ in range(a.repeat):  # interleaved, so drift in machine load hits all alike
        with tempfile.TemporaryDirectory() as d:
            hand.append(by_hand(py, data, Path(d)))
        with tempfile.TemporaryDirectory() as d:
            tool.append(with_dglrun(py, data, Path(d)))
        with tempfile.TemporaryDirectory() as d:
            dgl_start.append(with_dglrun(py, data, Path(d), DGL_OPERATOR_FAST_START="0"))
    b, t, s = min(hand), min(tool), min(dgl_start)
    print(f"pipeline, 2 workers x (1 server + 1 trainer), 2 epochs, best of {a.repeat}:")
    print(
        f"  by hand (partition + copy + DGL env contract): {b:.1f}s  (runs: "
        f"{', '.join(f'{x:.1f}' for x in hand)})"
    )
    print(
        f"  dglrun --transport local:                     {t:.1f}s  (runs: "
        f"{', '.join(f'{x:.1f}' for x in tool)})"
    )
    print(
        f"  dglrun, DGL's own start waits kept:           {s:.1f}s  (runs: "
        f"{', '.join(f'{x:.1f}' for x in dgl_start)})"
    )
    verdict = "met" if t / b <= 1.15 else "NOT met"
    record("pipeline_bench", "dglrun --transport local, 2 epochs", t, "s", b, "by hand")
    print(f"  ratio dglrun / by hand: {t / b:.2f}x (target <= 1.15x: {verdict})")
    record("pipeline_bench", "dglrun, DGL 2.1's start waits out", t, "s", s, "waits kept")
    print(f"  ratio dglrun / dglrun with DGL's start waits: {t / s:.2f}x (lower is better)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
