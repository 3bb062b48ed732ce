"""controller/lifecycle/__init__.py: the order in which a sync's steps run, the features' own
steps (controller/lifecycle/points.py) at their points included, pinned for the default
settings, a queued job (--kueue) and an elastic job. A feature's step registered at another
point changes it, and this test says so."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any, cast

import pytest

import controller.lifecycle as lifecycle
from controller.api import DGLJob, parse_job
from controller.builders import BuildOptions
from controller.features import registry
from controller.lifecycle import FEATURE_STEPS, Actions, Context, Next, Point, feature_steps, steps
from controller.lifecycle import elastic as elastic_step
from controller.lifecycle import queued as queued_step

DEFAULT = [
    "reported",
    "finished",
    "invalid",
    "caught_up",
    "created",
    "suspended",
    "observed",
    "deadline",
    "node_lost",
    "failed",
    "succeeded",
    "waiting",
    "create",
    "running",
]
QUEUED = [*DEFAULT[:6], "queued", *DEFAULT[6:]]  # before start: after suspended
ELASTIC = [*DEFAULT[:8], "elastic", *DEFAULT[8:]]  # while running: after the deadline
BOTH = [*DEFAULT[:6], "queued", *DEFAULT[6:8], "elastic", *DEFAULT[8:]]


def _recorder(ran: list[str], name: str) -> Callable[[Context, Actions], Next]:
    def step(ctx: Context, act: Actions) -> Next:
        ran.append(name)
        return Next.GO_ON

    return step


def _composed(
    monkeypatch: pytest.MonkeyPatch,
    job: DGLJob,
    options: BuildOptions,
    registered: tuple[lifecycle.FeatureStep, ...] = FEATURE_STEPS,
) -> list[str]:
    """The names of the steps a sync runs when each says go on: every public function of
    the lifecycle's step modules records its module's name; each feature step runs where its
    point is, if it applies to ``job`` under ``options``."""
    ran: list[str] = []
    with monkeypatch.context() as mp:
        for module in _step_modules():
            _record_all(mp, module, ran)
        _record_features(mp, registered, ran)
        ctx = cast(Context, SimpleNamespace(job=job))
        act = cast(Actions, SimpleNamespace(options=options))
        assert all(n is Next.GO_ON for n in steps(ctx, act))
    return ran


def _step_modules() -> list[ModuleType]:
    """The modules whose functions steps() calls (not the features' registry of steps)."""
    return [
        m
        for _, m in inspect.getmembers(lifecycle, inspect.ismodule)
        if m.__name__.startswith("controller.lifecycle.") and m is not feature_steps
    ]


def _record_features(
    mp: pytest.MonkeyPatch, registered: tuple[lifecycle.FeatureStep, ...], ran: list[str]
) -> None:
    recorded = tuple(dataclasses.replace(s, run=_recorder(ran, s.name)) for s in registered)
    mp.setattr(feature_steps, "FEATURE_STEPS", recorded)


def _record_all(monkeypatch: pytest.MonkeyPatch, module: ModuleType, ran: list[str]) -> None:
    name = module.__name__.rsplit(".", 1)[-1]
    for attr, fn in inspect.getmembers(module, inspect.isfunction):
        if fn.__module__ == module.__name__ and not attr.startswith("_"):
            monkeypatch.setattr(module, attr, _recorder(ran, name))


@pytest.fixture
def rigid(seed_job_raw: dict[str, Any]) -> DGLJob:
    return parse_job(seed_job_raw)


@pytest.fixture
def elastic_job(seed_job_raw: dict[str, Any]) -> DGLJob:
    seed_job_raw["spec"].update(storage={"claimName": "r"}, elasticPolicy={"maxReplicas": 2})
    job = parse_job(seed_job_raw)
    assert job.spec.elastic is not None
    return job


def test_the_steps_run_in_this_order_by_default(
    monkeypatch: pytest.MonkeyPatch, rigid: DGLJob
) -> None:
    assert _composed(monkeypatch, rigid, BuildOptions()) == DEFAULT


def test_kueue_waits_for_admission_before_start(
    monkeypatch: pytest.MonkeyPatch, rigid: DGLJob
) -> None:
    assert _composed(monkeypatch, rigid, BuildOptions(kueue=True)) == QUEUED


def test_an_elastic_job_chooses_its_members_while_running(
    monkeypatch: pytest.MonkeyPatch, elastic_job: DGLJob
) -> None:
    assert _composed(monkeypatch, elastic_job, BuildOptions()) == ELASTIC
    assert _composed(monkeypatch, elastic_job, BuildOptions(kueue=True)) == BOTH


def test_each_feature_step_is_registered_by_its_module_at_its_point() -> None:
    assert (*queued_step.STEPS, *elastic_step.STEPS) == FEATURE_STEPS
    assert [(s.feature, s.name, s.at) for s in FEATURE_STEPS] == [
        ("kueue", "queued", Point.BEFORE_START),
        ("kueue", "queued", Point.FINISHED),
        ("elastic", "elastic", Point.WHILE_RUNNING),
    ]
    modules = {type(f).__module__.rsplit(".", 1)[-1] for f in registry.FEATURES}
    assert {s.feature for s in FEATURE_STEPS} <= modules  # (each of a feature of FEATURES)
    assert [s.run for s in FEATURE_STEPS] == [
        queued_step.wait_for_admission,
        queued_step.finish_workload,
        elastic_step.choose_members,
    ]


def _finished(
    monkeypatch: pytest.MonkeyPatch,
    raw: dict[str, Any],
    options: BuildOptions,
    registered: tuple[lifecycle.FeatureStep, ...] = FEATURE_STEPS,
) -> list[str]:
    """What a sync of a finished job runs after the report's copy: the finished step (its own
    work done by fakes), then the features' steps at FINISHED; no other step."""
    ran: list[str] = []
    status = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    cleaned: list[str] = []
    with monkeypatch.context() as mp:
        for module in _step_modules():
            if module.__name__ != "controller.lifecycle.finished":
                _record_all(mp, module, ran)
        _record_features(mp, registered, ran)
        ctx = SimpleNamespace(raw={**raw, "status": status}, status=status, plan=None, now=0.0)
        act = SimpleNamespace(
            options=options,
            cleanup=lambda ref, policy: cleaned.append("pods"),
            schedule_ttl=lambda ref, ttl, plan, now: cleaned.append("ttl"),
        )
        # (the sync stops at the first step that does not go on)
        said = next(n for n in steps(cast(Context, ctx), cast(Actions, act)) if n is not Next.GO_ON)
    assert said is Next.DONE and cleaned == ["pods", "ttl"]
    assert ran[0] == "reported", "a finished job takes its last report too"
    return ran[1:]


def test_a_finished_queued_job_runs_the_features_finished_steps(
    monkeypatch: pytest.MonkeyPatch, seed_job_raw: dict[str, Any]
) -> None:
    assert _finished(monkeypatch, seed_job_raw, BuildOptions()) == []
    assert _finished(monkeypatch, seed_job_raw, BuildOptions(kueue=True)) == ["queued"]


@pytest.mark.parametrize("moved", ["queued", "elastic"])
def test_a_step_registered_at_the_wrong_point_breaks_the_order(
    monkeypatch: pytest.MonkeyPatch, elastic_job: DGLJob, moved: str
) -> None:
    """The pin above catches a feature step moved to the other point."""
    other = {Point.BEFORE_START: Point.WHILE_RUNNING, Point.WHILE_RUNNING: Point.BEFORE_START}
    wrong = tuple(
        dataclasses.replace(s, at=other[s.at]) if s.name == moved and s.at in other else s
        for s in FEATURE_STEPS
    )
    composed = _composed(monkeypatch, elastic_job, BuildOptions(kueue=True), wrong)
    assert composed != BOTH
    assert sorted(composed) == sorted(BOTH)  # (the same steps, in another order)


def test_a_finished_step_registered_at_another_point_is_not_run_for_a_finished_job(
    monkeypatch: pytest.MonkeyPatch, seed_job_raw: dict[str, Any]
) -> None:
    wrong = tuple(
        dataclasses.replace(s, at=Point.WHILE_RUNNING) if s.at is Point.FINISHED else s
        for s in FEATURE_STEPS
    )
    assert _finished(monkeypatch, seed_job_raw, BuildOptions(kueue=True), wrong) == []
