"""UdfDef: one SQL scalar function of the dagger UDF library (kernel, Spark UDF, types and docs in one place)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
from pyspark.sql.functions import arrow_udf
from pyspark.sql.types import DataType
from pyspark.sql.udf import UserDefinedFunction

Kernel = Callable[..., pa.Array]


@dataclass(frozen=True)
class UdfDef:
    """A scalar SQL function: ``kernel`` maps Arrow columns to an Arrow column; ``udf`` wraps it for Spark."""

    name: str  # SQL name, raystack's spelling (Spark resolves function names case-insensitively)
    kernel: Kernel
    return_type: DataType
    signature: str  # SQL argument list and result, for docs and error messages
    contract: str  # one line: what it returns, NULL handling
    example: str  # an SQL example

    @cached_property
    def udf(self) -> UserDefinedFunction:
        """The Spark Arrow UDF (vectorised: one call per Arrow batch, never per row)."""
        return arrow_udf(self.kernel, self.return_type)
