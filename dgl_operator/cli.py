"""``dglctl``: the client's verbs in a shell, with kubectl's look.

    dglctl submit examples/graphsage/dgljob-storage.yaml [--dry-run]
    dglctl list [-A] [-o wide|json]     dglctl get NAME [-o json]
    dglctl logs NAME [-f]               dglctl progress NAME
    dglctl wait NAME [--for Succeeded] [--timeout 1h]
    dglctl results NAME ./results [--checkpoints] [--overwrite]
    dglctl events NAME                  dglctl suspend|resume|delete NAME
    dglctl report NAME [-o report.html] [--watch] [--no-claim]

Global flags: ``-n/--namespace``, ``--context``, ``--kubeconfig``. A failure prints one line,
``error: ...``, and exits 1 (2 for a usage error); ``wait`` exits 1 when the job fails.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dgl_operator.client import (
    DGLJobClient,
    DGLJobError,
    InvalidJob,
    JobProgress,
    ReportOptions,
)
from dgl_operator.report.readings import Readings
from dgljob.names import GROUP
from kubeclient import KubeError

RESOURCE = f"dgljob.{GROUP}"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def duration(text: str) -> float:
    """kubectl's durations: ``90``, ``90s``, ``30m``, ``1h``, ``2d``."""
    m = _DURATION.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 90s, 30m, 1h)")
    return float(m.group(1)) * _UNIT[m.group(2)]


def age(stamp: str | None, now: datetime | None = None) -> str:
    """kubectl's AGE: ``45s``, ``12m``, ``3h``, ``5d``."""
    if not stamp:
        return "<unknown>"
    then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    s = max(int(((now or datetime.now(UTC)) - then).total_seconds()), 0)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 2 * 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def table(rows: list[list[str]]) -> str:
    """Columns padded as kubectl pads them (three spaces between)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def job_row(job: dict[str, Any], wide: bool, with_ns: bool) -> list[str]:
    meta, st = job["metadata"], job.get("status") or {}
    workers = ((st.get("replicaStatuses") or {}).get("Worker") or {}).get("ready") or ""
    row = [
        meta["name"],
        st.get("phase") or "",
        workers,
        (st.get("elastic") or {}).get("scale") or "",
        str(st.get("restartCount") or 0),
        st.get("progress") or "",
        JobProgress.of(job).eta,
        age(meta.get("creationTimestamp")),
    ]
    if wide:
        row.append(st.get("results") or "")
    return ([meta.get("namespace", "")] if with_ns else []) + row


def jobs_table(jobs: list[dict[str, Any]], wide: bool, with_ns: bool) -> str:
    # kubectl get dglj's columns (the CRD's additionalPrinterColumns), in its order
    head = ["NAME", "PHASE", "WORKERS", "SCALE", "RESTARTS", "PROGRESS", "ETA", "AGE"] + (
        ["RESULTS"] if wide else []
    )
    return table(
        [(["NAMESPACE"] if with_ns else []) + head] + [job_row(j, wide, with_ns) for j in jobs]
    )


def events_table(events: list[dict[str, Any]]) -> str:
    rows = [["LAST SEEN", "TYPE", "REASON", "SOURCE", "MESSAGE"]]
    for e in events:
        stamp = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        if stamp and "." in stamp:  # (eventTime carries microseconds)
            stamp = stamp.split(".")[0] + "Z"
        count = int(e.get("count") or 1)
        seen = age(stamp) + (f" (x{count})" if count > 1 else "")
        source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        rows.append(
            [seen, e.get("type") or "", e.get("reason") or "", source, e.get("message") or ""]
        )
    return table(rows)


def dump(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def global_flags(p: argparse.ArgumentParser) -> None:
    """The flags of every verb: where the jobs are."""
    p.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    p.add_argument("--context", help="the kubeconfig context to use")
    p.add_argument(
        "--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dglctl", description="Submit, follow and collect DGLJobs.")
    global_flags(p)
    # the same flags after the verb, as kubectl takes them (`dglctl report j -n team-a`); the
    # last one given wins, and one not given after the verb keeps what came before it
    after = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    global_flags(after)
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help: str, output: tuple[str, ...] = ("json",)) -> argparse.ArgumentParser:
        v = sub.add_parser(name, help=help, description=help, parents=[after])
        if output:
            v.add_argument("-o", "--output", choices=output, help="output format")
        return v

    v = verb("submit", "create a DGLJob from a YAML file", ("json", "name"))
    v.add_argument("file", nargs="?", help="the DGLJob's YAML file")
    v.add_argument("-f", "--filename", dest="file_flag", help="the same, as kubectl takes it")
    v.add_argument("--dry-run", action="store_true", help="validate on the server, create nothing")
    v = verb("get", "one DGLJob", ("json", "wide"))
    v.add_argument("name")
    v = verb("list", "the DGLJobs of the namespace", ("json", "wide", "name"))
    v.add_argument("-A", "--all-namespaces", action="store_true")
    v.add_argument("-l", "--selector", help="a label selector")
    v = verb("logs", "the launcher's log ([k/5] phases, the workers' output)", ())
    v.add_argument("name")
    v.add_argument(
        "-f", "--follow", action="store_true", help="until the job ends, across restarts"
    )
    v = verb("wait", "wait until the job succeeds (exit 1 when it fails)")
    v.add_argument("name")
    v.add_argument(
        "--for",
        dest="until",
        action="append",
        help="a condition or phase (default Succeeded; repeatable)",
    )
    v.add_argument(
        "--timeout", type=duration, help="give up after this long (30m, 1h; default: never)"
    )
    v = verb("progress", "draw the job's progress over its epochs until it ends", ())
    v.add_argument("name")
    v = verb("results", "copy the job's results from its claim to a local folder")
    v.add_argument("name")
    v.add_argument("dest", help="a new or empty folder")
    v.add_argument("--checkpoints", action="store_true", help="also the checkpoints")
    v.add_argument(
        "--overwrite", action="store_true", help="replace files of the same names in DEST"
    )
    v.add_argument(
        "--from",
        dest="source",
        metavar="CLAIM:/FOLDER",
        help="a deleted job's results (its status.results)",
    )
    v.add_argument("--image", help="the reader pod's image (default: the job's launcher image)")
    v = verb(
        "report",
        "write one HTML page of the job: every pod's timeline and memory, the partition's "
        "steps, the bytes moved, the events",
        (),
    )
    v.add_argument("name")
    v.add_argument("-o", "--output", dest="dest", help="the page (default: NAME-report.html)")
    v.add_argument(
        "--watch", action="store_true", help="rewrite it every --interval until the job ends"
    )
    v.add_argument("--interval", type=duration, default=10.0, help="(default 10s)")
    v.add_argument(
        "--no-claim",
        action="store_true",
        help="do not read the logs kept on the job's claim (no reader pod; the pods' logs only)",
    )
    v.add_argument("--image", help="the claim reader pod's image (default: the launcher's)")
    v = verb("events", "the job's events, oldest first")
    v.add_argument("name")
    for name, help in (
        ("suspend", "suspend the job (its pods are deleted)"),
        ("resume", "resume a suspended job"),
    ):
        v = verb(name, help)
        v.add_argument("name")
    v = verb("delete", "delete the job (and its pods)", ())
    v.add_argument("name")
    v.add_argument("--wait", action="store_true", help="until it is gone")
    return p


def run(a: argparse.Namespace, client: DGLJobClient) -> int:
    out = getattr(a, "output", None)
    if a.verb == "submit":
        path = a.file or a.file_flag
        if not path:
            raise DGLJobError("submit needs the DGLJob's YAML file (dglctl submit job.yaml)")
        job = client.create(path, dry_run=a.dry_run)
        if out == "json":
            dump(job.raw)
        elif out == "name":
            print(f"{RESOURCE}/{job.name}")
        else:
            print(f"{RESOURCE}/{job.name} created" + (" (server dry run)" if a.dry_run else ""))
    elif a.verb == "get":
        try:
            raw = client.get(a.name).raw
        except InvalidJob as e:  # (shown as stored: the operator failed it InvalidSpec)
            raw = e.raw
        dump(raw) if out == "json" else print(jobs_table([raw], out == "wide", False))
    elif a.verb == "list":
        jobs = client.list_raw(all_namespaces=a.all_namespaces, selector=a.selector)
        if out == "json":
            dump({"apiVersion": "v1", "kind": "List", "items": jobs})
        elif out == "name":
            for j in jobs:
                print(f"{RESOURCE}/{j['metadata']['name']}")
        elif not jobs:
            where = "any namespace" if a.all_namespaces else f"{client.namespace} namespace"
            print(f"No resources found in {where}.", file=sys.stderr)
        else:
            print(jobs_table(jobs, out == "wide", a.all_namespaces))
    elif a.verb == "logs":

        def waiting(what: str) -> None:
            print(f"dglctl: {what}", file=sys.stderr, flush=True)

        lines = 0
        for line in client.logs(a.name, follow=a.follow, on_wait=waiting if a.follow else None):
            print(line, flush=True)
            lines += 1
        if not lines and not a.follow:
            phase = client.get(a.name).status.get("phase") or "Pending"
            waiting(f"dgljob {a.name} has no launcher log yet (phase {phase}): -f waits for it")
    elif a.verb == "wait":
        until = tuple(a.until or ["Succeeded"])
        job = client.wait(a.name, until=until, timeout=a.timeout)
        if out == "json":
            dump(job.raw)
        else:
            print(f"{RESOURCE}/{a.name} condition met")
    elif a.verb == "progress":
        last: JobProgress = client.show_progress(a.name)
        return 1 if last.ended == "Failed" else 0
    elif a.verb == "results":
        res = client.results(
            a.name,
            a.dest,
            checkpoints=a.checkpoints,
            overwrite=a.overwrite,
            source=a.source,
            image=a.image,
        )
        if out == "json":
            dump({"dest": str(res.dest), "claim": res.source.claim, "folder": res.source.run,
                  "job": res.source.job, "files": res.files, "bytes": res.bytes})  # fmt: skip
        else:
            print(res)
    elif a.verb == "report":
        dest = Path(a.dest or f"{a.name}-report.html")

        def wrote(r: Readings) -> None:
            print(f"{dest}: {r.ended or r.phase}, {len(r.bars)} bars, {len(r.memory)} pods' memory",
                  file=sys.stderr if a.watch else sys.stdout, flush=True)  # fmt: skip

        options = ReportOptions(a.watch, a.interval, claim=not a.no_claim, image=a.image)
        client.report(a.name, dest, options, on_write=wrote)
        if a.watch:
            print(f"{dest}: written (the job ended)")
    elif a.verb == "events":
        events = client.events(a.name)
        if out == "json":
            dump({"apiVersion": "v1", "kind": "List", "items": events})
        elif not events:
            print(f"No events found for {RESOURCE}/{a.name}.", file=sys.stderr)
        else:
            print(events_table(events))
    elif a.verb in ("suspend", "resume"):
        job = client.suspend(a.name) if a.verb == "suspend" else client.resume(a.name)
        dump(job.raw) if out == "json" else print(f"{RESOURCE}/{a.name} {a.verb}d")
    elif a.verb == "delete":
        client.delete(a.name, wait=a.wait)
        print(f'{RESOURCE} "{a.name}" deleted')
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    a = parser().parse_args(argv)
    started = time.monotonic()
    try:
        client = DGLJobClient(a.namespace, context=a.context, kubeconfig=a.kubeconfig)
        return run(a, client)
    except (DGLJobError, KubeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dglctl: interrupted after {time.monotonic() - started:.0f}s", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
