"""PostgreSQL sink: upsert on the key columns, the whole batch in one transaction.

The table is created on the first batch if missing, from the Arrow schema (timestamps -> timestamptz, nested
values -> jsonb), with the key columns as primary key; columns the table lacks are added. Rows go in by COPY into a
temp table, then one `INSERT ... SELECT DISTINCT ON (keys) ... ON CONFLICT (keys) DO UPDATE` (the last row of the
batch wins for a repeated key). Rows with a null key column cannot be keyed and are skipped (counted).

Exactly-once effect: the upsert is idempotent by itself, and the batch id is recorded in `_dagger_sink_commits`
(same schema as the table) in the same transaction: a replayed batch id is found there and skipped.
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from jobs.sinks.base import BaseSink, OutputShape, RetryPolicy, SinkError, check_columns, json_value, log, rows, secret
from jobs.spec import DaggerSpec, PostgresSink

COMMITS_TABLE = "_dagger_sink_commits"
ORDINAL = "_dagger_ord"


def pg_type(dtype: pa.DataType) -> str:
    """A PostgreSQL column type for an Arrow type."""
    t = pa.types
    if t.is_boolean(dtype):
        return "boolean"
    if t.is_int8(dtype) or t.is_int16(dtype) or t.is_uint8(dtype):
        return "smallint"
    if t.is_int32(dtype) or t.is_uint16(dtype):
        return "integer"
    if t.is_int64(dtype) or t.is_uint32(dtype):
        return "bigint"
    if t.is_uint64(dtype):
        return "numeric(20,0)"
    if t.is_float16(dtype) or t.is_float32(dtype):
        return "real"
    if t.is_float64(dtype):
        return "double precision"
    if t.is_decimal(dtype):
        return f"numeric({dtype.precision},{dtype.scale})"
    if t.is_string(dtype) or t.is_large_string(dtype) or t.is_string_view(dtype) or t.is_null(dtype):
        return "text"
    if t.is_binary(dtype) or t.is_large_binary(dtype) or t.is_fixed_size_binary(dtype):
        return "bytea"
    if t.is_timestamp(dtype):
        return "timestamptz"  # naive (Spark TIMESTAMP_NTZ) values are UTC: the session runs in UTC
    if t.is_date(dtype):
        return "date"
    if t.is_time(dtype):
        return "time"
    if t.is_duration(dtype):
        return "interval"
    if t.is_nested(dtype) or t.is_dictionary(dtype):
        return "jsonb"
    raise SinkError(f"postgres sink: no PostgreSQL type for Arrow type {dtype}")


def _identifier(name: str) -> sql.Identifier:
    return sql.Identifier(*name.split("."))


class PostgresWriter(BaseSink[PostgresSink]):
    kind = "postgres"
    spec_type = PostgresSink

    def __init__(self, dagger: DaggerSpec, shape: OutputShape, retry: RetryPolicy | None = None) -> None:
        super().__init__(dagger, shape, retry)
        sink = self.sink
        password = secret(sink.password_env, "postgres", "password_env")
        extra: dict[str, Any] = {"password": password} if password is not None else {}
        # UTC session: naive timestamps are stored as UTC instants.
        self._conninfo = make_conninfo(
            sink.dsn, application_name=f"dagger {dagger.qualified_name}", options="-c TimeZone=UTC", **extra
        )
        schema = sink.table.rpartition(".")[0]
        self.table = _identifier(sink.table)
        self.commits = sql.Identifier(schema, COMMITS_TABLE) if schema else sql.Identifier(COMMITS_TABLE)
        self.target = sink.table
        self._conn: psycopg.Connection[Any] | None = None
        self._columns: dict[str, str] | None = None  # the table's columns once known: name -> type

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            # autocommit: every transaction is an explicit `conn.transaction()` block, never an implicit one left open.
            self._conn = psycopg.connect(self._conninfo, connect_timeout=10, autocommit=True)
            self._columns = None
            self._ensure_commits_table(self._conn)
            self.last_batch_id = self._recorded_batch(self._conn)
        return self._conn

    def _ensure_commits_table(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (target text, dagger text, batch_id bigint NOT NULL, rows integer "
                    "NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (target, dagger))"
                ).format(self.commits)
            )

    def _recorded_batch(self, conn: psycopg.Connection[Any], lock: bool = False) -> int | None:
        query = sql.SQL("SELECT batch_id FROM {} WHERE target = %s AND dagger = %s").format(self.commits)
        if lock:
            query += sql.SQL(" FOR UPDATE")
        row = conn.execute(query, (self.target, self.dagger.qualified_name)).fetchone()
        return None if row is None else int(row[0])

    def _ensure_table(self, conn: psycopg.Connection[Any], schema: pa.Schema) -> dict[str, str]:
        """Create the table (or add missing columns); returns the batch's columns and their types."""
        wanted = {f.name: pg_type(f.type) for f in schema}
        if self._columns is not None and set(wanted) <= set(self._columns):
            return wanted
        keys = self.shape.key_columns
        columns = [
            sql.SQL("{} {}{}").format(sql.Identifier(n), sql.SQL(t), sql.SQL(" NOT NULL" if n in keys else ""))
            for n, t in wanted.items()
        ]
        if keys:
            columns.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, keys))))
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(self.table, sql.SQL(", ").join(columns)))
        existing = {
            name
            for (name,) in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                (self.table.as_string(conn),),
            )
        }
        for name, type_ in wanted.items():
            if name not in existing:
                log.info("%s: adding column %s %s to %s", self.label, name, type_, self.target)
                conn.execute(
                    sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(
                        self.table, sql.Identifier(name), sql.SQL(type_)
                    )
                )
        self._columns = {n: wanted.get(n, "") for n in existing | set(wanted)}
        return wanted

    def _write_batch(self, batch: pa.Table, batch_id: int) -> tuple[int, int] | None:
        keys = self.shape.key_columns
        check_columns(self.kind, batch, keys, "key columns")
        if ORDINAL in batch.column_names:
            raise SinkError(f"postgres sink: column {ORDINAL!r} is reserved")
        skipped = 0
        if keys:  # a primary key cannot hold NULL: such rows cannot be upserted
            mask = functools.reduce(pc.and_, [pc.is_valid(batch.column(k)) for k in keys])
            kept = batch.filter(mask)
            skipped = batch.num_rows - kept.num_rows
            if skipped:
                log.warning("%s: %d row(s) with a null key column skipped", self.label, skipped)
            batch = kept
        conn = self._connect()
        with conn.transaction():
            if self._is_replay_recorded(conn, batch_id):
                return None
            types = self._ensure_table(conn, batch.schema)
            written = self._upsert(conn, batch, types) if batch.num_rows else 0
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (target, dagger, batch_id, rows) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (target, dagger) DO UPDATE SET batch_id = EXCLUDED.batch_id, rows = EXCLUDED.rows, "
                    "committed_at = now()"
                ).format(self.commits),
                (self.target, self.dagger.qualified_name, batch_id, written),
            )
        return written, skipped

    def _is_replay_recorded(self, conn: psycopg.Connection[Any], batch_id: int) -> bool:
        self.last_batch_id = self._recorded_batch(conn, lock=True)  # the row lock serialises two writers
        return self._is_replay(batch_id)

    def _upsert(self, conn: psycopg.Connection[Any], batch: pa.Table, types: dict[str, str]) -> int:
        names = batch.column_names
        keys = self.shape.key_columns
        stage = sql.Identifier(f"_dagger_stage_{id(self)}")
        stage_columns = [sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(types[n])) for n in names]
        stage_columns.append(sql.SQL("{} bigint").format(sql.Identifier(ORDINAL)))
        conn.execute(
            sql.SQL("CREATE TEMP TABLE {} ({}) ON COMMIT DROP").format(stage, sql.SQL(", ").join(stage_columns))
        )
        json_columns = [i for i, n in enumerate(names) if types[n] == "jsonb"]
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
            stage, sql.SQL(", ").join(map(sql.Identifier, [*names, ORDINAL]))
        )
        with conn.cursor() as cur, cur.copy(copy_sql) as copy:
            for i, row in enumerate(rows(batch)):
                values = list(row.values())
                for j in json_columns:
                    values[j] = None if values[j] is None else Jsonb(json_value(values[j]))
                copy.write_row([*values, i])
        cols = sql.SQL(", ").join(map(sql.Identifier, names))
        if keys:
            key_list = sql.SQL(", ").join(map(sql.Identifier, keys))
            values = [n for n in names if n not in keys]
            if values:
                assignments = sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in values
                )
                conflict = sql.SQL("DO UPDATE SET {}").format(assignments)
            else:
                conflict = sql.SQL("DO NOTHING")
            query = sql.SQL(
                "INSERT INTO {table} ({cols}) SELECT DISTINCT ON ({keys}) {cols} FROM {stage} "
                "ORDER BY {keys}, {ord} DESC ON CONFLICT ({keys}) {conflict}"
            ).format(
                table=self.table, cols=cols, keys=key_list, stage=stage, ord=sql.Identifier(ORDINAL), conflict=conflict
            )
        else:  # no key: plain append, made exactly-once by the batch record alone
            query = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ORDER BY {}").format(
                self.table, cols, cols, stage, sql.Identifier(ORDINAL)
            )
        cur = conn.execute(query)
        return max(cur.rowcount, 0)

    def _retriable(self, error: Exception) -> bool:
        # Connection loss, serialization failures and deadlocks pass; schema and data errors do not.
        return isinstance(
            error, psycopg.OperationalError | psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected
        )

    def _recover(self, error: Exception) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        try:
            self._connect()  # re-reads the batch record: the failed commit may have gone through
        except Exception as e:  # the next attempt fails the same way and is counted there
            log.warning("%s: not reconnected yet: %s", self.label, e)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        super().close()
