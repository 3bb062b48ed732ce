"""dglrun's AgentTransport (launcher/workers/agent.py) against real worker agents
(``python -m workeragent``, two "workers" on 127.0.0.1 and 127.0.0.2, one port), with real
processes: what phases 3-5 and the ParMETIS modes ask of a transport, a process that outlives
its agent being away, and a token that is not the job's."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.checksums import manifest
from launcher.workers.agent import LOST_EXIT, AgentTransport
from launcher.workers.hostfile import Host
from launcher.workers.transport import WorkerTransportError
from tests.support.agents import RunningAgent, python_env
from tests.support.waiting import wait_for


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[list[RunningAgent]]:
    first = RunningAgent(tmp_path / "w0")
    second = RunningAgent(tmp_path / "w1", "--host", "127.0.0.2", "--port", str(first.port))
    yield [first, second]
    for a in (first, second):
        a.close()


HOSTS = [Host("127.0.0.1", 30050, "worker-0"), Host("127.0.0.2", 30050, "worker-1")]


def transport(
    agents: list[RunningAgent], tmp_path: Path, token_file: Path | None = None, **kw: object
) -> tuple[AgentTransport, list[tuple[str, str]]]:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{h.ip} {h.port} {h.name} slots=1\n" for h in HOSTS))
    lines: list[tuple[str, str]] = []
    t = AgentTransport(
        HOSTS,
        token_file=str(token_file or agents[0].token_file),
        hostfile=str(hostfile),
        workspace=str(agents[0].workdir),
        python=sys.executable,
        sink=lambda label, line: lines.append((label, line)),
        agent_port=agents[0].port,
        scratch=tmp_path,
        **kw,  # type: ignore[arg-type]
    )
    return t, lines


def said(lines: list[tuple[str, str]], label: str) -> list[str]:
    return [line for who, line in lines if who == label]


def test_a_process_on_each_worker_its_output_in_order_and_its_exit_code(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    t, lines = transport(agents, tmp_path)
    script = "import os,sys; print('out', os.environ['K']); print('prog: error: no', file=sys.stderr); sys.exit(3)"  # noqa: E501
    procs = [
        t.start(h, [sys.executable, "-c", script], {"K": h.name}, f"{h.name}/x") for h in HOSTS
    ]
    assert [p.wait(30) for p in procs] == [3, 3]
    for h, p in zip(HOSTS, procs, strict=True):
        out = said(lines, f"{h.name}/x")
        assert out[:2] == [f"out {h.name}", "prog: error: no"], out  # (one ordered stream)
        assert any("peak memory" in line for line in out)  # (launcher.workers.remote's)
        assert p.last_error_line() == "prog: error: no"
    t.close()


def test_files_copy_manifest_fetch_exists_and_run(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    t, _ = transport(agents, tmp_path)
    part = tmp_path / "part0"
    (part / "sub").mkdir(parents=True)
    (part / "a.bin").write_bytes(os.urandom(3_000_000))
    (part / "sub" / "b.json").write_text("{}")
    w1 = HOSTS[1]
    t.copy_to(w1, part, "dataset/part0")
    got = t.manifest(w1, "dataset/part0")
    assert sorted(got) == ["a.bin", "sub/b.json"] and got["a.bin"][0] == 3_000_000
    assert (agents[1].workdir / "dataset/part0/a.bin").read_bytes() == (part / "a.bin").read_bytes()
    assert t.exists(w1, "dataset/part0/sub/b.json") and not t.exists(w1, "dataset/none")
    t.write_file(w1, "conf/ip_config.txt", "10.0.0.1 30050\n")
    assert t.fetch(w1, "conf/ip_config.txt", tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text() == "10.0.0.1 30050\n"
    assert not t.fetch(w1, "conf/none", tmp_path / "none")
    assert t.fetch(w1, "dataset/part0", tmp_path / "back")  # a folder, whole
    assert (tmp_path / "back/sub/b.json").read_text() == "{}"
    assert (tmp_path / "back/a.bin").read_bytes() == (part / "a.bin").read_bytes()
    assert t.run(w1, ["sh", "-c", "echo hi; exit 4"], timeout=30) == (4, "hi\n")
    t.close()


def test_a_process_outlives_its_agent_being_away_and_is_followed_to_its_end(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """The agent stops answering (SIGSTOP: its connections hang, as across a network blip)
    for a few seconds while the process prints: dglrun re-attaches at the offset it had,
    every line arrives once, in order, and the exit code is the process's. The twin: away
    longer than ``unreachable_after``, the process is reported lost (LOST_EXIT), not hung."""
    t, lines = transport(agents, tmp_path, unreachable_after=30.0)
    script = "import time\nfor i in range(8):\n    print(i, flush=True); time.sleep(0.5)"
    proc = t.start(HOSTS[0], [sys.executable, "-c", script], {}, "worker-0/count")
    wait_for(lambda: "1" in said(lines, "worker-0/count"), what="the first lines")
    os.kill(agents[0].proc.pid, signal.SIGSTOP)
    time.sleep(3)
    os.kill(agents[0].proc.pid, signal.SIGCONT)
    assert proc.wait(60) == 0
    numbers = [x for x in said(lines, "worker-0/count") if x.isdigit()]
    assert numbers == [str(i) for i in range(8)], numbers
    t.close()
    # the twin: away for longer than unreachable_after
    t2, lines2 = transport(
        agents, tmp_path, unreachable_after=2.0, poll_wait=1.0, request_timeout=3.0
    )
    proc = t2.start(HOSTS[1], ["sleep", "30"], {}, "worker-1/sleep")
    os.kill(agents[1].proc.pid, signal.SIGSTOP)
    try:
        assert proc.wait(60) == LOST_EXIT
    finally:
        os.kill(agents[1].proc.pid, signal.SIGCONT)
    assert any("lost the process" in x for x in said(lines2, "worker-1/sleep")), lines2
    t2.close()


def test_stop_ends_the_process_and_what_it_started(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    t, _ = transport(agents, tmp_path)
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    proc = t.start(HOSTS[0], ["sh", "-c", script], {}, "worker-0/tree")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the child's pid")
    child = int(pidfile.read_text())
    proc.stop()
    assert proc.poll() is not None
    wait_for(lambda: not _alive(child), what="the grandchild stopped", timeout=15)
    t.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(")")[1].split()[0] != "Z"


def test_a_token_that_is_not_the_jobs_is_refused_and_nothing_runs(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """The attack: a pod that is not the job's (it has not its token) asks a worker's agent to
    run a command. Refused, naming the worker; the command never ran. The twin: the job's
    token runs the same command."""
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-jobs\n")
    marker = agents[0].workdir / "ran"
    t, _ = transport(agents, tmp_path, token_file=wrong)
    with pytest.raises(WorkerTransportError, match=r"worker-0.*401"):
        t.start(HOSTS[0], ["touch", str(marker)], {}, "worker-0/attack")
    time.sleep(0.5)
    assert not marker.exists()
    good, _ = transport(agents, tmp_path)
    assert good.start(HOSTS[0], ["touch", str(marker)], {}, "worker-0/job").wait(30) == 0
    assert marker.exists()
    good.close()


def test_an_unreadable_token_is_a_clear_error(tmp_path: Path, agents: list[RunningAgent]) -> None:
    with pytest.raises(WorkerTransportError, match=r"cannot read the job's token .*nope"):
        transport(agents, tmp_path, token_file=tmp_path / "nope")


def test_mpiruns_remote_shell_runs_a_command_on_the_named_worker(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """``rsh_agent()`` as mpirun calls it: ``<agent> <pod> <words...>``, the words one shell
    command there (the operator's hostfile names the pods; its port is DGL's), started as
    mpirun is (start_coordinator: the env tells it the hostfile, the token and the port).
    In a pod it is the job's ConfigMap's (a path every pod has: each orted checks it)."""
    t, _ = transport(agents, tmp_path)
    rsh = t.rsh_agent()
    lines: list[str] = []
    argv = [rsh, "worker-1", "echo", "$((6*7))", "from", "$PWD;", "exit", "5"]
    proc = t.start_coordinator(argv, python_env(), "rsh", lambda _, line: lines.append(line))
    assert proc.wait(60) == 5, lines
    assert lines == [f"42 from {agents[1].workdir}"], lines
    t.close()
    in_pod = tmp_path / "config-agent-rsh"
    in_pod.write_text("#!/bin/sh\n")
    t, _ = transport(agents, tmp_path, rsh_path=str(in_pod))
    assert t.rsh_agent() == str(in_pod)


def test_close_removes_the_scratch_folder_it_made(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """The folder of mpirun's remote shell script goes with the transport (one a caller
    gave stays theirs)."""
    t, _ = transport(agents, tmp_path)
    rsh = Path(t.rsh_agent())
    t.close()
    assert rsh.exists()  # (tmp_path: given)
    own = AgentTransport(
        HOSTS, token_file=str(agents[0].token_file), hostfile="/h", workspace="/w",
        agent_port=agents[0].port,
    )  # fmt: skip
    made = Path(own.rsh_agent()).parent
    assert made.is_dir()
    own.close()
    assert not made.exists()


def test_fetch_copies_a_file_or_a_folder_back_every_file_checked(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """What training leaves in worker-0's output folder comes back whole (train.py fetches
    the folder), each file checked against the SHA-256 the agent lists."""
    t, _ = transport(agents, tmp_path)
    out = agents[0].workdir / "workload" / "output"
    (out / "sub").mkdir(parents=True)
    (out / "metrics.json").write_text('{"test_accuracy": 0.5}')
    (out / "sub" / "model.bin").write_bytes(os.urandom(300_000))
    back = tmp_path / "back" / "output"
    assert t.fetch(HOSTS[0], "workload/output", back)
    assert manifest(back) == manifest(out)
    assert t.fetch(HOSTS[0], "workload/output/metrics.json", tmp_path / "m.json")
    assert (tmp_path / "m.json").read_text() == '{"test_accuracy": 0.5}'
    assert not t.fetch(HOSTS[0], "workload/none", tmp_path / "none")
    assert not (tmp_path / "none").exists()
    t.close()


def test_an_unreachable_agent_is_an_error_not_a_missing_file(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """dglrun checks that the entry point exists on a worker before anything starts: an agent
    that cannot be reached says so, naming the worker, rather than "does not exist"."""
    t, _ = transport(agents, tmp_path, unreachable_after=1.0)
    agents[1].close()
    with pytest.raises(WorkerTransportError, match=r"worker-1 .*unreachable"):
        t.exists(HOSTS[1], sys.executable)
    assert t.exists(HOSTS[0], sys.executable)  # (the twin: a reachable one answers)
    t.close()


class _HostileAgent(http.server.BaseHTTPRequestHandler):
    """A worker's agent that lists a file outside the folder dglrun fetches (a worker pod
    taken over); it serves every file it is asked for."""

    CONTENT = b"planted"

    def do_GET(self) -> None:
        path = urllib.parse.urlparse(self.path).path
        sha = hashlib.sha256(self.CONTENT).hexdigest()
        if path == "/v1/stat":
            body = json.dumps({"exists": True, "file": False, "dir": True, "size": 0}).encode()
        elif path == "/v1/manifest":
            body = json.dumps({"../planted": [len(self.CONTENT), sha]}).encode()
        else:
            body = self.CONTENT
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_name_outside_the_fetched_folder_is_refused(tmp_path: Path) -> None:
    """The attack: a worker's agent answers the fetch of its output folder with a name that
    climbs out of it (``../planted``), to make dglrun write beside the folder in the launcher
    pod. Refused, naming it; nothing is written outside (without the check, the file lands at
    ``back/planted``)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileAgent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text("t\n")
    host = Host("127.0.0.1", 30050, "worker-0")
    t = AgentTransport(
        [host], token_file=str(token), hostfile="/nonexistent", workspace="/w",
        agent_port=server.server_address[1], scratch=tmp_path,
    )  # fmt: skip
    try:
        with pytest.raises(WorkerTransportError, match=r"'\.\./planted', a name with '\.\.'"):
            t.fetch(host, "/w/workload/output", tmp_path / "back" / "output")
    finally:
        server.shutdown()
        server.server_close()
    assert not (tmp_path / "back" / "planted").exists()


def test_a_launcher_replacing_a_lost_one_re_attaches_and_nothing_runs_twice(
    agents: list[RunningAgent], tmp_path: Path
) -> None:
    """A launcher pod of the attempt is lost mid-training (SIGTERM: release) and a new one
    replays the attempt: with the attempt's tag its start of the same label and argv is the
    running process, followed from its first byte to its end; the process ran once. The
    twin: without a tag (each run its own), the second start runs it again."""
    marker = tmp_path / "runs"
    script = (
        f"import time\nopen({str(marker)!r}, 'a').write('run\\n')\n"
        "for i in range(6):\n    print('epoch', i, flush=True); time.sleep(0.5)"
    )
    argv = [sys.executable, "-c", script]
    first, said_first = transport(agents, tmp_path, attempt_tag="0f1e2d3c-a0")
    first.start(HOSTS[0], argv, {}, "worker-0/trainer-0")
    wait_for(lambda: "epoch 1" in said(said_first, "worker-0/trainer-0"), what="epoch 1")
    first.release()  # (its pod deleted)
    first.close()
    second, said_second = transport(agents, tmp_path, attempt_tag="0f1e2d3c-a0")
    proc = second.start(HOSTS[0], argv, {}, "worker-0/trainer-0")
    assert proc.wait(60) == 0
    epochs = [x for x in said(said_second, "worker-0/trainer-0") if x.startswith("epoch")]
    assert epochs == [f"epoch {i}" for i in range(6)], epochs
    assert marker.read_text() == "run\n", "the process ran twice"
    second.close()
    # the twin: no tag, no re-attach
    marker.unlink()
    third, _ = transport(agents, tmp_path)
    assert third.start(HOSTS[0], argv, {}, "worker-0/trainer-0").wait(60) == 0
    fourth, _ = transport(agents, tmp_path)
    assert fourth.start(HOSTS[0], argv, {}, "worker-0/trainer-0").wait(60) == 0
    assert marker.read_text() == "run\nrun\n"
    third.close()
    fourth.close()
