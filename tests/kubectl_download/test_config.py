"""kubectl-download configuration from the environment and flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_download.config import DownloadConfig, load_config
from podprogram.options import ConfigError

SHA = "ab" * 32


def test_defaults_copy_the_image_kubectl_into_opt_kube() -> None:
    c = load_config({})
    assert c == DownloadConfig()
    assert (c.target, c.url, c.sha256, c.source) == (
        Path("/opt/kube/kubectl"),
        None,
        None,
        Path("/usr/local/bin/kubectl"),
    )
    assert (c.retries, c.timeout, c.backoff, c.version_timeout) == (5, 60.0, 1.0, 30.0)


def test_operator_env() -> None:
    c = load_config(
        {
            "TARGET_DIR": "/opt/kube",
            "KUBECTL_URL": "https://dl.k8s.io/kubectl",
            "KUBECTL_SHA256": SHA,
        }
    )
    assert (c.url, c.sha256) == ("https://dl.k8s.io/kubectl", SHA)


def test_all_variables() -> None:
    env = {
        "TARGET_DIR": "/t",
        "KUBECTL_SOURCE": "/bin/kc",
        "KUBECTL_SHA256": f"SHA256:{SHA.upper()}",
        "KUBECTL_RETRIES": "0",
        "KUBECTL_TIMEOUT": "2.5",
        "KUBECTL_BACKOFF": "0",
    }
    assert load_config(env) == DownloadConfig(
        target_dir=Path("/t"),
        sha256=SHA,
        source=Path("/bin/kc"),
        retries=0,
        timeout=2.5,
        backoff=0.0,
    )


def test_flags_override_the_environment() -> None:
    c = load_config(
        {"TARGET_DIR": "/env", "KUBECTL_RETRIES": "9"},
        ["--target-dir=/flag", "--retries=1", "--url=http://h/k", f"--sha256={SHA}"],
    )
    assert (c.target_dir, c.retries, c.url) == (Path("/flag"), 1, "http://h/k")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUBECTL_URL": "https://h/kubectl"}, "KUBECTL_URL is set but KUBECTL_SHA256 is not"),
        ({"KUBECTL_URL": "ftp://h/k", "KUBECTL_SHA256": SHA}, "KUBECTL_URL must be an http"),
        ({"KUBECTL_URL": "/local/path", "KUBECTL_SHA256": SHA}, "KUBECTL_URL must be an http"),
        ({"KUBECTL_URL": "http://h:port/k", "KUBECTL_SHA256": SHA}, "KUBECTL_URL must be an"),
        ({"KUBECTL_SHA256": "abc"}, "KUBECTL_SHA256 must be 64 hexadecimal digits"),
        ({"KUBECTL_SHA256": "g" * 64}, "KUBECTL_SHA256 must be 64 hexadecimal digits"),
        ({"KUBECTL_RETRIES": "-1"}, "KUBECTL_RETRIES must be an integer from 0 to 100"),
        ({"KUBECTL_RETRIES": "many"}, "KUBECTL_RETRIES must be an integer from 0 to 100"),
        ({"KUBECTL_RETRIES": "101"}, "KUBECTL_RETRIES must be an integer from 0 to 100"),
        ({"KUBECTL_TIMEOUT": "0"}, "KUBECTL_TIMEOUT must be a positive number of seconds"),
        ({"KUBECTL_TIMEOUT": "1m"}, "KUBECTL_TIMEOUT must be a positive number of seconds"),
        ({"KUBECTL_BACKOFF": "-1"}, "KUBECTL_BACKOFF must be a number of seconds >= 0"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env)
    assert message in str(err.value)


def test_bad_flags_name_the_flag() -> None:
    with pytest.raises(ConfigError, match="--url is set but --sha256 is not"):
        load_config({}, ["--url", "http://h/k", "--sha256", ""])
    with pytest.raises(ConfigError, match="--timeout must be a positive number"):
        load_config({}, ["--timeout", "-3"])
    with pytest.raises(ConfigError, match="unrecognized arguments"):
        load_config({}, ["--nope"])
