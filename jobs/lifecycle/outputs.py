"""A deployed dagger's latest output rows, read back from where the platform placed its sink: for `dagger output`.

Each sink kind is read as it was written: an influx sink's points from the platform's VictoriaMetrics (one row per
point time and tag set, a column per field: what the dagger's SELECT made), a postgres sink's table in the team's
database (with the team's own role), a kafka sink's last records of its topic. Who may read a dagger's output is the
lifecycle's business (jobs/lifecycle/daggers.py `output`); here is only how.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from confluent_kafka import Consumer, TopicPartition
from google.protobuf import message_factory
from google.protobuf.json_format import MessageToDict
from psycopg import sql

from jobs.events.protobuf import find_message
from odin.apis import http_client, victoria

TIMEOUT_S = 10.0  # per read: a CLI must not hang on a sink that does not answer
LOOKBACK_S = 24 * 3600  # an influx sink's points are looked for this far back
MAX_SERIES = 20_000  # an influx export reads at most this many series
TIME_OIDS = frozenset(psycopg.adapters.types[t].oid for t in ("timestamptz", "timestamp", "date"))


class OutputUnavailable(RuntimeError):
    """The sink cannot be read from here; the message says why."""


@dataclass(frozen=True)
class Output:
    team: str
    name: str
    sink: str  # the sink's type
    where: str  # where the rows were read, for people
    columns: list[str]
    rows: list[list[Any]]  # newest last, at most the `last` asked for
    note: str = ""
    total: int | None = None  # how many rows the sink holds in all, where it is cheap to know

    def to_dict(self) -> dict[str, Any]:
        return {
            "team": self.team,
            "name": self.name,
            "sink": self.sink,
            "where": self.where,
            "columns": self.columns,
            "rows": self.rows,
            "total": self.total,
            "note": self.note,
        }


def influx_rows(vm: str, measurement: str, team: str, last: int, now: float | None = None) -> tuple[list[str], list]:
    """The measurement's points of the last day as rows: `time`, its tags, then a column per field (VictoriaMetrics
    stores field F of measurement M as the metric `M_F`, tags as labels; the platform's `team` tag is left out)."""
    end = now or datetime.now(UTC).timestamp()
    match = f'{{__name__=~"{victoria.any_of([measurement])}_.+",team="{victoria.literal(team)}"}}'
    params = {"match[]": match, "start": int(end - LOOKBACK_S), "end": int(end) + 1}
    try:
        victoria.flush(vm)  # points of the last seconds, too
        points: dict[tuple[int, tuple[tuple[str, str], ...]], dict[str, float]] = {}
        fields: set[str] = set()
        tags: set[str] = set()
        with http_client.stream("GET", f"{vm}/api/v1/export", params=params, timeout=TIMEOUT_S * 3) as r:
            r.raise_for_status()
            for n, line in enumerate(r.iter_lines()):
                if n >= MAX_SERIES or not line.strip():
                    continue
                doc = json.loads(line)
                labels = dict(doc["metric"])
                fieldname = labels.pop("__name__", "")[len(measurement) + 1 :] or "?"
                labels.pop("team", None)
                fields.add(fieldname)
                tags.update(labels)
                key_tags = tuple(sorted(labels.items()))
                for t, v in zip(doc.get("timestamps", []), doc.get("values", []), strict=False):
                    points.setdefault((int(t), key_tags), {})[fieldname] = v
    except (httpx.HTTPError, ValueError) as e:
        raise OutputUnavailable(f"VictoriaMetrics ({vm}) did not answer: {type(e).__name__}: {e}") from None
    tag_names, field_names = sorted(tags), sorted(fields)
    newest = sorted(points.items())[-last:] if last else []
    rows = [
        [datetime.fromtimestamp(t / 1000, UTC).isoformat(), *(dict(kt).get(k, "") for k in tag_names)]
        + [values.get(f) for f in field_names]
        for (t, kt), values in newest
    ]
    return ["time", *tag_names, *field_names], rows


def postgres_rows(dsn: str, password: str, table: str, last: int) -> tuple[list[str], list, int]:
    """The table's newest rows (by its first timestamp column, else as stored), and how many it holds."""
    schema, _, name = table.rpartition(".")
    ident = sql.Identifier(schema, name) if schema else sql.Identifier(name)
    try:
        timeout = f"-c statement_timeout={int(TIMEOUT_S * 1000)}"
        with psycopg.connect(dsn, password=password, connect_timeout=int(TIMEOUT_S), options=timeout) as conn:
            cur = conn.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(ident))
            columns = [c.name for c in cur.description or []]
            order = next((c.name for c in cur.description or [] if c.type_code in TIME_OIDS), None)
            query = sql.SQL("SELECT * FROM {} ").format(ident)
            if order:
                query += sql.SQL("ORDER BY {} DESC ").format(sql.Identifier(order))
            rows = conn.execute(query + sql.SQL("LIMIT %s"), (last,)).fetchall()
            (total,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(ident)).fetchone() or (0,)
    except psycopg.errors.UndefinedTable:
        raise OutputUnavailable(f"table {table} does not exist yet: the dagger makes it with its first rows") from None
    except psycopg.Error as e:
        raise OutputUnavailable(f"the team's database did not answer: {type(e).__name__}: {e}") from None
    return columns, [[_plain(v) for v in row] for row in reversed(rows)], int(total)


def kafka_rows(
    bootstrap: str, topic: str, last: int, decode: Callable[[bytes], dict[str, Any]] | None = None
) -> tuple[list[str], list]:
    """The topic's last records (at most `last` from each partition, the newest `last` of them all), as columns of
    their JSON values (`decode` turns a value into a dict for other formats)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "dagger-output",  # never committed: assign() and no commits
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "socket.timeout.ms": int(TIMEOUT_S * 1000),
        }
    )
    records: list[tuple[int, dict[str, Any]]] = []
    try:
        meta = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None:
            raise OutputUnavailable(f"topic {topic} does not exist yet: the dagger makes it with its first rows")
        wanted: dict[int, int] = {}
        assigned = []
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
            if high > low:
                assigned.append(TopicPartition(topic, p, max(low, high - last)))
                wanted[p] = high
        consumer.assign(assigned)
        deadline = datetime.now(UTC).timestamp() + TIMEOUT_S
        while wanted and datetime.now(UTC).timestamp() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            if msg.offset() + 1 >= wanted.get(msg.partition(), 0):
                wanted.pop(msg.partition(), None)
            value = msg.value() or b"{}"
            records.append((msg.timestamp()[1], decode(value) if decode else json.loads(value)))
    except OutputUnavailable:
        raise
    except Exception as e:  # KafkaException, a value that is not JSON
        raise OutputUnavailable(f"Kafka ({bootstrap}) did not give topic {topic}'s records: {e}") from None
    finally:
        consumer.close()
    newest = [r for _, r in sorted(records, key=lambda tr: tr[0])][-last:]
    columns: list[str] = []
    for r in newest:
        columns += [c for c in r if c not in columns]
    return columns, [[r.get(c) for c in columns] for r in newest]


def proto_decoder(proto: str) -> Callable[[bytes], dict[str, Any]]:
    """A kafka sink's `proto` records as dicts of their fields (names as in the message)."""
    cls = message_factory.GetMessageClass(find_message(proto))

    def decode(value: bytes) -> dict[str, Any]:
        return MessageToDict(cls.FromString(value), preserving_proto_field_name=True)

    return decode


def _plain(value: Any) -> Any:
    """A value JSON and a table can show: times as ISO text, numbers as they are."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)
