"""The one array type of the package (numpy arrays of any dtype and shape)."""

from __future__ import annotations

from typing import Any, TypeAlias

from numpy.typing import NDArray

Array: TypeAlias = NDArray[Any]
