"""A real Prometheus on 127.0.0.1 scraping one target (the operator's metrics endpoint) and
evaluating the chart's rules (files/prometheus-rules.yaml) every second. Used by the live
monitoring test (tests/prometheus) and the e2e test on a real cluster."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from kubeclient import Obj
from localcluster.operator_process import stop_process
from localcluster.ports import free_port
from tests.support.paths import RULES
from tests.support.waiting import wait_for

SCRAPE_JOB = "dgl-operator"


class PrometheusServer:
    """A Prometheus on 127.0.0.1 scraping the operator and evaluating the chart's rules."""

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        target: str,
        scrape_configs: list[Obj] | None = None,
    ) -> None:
        """``scrape_configs`` replace the one plain job scraping ``target``."""
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.log = workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(RULES)],
            "scrape_configs": scrape_configs
            or [
                {
                    "job_name": SCRAPE_JOB,
                    # Keep the job metrics' own namespace label (ServiceMonitor honorLabels).
                    "honor_labels": True,
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))

    def start(self) -> PrometheusServer:
        argv = [
            str(self.binary),
            f"--config.file={self.config}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with self.log.open("ab") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=self.workdir)
        wait_for(self.ready, what="Prometheus to be ready", timeout=60, interval=0.2)
        return self

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited ({self.proc.returncode}):\n{self.tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as r:
                return int(r.status) == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}{query}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:  # 400/422: a bad query; the body says why
            body = json.loads(e.read())
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[Obj]:
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), data
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """The value of a one-element result, None when empty."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr}: {result}"
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        stop_process(self.proc)

    def tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-n:])
