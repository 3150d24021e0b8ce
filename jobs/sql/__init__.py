"""The dagger SQL dialect: Dagger/Flink-style SQL (TUMBLE/HOP, DistinctCount, ...) or Spark SQL, validated against
the declared streams and translated to Spark SQL a streaming aggregation can run.

    query = translate(sql, {"booking": schema}, functions=["S2Id"])
    spark.sql(query.spark_sql)   # over temp views named like the declared tables
"""

from jobs.sql.errors import SqlError
from jobs.sql.translate import Query, translate

__all__ = ["Query", "SqlError", "translate"]
