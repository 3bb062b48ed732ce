"""Fixtures of the worker agent's tests: real agents (``python -m workeragent``) on 127.0.0.1,
stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import RunningAgent, StartAgent


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[StartAgent]:
    """``start_agent(*flags, command=(), ...)``: an agent of its own (its own folder)."""
    agents: list[RunningAgent] = []

    def start(*flags: str, **kwargs: object) -> RunningAgent:
        folder = tmp_path / f"agent{len(agents)}"
        folder.mkdir()
        agent = RunningAgent(folder, *flags, **kwargs)  # type: ignore[arg-type]
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        agent.close()


@pytest.fixture
def agent(start_agent: StartAgent) -> RunningAgent:
    """An agent with the default flags (but the address, token and workdir)."""
    return start_agent()
