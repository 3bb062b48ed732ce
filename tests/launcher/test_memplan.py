"""The memory plan: estimates from the graph's sizes, the check against the pods' limit, and
dglrun failing at once (before partitioning) with a message naming the step, the estimate, the
limit and what to change; with a limit that fits, the estimates next to the measured peaks."""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from chunkedgraph.job import KAMINPAR, PTSCOTCH
from launcher.plans import memory as memplan
from launcher.plans.memory import GiB, GraphSize, OutOfCore, PlanError, Shape
from tests.launcher.chunked_graph import write_graph
from tests.launcher.helpers import FIXTURES, dglrun

# ~ogbn-products: 2.45M nodes, 124M directed edges, 100 float32 features + label + masks
PRODUCTS = GraphSize(2_449_029, 123_718_280, 411)
SMALL = GraphSize(20_000, 200_000, 139)


def shape(mode: str, workers: int = 2, ranks: int = 2, partitioner: str = KAMINPAR) -> Shape:
    one_each = memplan.Processes(servers=1, trainers=1)
    return Shape(mode, workers, workers, ranks, one_each, partitioner=partitioner)


def test_estimates_grow_with_the_graph_and_shrink_with_more_workers() -> None:
    for mode in ("DGL-API", "ParMETIS", "DistParMETIS"):
        small, big = (memplan.plan(g, shape(mode), None) for g in (SMALL, PRODUCTS))
        assert [s.name for s in big] == ["partition", "train"]
        for a, b in zip(small, big, strict=True):
            assert a.estimate < b.estimate, (mode, a, b)
        four = memplan.plan(PRODUCTS, shape(mode, workers=4), None)
        assert four[1].estimate < big[1].estimate  # smaller partitions per worker
    one = memplan.partition_step(PRODUCTS, shape("DGL-API"), None).estimate
    for partitioner in (KAMINPAR, PTSCOTCH):
        dist4, dist8 = (
            memplan.partition_step(
                PRODUCTS, shape("DistParMETIS", workers=w, partitioner=partitioner), None
            ).estimate
            for w in (4, 8)
        )
        assert dist8 < dist4 and dist4 < one  # each worker's rank holds its share
    # (PT-Scotch: nothing but the share, which halves; KaMinPar: rank 0 holds the structure)
    assert dist8 < dist4 * 0.55
    # ParMETIS: the ranks share the partitioner pod, whose total is what must fit
    pm2 = memplan.partition_step(PRODUCTS, shape("ParMETIS", ranks=2), None)
    pm4 = memplan.partition_step(PRODUCTS, shape("ParMETIS", ranks=4), None)
    assert pm2.what == "2 ParMETIS ranks" and pm2.where == "the partitioner pod"
    assert pm4.estimate > pm2.estimate * 0.9  # more ranks: no less memory in one pod


def test_a_step_that_does_not_fit_names_step_estimate_limit_and_the_way_out() -> None:
    limit = 8 * GiB
    steps = memplan.plan(PRODUCTS, shape("DGL-API"), limit)
    assert not steps[0].fits
    with pytest.raises(PlanError) as err:
        memplan.check(PRODUCTS, shape("DGL-API"), steps)
    text = str(err.value)
    assert text.startswith("memory plan: the partition step needs ~")
    assert f"{steps[0].estimate / GiB:.1f} GiB" in text and "limit of 8.0 GiB" in text
    assert "the partitioner pod" in text and "2,449,029 nodes" in text
    assert "resources.limits.memory" in text  # the field to change
    assert "partitionMode DistParMETIS" in text and "raise the Worker memory limit" in text


def test_training_that_does_not_fit_asks_for_more_workers() -> None:
    g = GraphSize(2_000_000, 40_000_000, 411)
    train = memplan.train_step(g, shape("DistParMETIS"), None)
    limit = int(train.estimate * 0.8)
    steps = memplan.plan(g, shape("DistParMETIS", workers=2), limit)
    bad = next(s for s in steps if not s.fits)
    with pytest.raises(PlanError, match=r"use \d+ or more workers") as err:
        memplan.check(g, shape("DistParMETIS"), steps)
    assert f"the {bad.name} step" in str(err.value)


def test_a_limit_that_fits_passes_and_reports() -> None:
    steps = memplan.plan(SMALL, shape("DGL-API"), 64 * GiB)
    memplan.check(SMALL, shape("DGL-API"), steps)  # no error
    status = memplan.status(steps, {"train": 1200.0})
    assert set(status) == {"partition", "train"}
    assert status["train"]["peakMiB"] == 1200 and status["train"]["limitMiB"] == 64 * 1024
    assert "peakMiB" not in status["partition"]
    # a peak of a step this process did not plan (the launcher of a partitioner's plan)
    assert memplan.status([], {"train": 1294.4}) == {"train": {"peakMiB": 1294}}
    table = memplan.table(steps, {"train": 1200.0})
    assert "partition (the partition entry point" in table and "not measured" in table
    assert "1.2 GiB measured of 64.0 GiB" in table


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("nodes=10", "nodes= and edges= are required"),
        ("nodes=10,edges=x", "edges='x' is not an integer"),
        ("nodes=10,edges=5,colour=3", "expected nodes=N,edges=E"),
        ("nodes=-1,edges=5", "nodes must not be negative"),
    ],
)
def test_bad_graph_sizes_are_named(text: str, error: str) -> None:
    with pytest.raises(PlanError, match=error):
        memplan.parse_graph_size(text)


def test_graph_size_and_quantities_parse() -> None:
    g = memplan.parse_graph_size("nodes=10,edges=24,node_bytes=13")
    assert (g.nodes, g.edges, g.node_bytes, g.edge_bytes) == (10, 24, 13, 0)
    assert memplan.parse_bytes("8Gi") == 8 * GiB
    assert memplan.parse_bytes("512M") == 512 * 10**6
    assert memplan.parse_bytes("1073741824") == GiB
    assert memplan.parse_bytes("6k") == 6000 and memplan.parse_bytes("6Ki") == 6144
    for bad in ("lots", "-1Gi", "0", "6K"):
        with pytest.raises(PlanError, match="memory limit"):
            memplan.parse_bytes(bad)
    with pytest.raises(PlanError, match="K is not a suffix: k is 1000, Ki is 1024"):
        memplan.parse_bytes("6K")


def test_a_chunked_graphs_sizes_come_from_its_files(tmp_path: Path) -> None:
    g = memplan.chunked_graph_size(write_graph(tmp_path / "g"))
    # 10 nodes, 24 edges; node data: 3 float32 features + a bool mask per node
    assert (g.nodes, g.edges, g.node_bytes, g.edge_bytes) == (10, 24, 13, 0)
    with pytest.raises(PlanError, match=r"metadata\.json"):
        memplan.chunked_graph_size(tmp_path / "missing")


def test_the_workers_check_reports_the_plans_sizes(tmp_path: Path) -> None:
    """In DistParMETIS the launcher does not see the graph: worker 0's check of its chunks
    reports the sizes the plan needs, parsed back as the same GraphSize."""
    from chunkedgraph.__main__ import main as chunked_check
    from launcher.partition import parmetis_modes

    path = write_graph(tmp_path / "g")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert chunked_check(["check", str(path), "--ranks", "2", "--rank", "0"]) == 0
    doc = json.loads(out.getvalue().strip().splitlines()[-1])
    size = parmetis_modes._size_of(doc, "worker-0:/data/g")
    want = memplan.chunked_graph_size(path)
    assert size is not None and (size.nodes, size.edges, size.node_bytes, size.edge_bytes) == (
        want.nodes, want.edges, want.node_bytes, want.edge_bytes
    )  # fmt: skip
    assert (
        parmetis_modes._size_of({"num_nodes": 10, "num_edges": 24}, "w") is None
    )  # an older dglrun


def test_the_console_keeps_peaks_apart_from_what_a_process_said() -> None:
    from launcher.console import Console
    from launcher.workers.remote import PEAK_LINE

    console = Console(write=lambda _: None)
    console.line("worker-0/pull", "pull: error: part 0: checksum mismatch")
    console.line("worker-0/pull", PEAK_LINE.format(mib=23.5))
    assert console.last_line("worker-0/pull") == "pull: error: part 0: checksum mismatch"
    assert console.peaks() == {"worker-0/pull": 23.5}


def test_a_worker_pods_train_peak_is_its_largest_sample_not_its_processes_added_up() -> None:
    """The e2e out-of-core job's figures (ci19): a server and a trainer whose peak resident
    memory adds up to 2422 MiB under a 1792 MiB limit, which the pod cannot have held: both
    count the shared-memory graph and the mapped feature files. The pod's samples say 1350."""
    from launcher.console import Console, Report
    from launcher.report.outcome import measured_peaks
    from launcher.workers.remote import PEAK_LINE
    from podcontract.logline import MEMORY_LINE

    def console_of(samples: bool) -> Console:
        console = Console(write=lambda _: None)
        for worker, shift in (("worker-0", 0), ("worker-1", -40)):
            if samples:
                for proc, mib in (("server-0", 900), ("trainer-0", 1350), ("server-0", 1200)):
                    console.line(f"{worker}/{proc}", MEMORY_LINE.format(mib=mib + shift))
                # a DistParMETIS rank's sample in the same pod is the partition step's
                console.line(f"{worker}/distpart", MEMORY_LINE.format(mib=1700))
            console.line(f"{worker}/server-0", PEAK_LINE.format(mib=1180 + shift))
            console.line(f"{worker}/trainer-0", PEAK_LINE.format(mib=1242 + shift))
        return console

    assert measured_peaks("ParMETIS", Report(), console_of(samples=True)) == {"train": 1350}
    # without samples (dglrun's local transport), the processes' peaks added up: the
    # over-count the samples replace, which an e2e bound of peakMiB <= limitMiB would catch
    added = measured_peaks("ParMETIS", Report(), console_of(samples=False))
    assert added == {"train": 2422} and added["train"] > 1792
    assert console_of(samples=True).last_line("worker-0/trainer-0") == ""  # samples aren't words


# -- through dglrun (local transport, stand-in entry points) -----------------------------------


def local(ws: Path, *extra: str) -> list[str]:
    return [
        "--transport", "local", "-g", "g", "--num-partitions", "2", "--workspace", str(ws),
        "--partition-entry-point", str(FIXTURES / "fake_partition.py"),
        "--train-entry-point", str(FIXTURES / "fake_train.py"), *extra,
    ]  # fmt: skip


def test_dglrun_refuses_a_graph_too_big_for_the_limit_before_partitioning(
    tmp_path: Path, no_leftovers: None
) -> None:
    size = "nodes=2449029,edges=123718280,node_bytes=411"
    proc = dglrun(*local(tmp_path, "--graph-size", size, "--worker-memory-limit", "4Gi"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: memory plan: the partition step needs ~"), last
    assert "limit of 4.0 GiB" in last and "DistParMETIS" in last
    assert "[1/5] partition" not in proc.stdout  # nothing was started
    assert "memory plan for 2,449,029 nodes" in proc.stdout


def test_dglrun_reports_estimates_next_to_measured_peaks(
    tmp_path: Path, no_leftovers: None
) -> None:
    size = "nodes=1000,edges=10000,node_bytes=64"
    proc = dglrun(*local(tmp_path, "--graph-size", size, "--worker-memory-limit", "64Gi"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # every server and trainer ran under launcher.workers.remote, which reported its peak
    for label in ("worker-0/server-0", "worker-1/trainer-0"):
        assert f"[{label}] launcher.remote: peak memory " in out
    final = [ln for ln in out.splitlines() if ln.startswith("  memory: ")][-2:]
    assert final[0].startswith("  memory: partition (the partition entry point")
    assert "measured of 64.0 GiB" in final[0] and "measured of 64.0 GiB" in final[1], final


def test_without_sizes_the_plan_is_skipped_with_a_hint(tmp_path: Path, no_leftovers: None) -> None:
    proc = dglrun(*local(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "memory plan: skipped: the graph's sizes are unknown (give dglrun --graph-size" in (
        proc.stdout
    )


def test_a_bad_limit_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    proc = dglrun(*local(tmp_path, "--worker-memory-limit", "lots"))
    assert proc.returncode == 2
    assert "--worker-memory-limit: memory limit 'lots' is not a quantity" in proc.stderr


def test_a_worker_without_the_first_chunks_checks_its_own_and_reports_no_sizes(
    tmp_path: Path,
) -> None:
    """PerWorker: worker 1 holds only its own chunks, not the first ones the sizes are read
    from; its check still passes (worker 0 reports the sizes)."""
    from chunkedgraph.__main__ import main as chunked_check

    path = write_graph(tmp_path / "g")
    for first in (tmp_path / "g").rglob("*-0.*"):
        first.unlink()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = chunked_check(["check", str(path), "--ranks", "2", "--layout", "PerWorker",
                             "--rank", "1"])  # fmt: skip
    doc = json.loads(out.getvalue().strip().splitlines()[-1])
    assert code == 0 and "node_bytes" not in doc, doc
    with pytest.raises(PlanError, match="cannot read it"):
        memplan.chunked_graph_size(path)


# The per-rank peaks DistParMETIS measured with each partitioner in one run of
# bench/distpart_bench.py --products (2026-11-28; P ranks, P parts; the largest step's peak of
# each rank: writing a part on 500k nodes, PT-Scotch or the shuffle on the larger graphs;
# PT-Scotch's 32-bit build, its 3 parts 64 fine parts grouped): the model must stay within 25 %
# of them.
BENCH_500K = GraphSize(500_000, 10_000_000, 64 * 4 + 8 + 3)  # make_dataset.py's
BENCH_2M = GraphSize(2_000_000, 40_000_000, 100 * 4 + 8 + 3)
MEASURED_DISTPARMETIS = [
    (graph, workers, partitioner, peak)
    for partitioner, peaks in (
        (PTSCOTCH, [786, 800, 2742, 2048, 5654, 3882]),
        (KAMINPAR, [819, 768, 2079, 1811, 5686, 3879]),
    )
    for (graph, workers), peak in zip(
        [(g, w) for g in (BENCH_500K, BENCH_2M, PRODUCTS) for w in (2, 3)], peaks, strict=True
    )
]


@pytest.mark.parametrize(("graph", "workers", "partitioner", "peak_mib"), MEASURED_DISTPARMETIS)
def test_the_distparmetis_estimate_is_within_a_quarter_of_the_measured_peak(
    graph: GraphSize, workers: int, partitioner: str, peak_mib: int
) -> None:
    step = memplan.partition_step(
        graph, shape("DistParMETIS", workers=workers, partitioner=partitioner), None
    )
    est = step.estimate / memplan.MiB
    assert 0.75 * peak_mib <= est <= 1.25 * peak_mib, (est, peak_mib)


def test_a_distparmetis_rank_holds_its_share_so_the_estimate_falls_as_one_over_p() -> None:
    """With PT-Scotch every rank holds its share; with KaMinPar rank 0 also holds the whole
    structure, once (20 B a directed edge), which is all that does not fall as 1/P."""
    single = memplan.partition_step(PRODUCTS, shape("DGL-API"), None).estimate
    structure = memplan.COSTS["kaminpar-graph"].bytes(PRODUCTS.nodes, PRODUCTS.edges, 0, 0)
    for partitioner, fixed in ((PTSCOTCH, 0.0), (KAMINPAR, structure)):
        est = {
            p: memplan.partition_step(
                PRODUCTS, shape("DistParMETIS", workers=p, partitioner=partitioner), None
            ).estimate
            for p in (1, 2, 3, 6)
        }
        for p in (2, 3, 6):
            assert est[p] <= 1.05 * est[1] / p + fixed + 512 * memplan.MiB, (p, est)
        assert est[3] < 0.4 * single


def test_the_plan_says_how_many_workers_the_graph_needs_at_this_limit() -> None:
    limit = 8 * GiB
    fewest = memplan.fewest_workers(PRODUCTS, shape("DGL-API"), limit)
    assert fewest is not None and fewest > 1
    fits = memplan.plan(PRODUCTS, shape("DistParMETIS", workers=fewest), limit)
    short = memplan.plan(PRODUCTS, shape("DistParMETIS", workers=fewest - 1), limit)
    assert all(s.fits for s in fits) and not all(s.fits for s in short)
    line = memplan.workers_line(PRODUCTS, shape("DGL-API"), limit)
    assert line == (
        f"  workers: with partitionMode DistParMETIS this graph needs at least {fewest} "
        "worker(s) of 8.0 GiB (partition and train); this job has 2"
    )
    assert memplan.workers_line(PRODUCTS, shape("DGL-API"), None) is None
    tiny = memplan.workers_line(PRODUCTS, shape("DGL-API"), 64 * memplan.MiB)
    assert tiny == "  workers: no number of workers up to 256 fits 0.1 GiB per pod"


# -- out of core ------------------------------------------------------------------------------

# ~2 GiB of float32 node features per worker (1M nodes, 1024 features), degree 10
WIDE = GraphSize(1_000_000, 10_000_000, 4 * 1024 + 11)


def test_training_that_does_not_fit_in_memory_names_the_out_of_core_option() -> None:
    sh = shape("DistParMETIS")
    in_memory = memplan.train_step(WIDE, sh, None)
    ooc = memplan.train_step(WIDE, replace(sh, out_of_core=OutOfCore(True)), None)
    assert ooc.smallest is not None and ooc.smallest < ooc.estimate < in_memory.estimate
    limit = (ooc.estimate + in_memory.estimate) // 2  # enough out of core, not in memory
    steps = [memplan.train_step(WIDE, sh, limit)]
    with pytest.raises(PlanError) as err:
        memplan.check(WIDE, sh, steps)
    text = str(err.value)
    assert text.startswith("memory plan: the train step needs ~"), text
    assert "spec.outOfCore.enabled: true (dglrun --out-of-core)" in text, text
    assert f"from ~{ooc.smallest / GiB:.1f} GiB per worker pod" in text, text
    assert f"~{ooc.estimate / GiB:.1f} GiB with page cache for 0.5 of the features" in text
    assert "does not fit either" not in text
    # out of core at that limit: it fits, and the plan says what it is made of
    fits = memplan.train_step(WIDE, replace(sh, out_of_core=OutOfCore(True)), limit)
    assert fits.fits and fits.what.endswith(", out of core")
    memplan.check(WIDE, sh, [fits])


def test_out_of_core_fits_down_to_its_smallest_limit_and_says_what_page_cache_is_left() -> None:
    sh = replace(shape("DistParMETIS"), out_of_core=OutOfCore(True, page_cache_fraction=0.5))
    step = memplan.train_step(WIDE, sh, None)
    assert step.smallest is not None
    features = WIDE.nodes / 2 * WIDE.node_bytes
    assert step.estimate - step.smallest == pytest.approx(0.5 * features, rel=1e-6)
    # more page cache asked: a larger estimate, the same smallest limit
    more = memplan.train_step(
        WIDE, replace(sh, out_of_core=OutOfCore(True, page_cache_fraction=1.0)), None
    )
    assert more.estimate > step.estimate and more.smallest == step.smallest
    # a bigger batch: a bigger sampling working set
    bigger = memplan.train_step(WIDE, replace(sh, batch_size=4000), None).smallest
    assert bigger is not None and bigger > step.smallest
    between = memplan.train_step(WIDE, sh, (step.smallest + step.estimate) // 2)
    assert between.fits
    line = memplan.out_of_core_line(between, sh)
    assert line.startswith("  out of core: structure ") and "page cache 0.5 x " in line
    assert f"smallest worker memory limit it runs in is ~{step.smallest / GiB:.1f} GiB" in line
    assert "warning: the limit leaves page cache for ~0.25 of the node data, not 0.5" in line
    below = memplan.train_step(WIDE, sh, int(step.smallest * 0.9))
    assert not below.fits
    with pytest.raises(PlanError) as err:
        memplan.check(WIDE, sh, [below])
    text = str(err.value)
    assert f"the train step needs ~{step.smallest / GiB:.1f} GiB in each worker pod" in text
    assert "out of core, for 1,000,000 nodes" in text and "at least the first two" in text
    assert f"raise the Worker memory limit to at least {step.smallest * 1.1 / GiB:.1f}" in text
    assert re.search(r"use \d+ or more workers", text)  # smaller partitions, less structure


def test_buffer_order_counts_its_edge_mask_and_ids_and_says_its_buffer() -> None:
    sh = replace(shape("DistParMETIS"), out_of_core=OutOfCore(True, page_cache_fraction=0.25))
    exact = memplan.train_step(WIDE, sh, None)
    buffered = memplan.train_step(
        WIDE, replace(sh, out_of_core=OutOfCore(True, 0.25, order="Buffer")), None
    )
    per_edge = WIDE.edges / 2 * memplan.BUFFER_EDGE_BYTES  # per edge of the partition
    assert buffered.estimate - exact.estimate == pytest.approx(per_edge, rel=1e-6)
    assert "buffer order: 3 of 16 partitions of it in memory at a time" in buffered.detail
    assert "buffer order" not in exact.detail


@pytest.mark.parametrize(
    ("fraction", "capacity"), [(0.0, 1), (0.1, 1), (0.25, 3), (0.5, 7), (0.99, 14), (1.0, 16)]
)
def test_the_buffer_fits_the_page_cache_the_plan_counts(fraction: float, capacity: int) -> None:
    held = memplan.buffer_capacity(fraction)
    assert held == capacity
    # the buffer and the partition read ahead fit the fraction's share (1 of 16 at least)
    assert held == 16 or (held + 1) / 16 <= max(fraction, 2 / 16) + 1e-9


def test_dglrun_plans_out_of_core_and_refuses_samplers_it_cannot_patch(
    tmp_path: Path, no_leftovers: None
) -> None:
    size = "nodes=1000000,edges=10000000,node_bytes=4107"
    bad = dglrun(*local(tmp_path, "--out-of-core", "--num-samplers", "2"))
    assert bad.returncode == 2 and "--out-of-core with --num-samplers 2" in bad.stderr
    frac = dglrun(*local(tmp_path, "--out-of-core", "--page-cache-fraction", "1.5"))
    assert frac.returncode == 2
    assert "--page-cache-fraction: '1.5' is not a fraction between 0 and 1" in frac.stderr
    env = {"DGL_OPERATOR_OUT_OF_CORE": "true", "DGL_OPERATOR_PAGE_CACHE_FRACTION": "0.25"}
    ooc = dglrun(*local(tmp_path, "--graph-size", size, "--worker-memory-limit", "2Gi"), env=env)
    out = ooc.stdout  # (refused too: partitioning still holds the features, in one process)
    assert ooc.returncode == 1 and "the partition step needs" in out.splitlines()[-1]
    assert "[1/5] partition" not in out
    assert "(1 DGL server(s) and 1 trainer(s), out of core, each worker pod)" in out, out[-3000:]
    assert "  out of core: structure " in out and "page cache 0.25 x " in out


def test_an_elastic_jobs_counts_are_partitioned_for_only_where_they_fit() -> None:
    """The first attempt partitions for every count of [min, max] (launcher.phases
    fitting_counts): a count whose training would not fit the limit is left out, said; the
    partition step is planned with this attempt's ranks writing that count's bigger parts."""
    from chunkedgraph.job import PartitionJob
    from launcher.console import Console
    from launcher.partition.request import PartitionRequest
    from launcher.phases import PartitionStep, fitting_counts

    g = PRODUCTS
    limit = int(6.75 * GiB)
    job = PartitionJob("g", 3, counts=(1, 2, 3))
    said: list[str] = []
    console = Console(said.append)
    plan = memplan.PlanInput(shape("DistParMETIS", workers=3, ranks=3), limit, None, None)
    step = PartitionStep(PartitionRequest("DistParMETIS", job, "python3", Path("/w")), None, plan)
    kept = fitting_counts(step, g, console)
    assert kept.job.every_count() == (3, 2)  # (2 workers train in 6.5 GiB; 1 needs more)
    (line,) = said
    assert line.startswith("  1 workers would not fit the Worker's memory limit (partition step:")
    assert line.endswith("no partitions made for that count")
    assert fitting_counts(step, None, console).job.every_count() == (3, 1, 2)  # sizes unknown


# bench/out_of_core_bench.py's measured floors (rss + shmem of a worker's cgroup, plus the
# libraries' pages), on its products-shaped graphs (degree 10, 2 workers, 1 server and 1
# trainer each, batch 1000, fan-out 10,10), 2026-12-07: (nodes, features, GiB)
MEASURED_FLOORS = (
    (300_000, 1024, 1.26),
    (1_000_000, 1024, 1.52),
    (1_000_000, 128, 1.13),
    (2_000_000, 128, 1.35),
)


def _smallest(nodes: int, features: int) -> float:
    g = GraphSize(nodes, 10 * nodes, 4 * features + 11)
    step = memplan.train_step(g, replace(shape("ParMETIS"), out_of_core=OutOfCore(True)), None)
    assert step.smallest is not None
    return step.smallest / GiB


@pytest.mark.parametrize(("nodes", "features", "floor"), MEASURED_FLOORS)
def test_the_out_of_core_model_is_within_a_tenth_of_the_measured_floor(
    nodes: int, features: int, floor: float
) -> None:
    """The smallest limit the plan names, against the floor the bench measured on that graph:
    what a worker held that the kernel cannot drop, with no limit, plus its libraries' pages
    (issue 59 asks for the estimate within 25%)."""
    assert _smallest(nodes, features) == pytest.approx(floor, rel=0.1)


def test_the_measured_floors_tell_a_model_that_counts_too_much(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The twin: the model before (three copies of a minibatch's rows, the trainer's
    structure counted again as its resident set counts it) is outside the tenth on every
    graph with wide rows."""
    monkeypatch.setattr(memplan, "WORKING_COPIES", 3.0)
    monkeypatch.setitem(memplan.OUT_OF_CORE_COSTS, "trainer", memplan.COSTS["trainer"])
    for nodes, features, floor in MEASURED_FLOORS:
        if features == 1024:
            assert _smallest(nodes, features) > 1.1 * floor, (nodes, features)
