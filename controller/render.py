"""``python -m controller.render job.yaml``: print the children the operator would create.

A dry run of the builders for a DGLJob manifest (validation included), useful to review what
a job will look like before applying it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import yaml

from controller.api import SpecError, parse_job
from controller.builders import BuildOptions, desired


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m controller.render", description=__doc__)
    p.add_argument("manifest", help="a DGLJob YAML file")
    p.add_argument("--namespace", default="default", help="namespace if the manifest has none")
    a = p.parse_args(argv)
    try:
        with open(a.manifest, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except OSError as e:
        print(f"error: cannot read {a.manifest}: {e.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as e:
        print(f"error: {a.manifest} is not valid YAML: {e}", file=sys.stderr)
        return 2
    jobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DGLJob"]
    if not jobs:
        print(f"error: {a.manifest} holds no DGLJob", file=sys.stderr)
        return 2
    out = []
    for raw in jobs:
        raw.setdefault("metadata", {}).setdefault("namespace", a.namespace)
        raw["metadata"].setdefault("uid", "00000000-0000-0000-0000-000000000000")
        try:
            job = parse_job(raw)
        except SpecError as e:
            print(f"error: {a.manifest}: {e}", file=sys.stderr)
            return 1
        d = desired(job, BuildOptions())
        children = [d.config_map] if d.config_map else []
        children += [*d.rbac, *d.services, *d.workers]
        children += [d.partitioner] if d.partitioner else []
        children.append(d.launcher)
        out.extend(children)
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
