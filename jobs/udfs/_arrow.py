"""Arrow <-> numpy plumbing shared by the UDF families: columns in, null masks, typed results out.

Spark hands an Arrow UDF one ``pyarrow.Array`` per argument (a SQL literal arrives as a full-length array), typed
as the SQL expression is: DECIMAL for ``1.5``, INT for ``13``, FLOAT for a proto float. Each helper normalises one
argument to the numpy dtype the kernel wants plus a validity mask, so kernels never see Arrow nulls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def combined(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def valid_mask(arr: pa.Array) -> npt.NDArray[np.bool_]:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def float_column(arr: pa.Array | pa.ChunkedArray) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """float64 values (NaN where NULL) and a mask of non-NULL, finite values."""
    arr = combined(arr)
    if arr.type != pa.float64():
        arr = pc.cast(arr, pa.float64(), safe=False)
    values = arr.to_numpy(zero_copy_only=False)
    return values, valid_mask(arr) & np.isfinite(values)


def int_column(arr: pa.Array | pa.ChunkedArray) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """int64 values (0 where NULL) and the non-NULL mask; fractional numbers are truncated toward zero."""
    arr = combined(arr)
    if pa.types.is_floating(arr.type) or pa.types.is_decimal(arr.type):
        arr = pc.trunc(pc.cast(arr, pa.float64()))
    if arr.type != pa.int64():
        arr = pc.cast(arr, pa.int64(), safe=False)
    ok = valid_mask(arr)
    return arr.fill_null(0).to_numpy(zero_copy_only=False), ok


def str_values(arr: pa.Array | pa.ChunkedArray) -> list[str | None]:
    arr = combined(arr)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.string())
    return arr.to_pylist()


def with_nulls(arr: pa.Array, valid: npt.NDArray[np.bool_]) -> pa.Array:
    """``arr`` with NULL wherever ``valid`` is False."""
    if valid.all():
        return arr
    return pc.if_else(pa.array(valid), arr, pa.scalar(None, arr.type))


def int64_result(values: npt.NDArray[np.int64], valid: npt.NDArray[np.bool_]) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=~valid)


def float64_result(values: npt.NDArray[np.float64], valid: npt.NDArray[np.bool_]) -> pa.Array:
    return pa.array(values, type=pa.float64(), mask=~valid)


def scalar_or_none(values: npt.NDArray[Any], valid: npt.NDArray[np.bool_]) -> Any:
    """The single value of a column among valid rows, if there is exactly one (a SQL literal); else None."""
    if not valid.any():
        return None
    first = values[valid][0]
    return first if np.all(values[valid] == first) else None
