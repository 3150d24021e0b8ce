"""The dagger UDF library: raystack/dagger's scalar functions for analysts' SQL on Spark.

``SCALAR_UDFS`` maps each SQL name (raystack's spelling; Spark resolves names case-insensitively) to its
:class:`UdfDef`; ``register_udfs(spark)`` makes them all callable from ``spark.sql``. One module per family:
``geo`` (S2Id, S2AreaInKm2, GeoHash, Distance), ``time`` (TimestampFromUnix, FormatTimeInZone, StartOfWeek,
EndOfWeek, StartOfMonth, EndOfMonth), ``collections`` (ElementAt, ListContains, MapGet, Split). Every function
is an Arrow UDF: one Python call per Arrow batch, vectorised kernels. DistinctCount and Percentile(Aggregator)
are aggregates, translated at SQL level (see docs/udfs.md), not here.

For the Kafka reader's hot path, :func:`jobs.udfs.s2.s2_cell_ids` computes S2 cell ids straight on numpy columns.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.udfs.collections import COLLECTION_UDFS
from jobs.udfs.geo import GEO_UDFS
from jobs.udfs.registry import UdfDef
from jobs.udfs.s2 import s2_cell_ids
from jobs.udfs.time import TIME_UDFS

SCALAR_UDFS: dict[str, UdfDef] = {d.name: d for d in (*GEO_UDFS, *TIME_UDFS, *COLLECTION_UDFS)}

# raystack aggregates: not scalar UDFs; the SQL translation rewrites them to Spark aggregates.
AGGREGATES_AT_SQL_LEVEL: tuple[str, ...] = ("DistinctCount", "PercentileAggregator")

# Names Spark already has as built-ins. Spark 4.2+ resolves built-ins before temporary functions, so in SQL the
# unqualified name is Spark's function; ours is reached qualified (the SQL translation should rewrite to this).
SHADOWED_BY_BUILTINS: dict[str, str] = {"Split": "session.Split"}


def register_udfs(spark: SparkSession) -> None:
    """Register every function of :data:`SCALAR_UDFS` in ``spark`` under its SQL name.

    Spark's built-ins win over these for an unqualified name: ``Split(...)`` is Spark's ``split``, raystack's is
    ``session.Split(...)`` (:data:`SHADOWED_BY_BUILTINS`). Registering is idempotent (re-registering replaces).
    """
    for name, definition in SCALAR_UDFS.items():
        spark.udf.register(name, definition.udf)


__all__ = ["AGGREGATES_AT_SQL_LEVEL", "SCALAR_UDFS", "SHADOWED_BY_BUILTINS", "UdfDef", "register_udfs", "s2_cell_ids"]
