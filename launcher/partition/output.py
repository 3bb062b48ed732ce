"""Partition output as written by dgl.distributed.partition_graph: find, verify, select."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher import checksums, jsonfile
from launcher.errors import LauncherError

# a worker's folder under its workspace: its part (DistParMETIS writes it there; the other
# counts of an elastic job beside it, workload@<count>), ip_config, output
WORKLOAD = "workload"


class PartitionError(LauncherError, ValueError):
    pass


@dataclass(frozen=True)
class PartitionSet:
    config: Path  # <graph>.json
    num_parts: int
    files: dict[int, list[str]]  # part -> file paths relative to the config's folder

    @property
    def root(self) -> Path:
        return self.config.parent

    def part_dir(self, part: int) -> str:
        """The folder of one part, relative to the config's folder (e.g. 'part0')."""
        tops = {Path(f).parts[0] for f in self.files[part]}
        if len(tops) != 1:
            raise PartitionError(f"{self.config}: part-{part} files are not in one folder: {tops}")
        return tops.pop()


def find_config(dataset_dir: Path, graph_name: str, explicit: str | None = None) -> Path:
    if explicit:
        path = Path(explicit)
        if not path.is_absolute():
            path = dataset_dir / path
        if not path.is_file():
            raise PartitionError(f"--partition-config-path {path} does not exist")
        return path
    path = dataset_dir / f"{graph_name}.json"
    if path.is_file():
        return path
    found = sorted(dataset_dir.glob("*.json")) if dataset_dir.is_dir() else []
    if len(found) == 1:
        return found[0]
    listing = ", ".join(p.name for p in found) or "nothing"
    raise PartitionError(
        f"no partition config {path.name} in {dataset_dir} (found {listing}); did the partition "
        "entry point call dgl.distributed.partition_graph with --graph_name and "
        "out_path=<workspace>/<rel_data_path>?"
    )


def load(
    config: Path, expected_parts: int | None = None, *, check_files: bool = True
) -> PartitionSet:
    """Read and verify a partition config: every part's files exist (unless they live
    elsewhere: ``check_files`` False, as on the launcher in DistParMETIS mode)."""
    try:  # (bounded: a cache entry's config may be another job's, or planted)
        meta = jsonfile.read(config)
    except (OSError, jsonfile.Unreadable) as e:
        raise PartitionError(f"cannot read partition config {config}: {e}") from e
    assert isinstance(meta, dict)
    num_parts = meta.get("num_parts")
    if not isinstance(num_parts, int) or num_parts < 1:
        raise PartitionError(f"{config}: num_parts is missing or invalid ({num_parts!r})")
    if expected_parts is not None and num_parts != expected_parts:
        raise PartitionError(
            f"{config}: the graph has {num_parts} partitions but {expected_parts} were expected"
        )
    files: dict[int, list[str]] = {}
    for i in range(num_parts):
        entry = meta.get(f"part-{i}")
        if not isinstance(entry, dict) or not entry:
            raise PartitionError(f"{config}: no entry part-{i}")
        paths = [str(v) for v in entry.values() if isinstance(v, str)]
        for rel in paths:
            if checksums.outside(rel) is not None:
                raise PartitionError(f"{config}: part-{i} path {rel!r} must be relative and inside")
            if check_files and not (config.parent / rel).exists():
                raise PartitionError(f"{config}: part-{i} file {rel} is missing")
        files[i] = paths
    return PartitionSet(config, num_parts, files)
