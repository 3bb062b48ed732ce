"""controller/memo.py: a feature's own record of a job (JobMemo.of) is made once, kept between
syncs and dropped with the job's."""

from __future__ import annotations

from dataclasses import dataclass

from controller.lifecycle.queued import QueueMemo
from controller.memo import JobMemos


@dataclass
class Other:
    seen: int = 0


def test_a_features_record_is_made_once_and_goes_with_the_job() -> None:
    memos = JobMemos()
    queue = memos["ns/a"].of(QueueMemo)
    queue.placement_of = "admitted"
    assert memos["ns/a"].of(QueueMemo) is queue
    assert memos["ns/a"].of(Other) == Other()  # (one record per type)
    assert memos["ns/b"].of(QueueMemo) == QueueMemo()  # (one per job)
    forgotten = memos.forget("ns/a")
    assert forgotten is not None and forgotten.of(QueueMemo).placement_of == "admitted"
    assert memos["ns/a"].of(QueueMemo) == QueueMemo()
