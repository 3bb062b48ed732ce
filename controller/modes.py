"""What each ``spec.partitionMode`` means: :mod:`dgljob.modes` (re-exported for the
controller's modules that import it from here)."""

from dgljob.modes import MODES, PARTITION_MODES, SKIP, PartitionMode

__all__ = ["MODES", "PARTITION_MODES", "SKIP", "PartitionMode"]
