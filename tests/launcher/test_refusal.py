"""A process that refused a file it was to load (launcher/workers/refusal.py): it exits with
podcontract's REFUSED_EXIT_CODE, its last line naming the file, and dglrun's line (the pod's
termination message) starts ``refused: `` and quotes it, from the trainers of phase 5
(launcher.training.train._supervise) and from the one process of Skip mode
(launcher.phases.run_local_process, run here with real subprocesses). Any other exit, or that
code with nothing said, stays an ordinary failure. dglrun on the local transport, with a
planted checkpoint: tests/launcher/test_storage.py."""

from __future__ import annotations

import sys

import pytest

from launcher.console import Console, PhaseError, Refused, Report, phase
from launcher.phases import run_local_process
from launcher.training.train import _supervise
from launcher.workers import refusal
from launcher.workers.transport import PopenProc
from podcontract import REFUSED_EXIT_CODE, REFUSED_PREFIX
from tests.launcher.fake_procs import FakeProc, job

CKPT = "/dgl_storage/runs/j-1a2b3c4d/checkpoints/epoch-3.pt"
LINE = (
    f"train_dist.py: error: [rank 0] checkpoint {CKPT} is refused: it holds more than tensors "
    "and plain values, and loading it could run code (Unsupported global: GLOBAL posix.system)"
)


def test_the_refusal_is_quoted_whole_file_first() -> None:
    said = refusal.describe(REFUSED_EXIT_CODE, LINE, "trainer 0 on worker-1 (10.0.0.1)")
    assert said == (
        f"refused: {LINE} (trainer 0 on worker-1 (10.0.0.1) exited with code 65: it refused a "
        "file it was to load, and would refuse it again on a restart)"
    )


def test_a_long_refusal_keeps_its_start_where_the_file_is_named() -> None:
    long = f"{LINE} {'GLOBAL x' * 2000}\n\tand more"
    said = refusal.describe(REFUSED_EXIT_CODE, long, "trainer 0")
    assert said is not None and said.startswith(f"{REFUSED_PREFIX}{LINE} GLOBAL x")
    assert len(said) < refusal.QUOTED + 200 and "\n" not in said and "\t" not in said


def test_a_refusal_is_quoted_in_printable_characters() -> None:
    """A payload's words (a global's name) may hold a terminal's escapes: not quoted as such."""
    said = refusal.describe(REFUSED_EXIT_CODE, f"{LINE} (\x1b[2J\x00\x7f)", "trainer 0")
    assert said is not None and f"{LINE} (?[2J??)" in said, said


@pytest.mark.parametrize(
    ("code", "line"),
    [(1, LINE), (2, LINE), (137, LINE), (REFUSED_EXIT_CODE, ""), (REFUSED_EXIT_CODE, "  \n")],
    ids=["code-1", "code-2", "killed", "nothing-said", "blank"],
)
def test_any_other_exit_is_no_refusal(code: int, line: str) -> None:
    assert refusal.describe(code, line, "trainer 0") is None


def test_a_trainer_that_refused_its_checkpoint_ends_the_phase_quoting_it() -> None:
    running = job(FakeProc("w0", 0.0, REFUSED_EXIT_CODE, LINE), FakeProc("w1", None))
    with pytest.raises(Refused) as e:
        _supervise(running, 60, Console())
    said = str(e.value)
    assert said.startswith(f"refused: {LINE} (trainer 0 on worker-0 (10.0.0.0) exited with code 65")
    assert said.endswith("; stopped every DGL process on every worker"), said
    assert all(r.proc.poll() is not None for r in running), "a DGL process was left running"


def test_the_same_line_with_another_code_is_an_ordinary_failure() -> None:
    """The twin: the trainer's exit code says whether it refused a file, not its words."""
    running = job(FakeProc("w0", 0.0, 2, LINE), FakeProc("w1", None))
    with pytest.raises(PhaseError) as e:
        _supervise(running, 60, Console())
    assert not isinstance(e.value, Refused)
    assert str(e.value).startswith("trainer 0 on worker-0 (10.0.0.0) exited with code 2 (")


def test_the_phase_lets_a_refusal_through_unwrapped() -> None:
    """``train failed: ...`` would hide the start the operator reads; a failure of another
    kind still says its phase."""
    console, report = Console(write=lambda _: None), Report()
    with pytest.raises(Refused) as refused, phase(console, report, 5, "train"):
        raise Refused(f"{REFUSED_PREFIX}{LINE}")
    assert str(refused.value) == f"{REFUSED_PREFIX}{LINE}"
    with pytest.raises(PhaseError) as other, phase(console, report, 5, "train"):
        raise PhaseError(LINE)
    assert str(other.value) == f"train failed: {LINE}"


REFUSER = (
    "import sys\n"
    "print('loading the checkpoint', flush=True)\n"
    "print(sys.argv[1], file=sys.stderr, flush=True)\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def run_skip_mode(code: int, last: str) -> Exception:
    """The training entry point of Skip mode: a real process that says ``last`` and exits."""
    lines: list[str] = []
    console = Console(write=lines.append)
    argv = [sys.executable, "-c", REFUSER, last, str(code)]
    with pytest.raises(PhaseError) as e, phase(console, Report(), 5, "train"):
        run_local_process(console, "train", argv, {}, 60, "the training entry point t.py")
    assert f"[train] {last}" in lines, lines
    return e.value


def test_skip_modes_entry_point_that_refused_a_file_ends_quoting_it() -> None:
    error = run_skip_mode(REFUSED_EXIT_CODE, LINE)
    assert isinstance(error, Refused)
    assert str(error) == (
        f"refused: {LINE} (the training entry point t.py exited with code 65: it refused a "
        "file it was to load, and would refuse it again on a restart)"
    )


def test_skip_modes_entry_point_failing_otherwise_is_an_ordinary_failure() -> None:
    error = run_skip_mode(1, LINE)
    assert not isinstance(error, Refused)
    assert str(error) == "train failed: the training entry point t.py exited with code 1"


def test_kubectl_execs_exit_line_does_not_hide_the_refusal() -> None:
    """Through kubectl exec, kubectl prints `command terminated with exit code 65` after the
    remote trainer's refusal (seen on the local cluster: the job failed FileRefused quoting
    kubectl's line instead of the file). The process's last words are its own."""
    said = "train_dist.py: error: [rank 0] checkpoint /c/epoch-3.pt is refused: x"
    script = (
        f"echo '{said}'; echo 'peak 12 MiB' >/dev/null; "
        "echo 'command terminated with exit code 65' >&2; exit 65"
    )
    lines: list[str] = []
    proc = PopenProc("worker-0/trainer-0", ["sh", "-c", script], lambda _l, t: lines.append(t))
    assert proc.wait(10) == REFUSED_EXIT_CODE
    assert proc.last_line() == said
    assert "command terminated with exit code 65" in [t.strip() for t in lines]  # (still shown)
    # the twin: a process whose own last line merely mentions it keeps it
    own = "it said: command terminated with exit code 65"
    other = PopenProc("w", ["sh", "-c", f"echo '{own}'; exit 1"], lambda _l, _t: None)
    assert other.wait(10) == 1 and other.last_line() == own


def test_a_refusal_said_before_a_late_line_of_the_other_stream_is_still_quoted() -> None:
    """Over kubectl exec a process's stdout and stderr travel apart: on the local cluster a
    line the trainer had printed on stdout arrived after its refusal on stderr, and was
    quoted instead (FileRefused naming no file). The refusal is its last error line."""
    said = "train_dist.py: error: [rank 0] checkpoint /c/epoch-3.pt is refused: x"
    late = "[rank 0] graphsage: 20000 nodes, 200000 edges, 2 partition(s)"
    script = f"echo '{said}'; echo '{late}'; exit 65"
    proc = PopenProc("worker-0/trainer-0", ["sh", "-c", script], lambda _l, _t: None)
    assert proc.wait(10) == REFUSED_EXIT_CODE
    assert proc.last_line() == late  # (what the streams delivered last)
    assert proc.last_error_line() == said
    line = refusal.describe(REFUSED_EXIT_CODE, proc.last_error_line() or proc.last_line(), "t")
    assert line is not None and "epoch-3.pt is refused" in line
    # the twin: no error line said, nothing to prefer
    quiet = PopenProc("w", ["sh", "-c", f"echo '{late}'; exit 1"], lambda _l, _t: None)
    assert quiet.wait(10) == 1 and quiet.last_error_line() == ""
