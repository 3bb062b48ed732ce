"""The partition data path over real HTTP on loopback: server, puller, and their failures."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher.delivery.pull import Puller, main, parse_progress
from launcher.delivery.server import PartitionServer
from launcher.delivery.wire import TransferError, build_manifest
from launcher.partition import output as parts
from tests.support.waiting import wait_for

TOKEN = "s3cret-token"

# The served fixture: a partition set, its manifest, and a server offering it.
Served = tuple[parts.PartitionSet, dict[str, Any], PartitionServer]


def make_set(root: Path, sizes: tuple[int, int] = (300_000, 200_000)) -> parts.PartitionSet:
    root.mkdir(parents=True, exist_ok=True)
    meta: dict[str, object] = {"graph_name": "g", "num_parts": len(sizes)}
    for i, size in enumerate(sizes):
        d = root / f"part{i}"
        d.mkdir()
        (d / "graph.dgl").write_bytes(bytes((i * 7 + k) % 251 for k in range(size)))
        (d / "node_feat.dgl").write_bytes(b"F" * (size // 3))
        meta[f"part-{i}"] = {
            "part_graph": f"part{i}/graph.dgl",
            "node_feats": f"part{i}/node_feat.dgl",
        }
    (root / "g.json").write_text(json.dumps(meta))
    (root / "unrelated.log").write_text("not served to anyone\n")
    return parts.load(root / "g.json", len(sizes))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    pset = make_set(tmp_path / "src")
    manifest = build_manifest(pset)
    with PartitionServer(pset.root, manifest, TOKEN, host="127.0.0.1") as server:
        yield pset, manifest, server


def url(server: PartitionServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def no_sleep(_s: float) -> None:
    pass


def test_a_worker_pulls_exactly_its_part_intact(served: Served, tmp_path: Path) -> None:
    pset, manifest, server = served
    seen: list[tuple[int, int]] = []
    puller = Puller(url(server), TOKEN)
    got = puller.manifest()
    assert got == manifest
    result = puller.pull_files(
        got, got["parts"]["1"], tmp_path / "w1", lambda d, t: seen.append((d, t))
    )
    dest = tmp_path / "w1"
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "g.json",
        "part1/graph.dgl",
        "part1/node_feat.dgl",
    ]
    for rel in ("g.json", "part1/graph.dgl", "part1/node_feat.dgl"):
        assert (dest / rel).read_bytes() == (pset.root / rel).read_bytes()
    want = sum(manifest["files"][r]["size"] for r in manifest["parts"]["1"])
    assert result.bytes_total == result.bytes_fetched == want
    assert seen[-1] == (want, want)
    # (the server counts a file once its send returned, in its own thread: the puller may
    # have read the last byte before that)
    wait_for(lambda: server.stats.bytes_sent >= want, what="the server's count", timeout=30)
    assert server.stats.bytes_sent == want
    assert "unrelated.log" not in manifest["files"]


def test_a_second_pull_keeps_the_verified_files(served: Served, tmp_path: Path) -> None:
    _pset, manifest, server = served
    puller = Puller(url(server), TOKEN)
    puller.pull_files(manifest, manifest["parts"]["0"], tmp_path / "w0")
    again = puller.pull_files(manifest, manifest["parts"]["0"], tmp_path / "w0")
    assert again.bytes_fetched == 0 and again.bytes_total > 0


def test_a_wrong_token_is_refused_with_a_clear_error(served: Served) -> None:
    _pset, _manifest, server = served
    with pytest.raises(TransferError, match="401 missing or wrong transfer token"):
        Puller(url(server), "guess").manifest()
    req = urllib.request.Request(f"{url(server)}/v1/files/part0/graph.dgl")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 401


def test_readiness_needs_no_token_and_only_manifest_files_are_served(served: Served) -> None:
    _pset, _manifest, server = served
    with urllib.request.urlopen(f"{url(server)}/ready", timeout=10) as r:
        assert r.status == 200
    for rel in ("unrelated.log", "../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd"):
        req = urllib.request.Request(
            f"{url(server)}/v1/files/{rel}", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 404, rel


def test_a_corrupted_transfer_is_detected_and_downloaded_again(tmp_path: Path) -> None:
    pset = make_set(tmp_path / "src")
    manifest = build_manifest(pset)
    corrupted: list[str] = []

    def flip_once(rel: str, data: bytes) -> bytes:
        if rel == "part0/graph.dgl" and not corrupted:
            corrupted.append(rel)
            return bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    notes: list[str] = []
    with PartitionServer(pset.root, manifest, TOKEN, host="127.0.0.1", tamper=flip_once) as s:
        puller = Puller(url(s), TOKEN, sleep=no_sleep, on_retry=notes.append)
        result = puller.pull_files(manifest, manifest["parts"]["0"], tmp_path / "w0")
    assert corrupted == ["part0/graph.dgl"]
    assert result.corrupt_retries == 1
    assert any("part0/graph.dgl: checksum mismatch" in n for n in notes)
    assert (tmp_path / "w0/part0/graph.dgl").read_bytes() == (
        pset.root / "part0/graph.dgl"
    ).read_bytes()
    assert not list((tmp_path / "w0").rglob("*.partial"))


def test_a_file_that_always_arrives_corrupted_fails_naming_it(tmp_path: Path) -> None:
    pset = make_set(tmp_path / "src")
    manifest = build_manifest(pset)

    def flip(rel: str, data: bytes) -> bytes:
        return data[:-1] + b"\x00" if rel.endswith("node_feat.dgl") else data

    with PartitionServer(pset.root, manifest, TOKEN, host="127.0.0.1", tamper=flip) as s:
        puller = Puller(url(s), TOKEN, sleep=no_sleep)
        with pytest.raises(TransferError, match=r"part1/node_feat.dgl: checksum mismatch 4 times"):
            puller.pull_files(manifest, manifest["parts"]["1"], tmp_path / "w1")
    assert not (tmp_path / "w1/part1/node_feat.dgl").exists(), "an unverified file was kept"


def test_a_dropped_connection_resumes_where_it_stopped(tmp_path: Path) -> None:
    pset = make_set(tmp_path / "src")
    manifest = build_manifest(pset)
    drops: list[int] = []

    def drop_halfway(rel: str, data: bytes) -> bytes:
        if rel == "part1/graph.dgl" and not drops:
            drops.append(len(data))
            return data[: len(data) // 2]
        return data

    with PartitionServer(pset.root, manifest, TOKEN, host="127.0.0.1", tamper=drop_halfway) as s:
        puller = Puller(url(s), TOKEN, sleep=no_sleep)
        result = puller.pull_files(manifest, manifest["parts"]["1"], tmp_path / "w1")
        wait_for(  # (counted in the server's thread once each send returned)
            lambda: s.stats.bytes_sent >= result.bytes_total, what="the server's count", timeout=30
        )
        sent = s.stats.bytes_sent
    size = manifest["files"]["part1/graph.dgl"]["size"]
    assert drops == [size]
    assert result.resumes == 1 and result.corrupt_retries == 0
    # the resumed request asked only for the second half: nothing was sent twice
    assert result.bytes_fetched == result.bytes_total == sent
    assert (tmp_path / "w1/part1/graph.dgl").read_bytes() == (
        pset.root / "part1/graph.dgl"
    ).read_bytes()


def test_an_unreachable_server_fails_after_the_retries(tmp_path: Path) -> None:
    notes: list[str] = []
    puller = Puller("http://127.0.0.1:9", TOKEN, sleep=no_sleep, on_retry=notes.append)
    with pytest.raises(
        TransferError, match=r"cannot reach the partition server .* after 6 attempts"
    ):
        puller.manifest()
    assert len(notes) == 5


def test_done_ends_the_wait_and_a_timeout_says_what_was_served(served: Served) -> None:
    _pset, _manifest, server = served
    with pytest.raises(TransferError, match=r"within 0s \(0.0 MB served to 0 peers\)"):
        server.wait_done(0.01)
    t = threading.Thread(target=Puller(url(server), TOKEN).done)
    t.start()
    server.wait_done(10)
    t.join()


def test_the_command_prints_progress_and_one_line_errors(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _pset, manifest, server = served
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    code = main(["--url", url(server), "--part", "0", "--dest", str(tmp_path / "w0"),
                 "--token-file", str(token)])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    last = [parse_progress(line) for line in out if parse_progress(line)][-1]
    want = sum(manifest["files"][r]["size"] for r in manifest["parts"]["0"])
    assert last == (0, want, want)
    assert f"pull: part 0: {want}/{want} bytes (100%)" in out
    assert out[-1].startswith("pull: part 0: ") and "verified" in out[-1]
    code = main(["--url", url(server), "--part", "7", "--dest", str(tmp_path / "w7"),
                 "--token-file", str(token)])  # fmt: skip
    assert code == 1
    assert (
        capsys.readouterr().out.strip() == "pull: error: part 7: the partition server has no part 7"
    )
    code = main(["--url", url(server), "--part", "0", "--dest", str(tmp_path / "w0"),
                 "--token-file", str(tmp_path / "missing")])  # fmt: skip
    assert code == 1
    assert "cannot read the transfer token" in capsys.readouterr().out
    assert main(["--url", url(server), "--done", "--token-file", str(token)]) == 0
    server.wait_done(5)


def test_a_rate_cap_paces_each_connection(tmp_path: Path) -> None:
    pset = make_set(tmp_path / "src", sizes=(2_000_000, 100))
    manifest = build_manifest(pset)
    with PartitionServer(pset.root, manifest, TOKEN, host="127.0.0.1", max_rate=2e6) as s:
        started = time.monotonic()
        result = Puller(url(s), TOKEN).pull_files(manifest, manifest["parts"]["0"], tmp_path / "w")
        took = time.monotonic() - started
    # a 2 MB file at 2 MB/s goes out in 0.2 MB slices 0.1 s apart: 0.9 s at least (uncapped,
    # loopback takes milliseconds)
    assert result.bytes_total > 2_000_000 and took >= 0.85, took
    assert (tmp_path / "w/part0/graph.dgl").read_bytes() == (
        pset.root / "part0/graph.dgl"
    ).read_bytes()


def test_without_done_the_server_stops_cleanly_only_if_everything_was_served(
    tmp_path: Path,
) -> None:
    pset = make_set(tmp_path / "src")
    manifest = build_manifest(pset)
    with PartitionServer(pset.root, manifest, TOKEN, host="127.0.0.1") as s:
        puller = Puller(url(s), TOKEN)
        puller.pull_files(manifest, manifest["parts"]["0"], tmp_path / "w0")
        with pytest.raises(TransferError, match="within 0s"):
            s.wait_done(0.01)  # part 1 never left: a failure
        puller.pull_files(manifest, manifest["parts"]["1"], tmp_path / "w1")
        assert s.wait_done(0.01) is False  # all served, nobody said done: a clean stop


def test_a_destination_that_cannot_be_written_is_named_without_retries(
    served: Served,
    tmp_path: Path,
) -> None:
    _pset, manifest, server = served
    dest = tmp_path / "w0"
    (dest / "part0").mkdir(parents=True)
    (dest / "part0" / "graph.dgl.partial").mkdir()  # where the download would go
    notes: list[str] = []
    puller = Puller(url(server), TOKEN, sleep=no_sleep, on_retry=notes.append)
    with pytest.raises(TransferError, match=r"cannot write .*graph\.dgl\.partial: Is a directory"):
        puller.pull_files(manifest, manifest["parts"]["0"], dest)
    assert notes == [], "a local write error was retried as a network one"


def test_connections_are_capped_and_idle_ones_dropped(tmp_path: Path) -> None:
    """Anybody who reaches the port could hold the server's threads with connections that
    say nothing: beyond the cap a connection is closed at once, and an idle one is dropped
    after the idle timeout, which frees its slot for a worker's pull."""
    import socket

    pset = make_set(tmp_path / "src")
    manifest = build_manifest(pset)
    with PartitionServer(
        pset.root, manifest, TOKEN, host="127.0.0.1", max_connections=2, idle_timeout=1.0
    ) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        try:
            # (the two idle ones hold both slots: a third is accepted and closed unanswered)
            extra = socket.create_connection(("127.0.0.1", server.port))
            extra.settimeout(30)
            assert extra.recv(1) == b"", "a connection beyond the cap was served"
            extra.close()
            # the idle ones are dropped by the server (EOF), without a request
            for s in idle:
                s.settimeout(30)
                assert s.recv(1) == b""
        finally:
            for s in idle:
                s.close()
        # their slots are free again: a worker's request is served
        req = urllib.request.Request(
            f"{url(server)}/v1/manifest", headers={"Authorization": f"Bearer {TOKEN}"}
        )

        def served() -> bool:
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return bool(resp.status == 200)
            except (urllib.error.URLError, ConnectionError):
                return False

        assert wait_for(served, what="the manifest served again", timeout=30)
