"""The real GraphSAGE training entry point, except that trainer rank $CRASH_RANK dies with exit
code 1 once it finished $CRASH_AFTER_EPOCH epochs (failure injection for the pipeline tests)."""

import os
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "graphsage"
sys.path.insert(0, str(EXAMPLE))

import common  # noqa: E402
import train_dist  # noqa: E402

if os.environ.get("DGL_ROLE") == "client" and os.environ.get("RANK") == os.environ.get(
    "CRASH_RANK"
):
    real_train_epoch = common.train_epoch
    epochs = [0]

    def train_epoch(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_train_epoch(*args, **kwargs)
        epochs[0] += 1
        if epochs[0] >= int(os.environ.get("CRASH_AFTER_EPOCH", "1")):
            print("crash_train: exiting with code 1", flush=True)
            os._exit(1)
        return result

    common.train_epoch = train_epoch

sys.exit(train_dist.run())
