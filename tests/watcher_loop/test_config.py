"""watcher-loop configuration from the environment and flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from podprogram.options import ConfigError
from watcher_loop.config import WatcherConfig, default_namespace, load_config
from watcher_loop.state import Mode

BASE = {"WATCHERFILE": "/etc/dgl/hostfile", "WATCHERMODE": "ready"}


def load(
    env: dict[str, str], argv: list[str] | None = None, ns_file: Path | None = None
) -> WatcherConfig:
    return load_config(env, argv or [], namespace_file=ns_file or Path("/nonexistent/namespace"))


def test_operator_env_as_the_builder_sets_it() -> None:
    env = {
        "WATCHERFILE": "/etc/dgl/hostfile",
        "WATCHERMODE": "ready",
        "NAMESPACE": "team",
        "WATCHER_EXPECTED_PODS": "12",
    }
    assert load(env) == WatcherConfig(
        file=Path("/etc/dgl/hostfile"),
        mode=Mode.READY,
        namespace="team",
        expected_pods=12,
        timeout=0.0,
        poll_interval=2.0,
    )


def test_defaults() -> None:
    c = load(BASE)
    assert (c.namespace, c.expected_pods, c.timeout, c.poll_interval) == ("default", None, 0, 2)


def test_timeout_poll_and_mode_case() -> None:
    env = {**BASE, "WATCHERMODE": " Finished ", "WATCHER_TIMEOUT": "1.5"}
    c = load({**env, "WATCHER_POLL_INTERVAL": "0.1"})
    assert (c.mode, c.timeout, c.poll_interval) == (Mode.FINISHED, 1.5, 0.1)


def test_namespace_from_the_service_account_file(tmp_path: Path) -> None:
    f = tmp_path / "namespace"
    f.write_text("ml-team\n")
    assert load(BASE, ns_file=f).namespace == "ml-team"
    assert load({**BASE, "NAMESPACE": "explicit"}, ns_file=f).namespace == "explicit"
    assert load({**BASE, "NAMESPACE": "  "}, ns_file=f).namespace == "ml-team"
    f.write_text("")
    assert default_namespace(f) == "default"
    assert default_namespace(tmp_path / "missing") == "default"


def test_flags_override_the_environment() -> None:
    argv = [
        "--file=/x/partfile",
        "--mode=finished",
        "--namespace=n2",
        "--expected-pods=1",
        "--timeout=3",
        "--poll-interval=0.5",
    ]
    c = load({**BASE, "NAMESPACE": "n1", "WATCHER_EXPECTED_PODS": "4"}, argv)
    assert c == WatcherConfig(Path("/x/partfile"), Mode.FINISHED, "n2", 1, 3.0, 0.5)


def test_flags_alone_are_enough() -> None:
    assert load({}, ["--file", "f", "--mode", "ready"]).file == Path("f")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WATCHERMODE": "ready"}, "WATCHERFILE is not set"),
        ({"WATCHERFILE": " ", "WATCHERMODE": "ready"}, "WATCHERFILE is not set"),
        ({"WATCHERFILE": "f"}, "WATCHERMODE is not set"),
        ({**BASE, "WATCHERMODE": "running"}, "WATCHERMODE must be 'ready' or 'finished'"),
        ({**BASE, "WATCHER_EXPECTED_PODS": "two"}, "WATCHER_EXPECTED_PODS must be a positive"),
        ({**BASE, "WATCHER_EXPECTED_PODS": "0"}, "WATCHER_EXPECTED_PODS must be a positive"),
        ({**BASE, "WATCHER_EXPECTED_PODS": "-2"}, "WATCHER_EXPECTED_PODS must be a positive"),
        ({**BASE, "WATCHER_EXPECTED_PODS": "1.5"}, "WATCHER_EXPECTED_PODS must be a positive"),
        ({**BASE, "WATCHER_TIMEOUT": "soon"}, "WATCHER_TIMEOUT must be a number of seconds"),
        ({**BASE, "WATCHER_TIMEOUT": "-1"}, "WATCHER_TIMEOUT must be a number of seconds"),
        ({**BASE, "WATCHER_TIMEOUT": "nan"}, "WATCHER_TIMEOUT must be a number of seconds"),
        ({**BASE, "WATCHER_TIMEOUT": "inf"}, "WATCHER_TIMEOUT must be a number of seconds"),
        ({**BASE, "WATCHER_POLL_INTERVAL": "0"}, "WATCHER_POLL_INTERVAL must be a positive"),
        ({**BASE, "WATCHER_POLL_INTERVAL": "x"}, "WATCHER_POLL_INTERVAL must be a positive"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(env)
    assert message in str(err.value)


def test_bad_flag_names_the_flag() -> None:
    with pytest.raises(ConfigError, match="--expected-pods must be a positive integer"):
        load(BASE, ["--expected-pods", "x"])
    with pytest.raises(ConfigError, match="unrecognized arguments: --bogus"):
        load(BASE, ["--bogus"])
