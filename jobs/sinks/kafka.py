"""Kafka sink: one record per row, JSON (column -> value) or protobuf (fields matched to columns by name).

The record key is the key columns as a compact JSON object (`{"tag_city_id":1,"window_end":"...Z"}`) in both
formats, so a row's updates land in one partition (Java-compatible murmur2 partitioner) and compact to the latest.
Each record carries headers `dagger.batch_id` and `dagger.name`.

Delivery (docs/sinks.md): exactly-once for read_committed consumers on real Kafka; on Tansu, at-least-once per record
with an exact latest-per-key view (see below). How:
- a transactional producer, transactional.id `daggers.<team>.<name>`: `init_transactions` fences any earlier
  instance and aborts its open transaction;
- each batch is one transaction: the rows are produced and flushed, then a marker record (batch id, rows) goes to
  the dagger's own commit topic `_dagger-commits.<team>.<name>` (partition 0), then the transaction commits;
- on start (and after a failure) the last marker is read back with read_committed; a batch id already marked is a
  replay and is skipped.
Because the marker is produced only after every row was acknowledged, a marker never stands for a partial batch.

Tansu (the local broker) keeps records of aborted transactions visible to read_committed consumers and
under-reports partition ends. So: the marker is found by reading the commit topic's tail to its real end (the
reported high watermark is a starting hint only), and rows of an attempt that crashed before its marker may remain
visible next to the replay's identical rows (same key, same value, same `dagger.batch_id`: the latest-per-key view
is exact; a key occurs once per batch, so consumers of keyed output needing exact record counts keep one record
per batch id and key). With real Kafka those rows are aborted and invisible to read_committed consumers.

The SASL password comes from the environment variable named by sink.password_env, read when the sink opens, and goes
to the producer and to the admin and consumer clients the sink uses; it is never in the spec, a message or a log.
The spec refuses sink.config overriding transactional.id, acks or enable.idempotence: the above depends on them.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from jobs.events.protobuf import WRAPPERS, SchemaError, find_message, is_map
from jobs.sinks.base import (
    BaseSink,
    OutputShape,
    RetryPolicy,
    SinkError,
    check_columns,
    iso,
    json_value,
    log,
    rows,
    secret,
    utc,
)
from jobs.spec import DaggerSpec, KafkaSink
from odin.kafka.topics import ensure_topics

TIMEOUT_S = 30.0
_SHARED_CLIENT_KEYS = ("security.", "sasl.", "ssl.", "client.dns.", "broker.address.family", "socket.")
F = FieldDescriptor
_INTS = {F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_SINT32, F.TYPE_SINT64}
_INTS |= {F.TYPE_FIXED32, F.TYPE_FIXED64, F.TYPE_SFIXED32, F.TYPE_SFIXED64}


def transactional_id(dagger: DaggerSpec) -> str:
    return f"daggers.{dagger.team}.{dagger.name}"


def commit_topic(dagger: DaggerSpec) -> str:
    return f"_dagger-commits.{dagger.team}.{dagger.name}"


def compact_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# -- protobuf ---------------------------------------------------------------------------------------------------


def proto_class(dagger: DaggerSpec, name: str) -> type[ProtoMessage]:
    try:
        return message_factory.GetMessageClass(find_message(name, dagger.schemas))
    except SchemaError as e:
        raise SinkError(f"kafka sink: sink.proto {name!r}: {e}") from None


def _scalar(fd: FieldDescriptor, value: Any) -> Any:
    if fd.type == F.TYPE_ENUM:
        if isinstance(value, str):
            enum_value = fd.enum_type.values_by_name.get(value)
            if enum_value is None:
                raise ValueError(f"{value!r} is not a value of enum {fd.enum_type.full_name}")
            return enum_value.number
        return int(value)
    if fd.type == F.TYPE_STRING:
        return iso(value) if isinstance(value, datetime) else value if isinstance(value, str) else str(value)
    if fd.type == F.TYPE_BYTES:
        return value if isinstance(value, bytes) else str(value).encode()
    if fd.type == F.TYPE_BOOL:
        return bool(value)
    if fd.type in _INTS:
        if isinstance(value, datetime):
            return int(utc(value).timestamp() * 1000)  # epoch milliseconds, as dagger's timestamps in ints
        if isinstance(value, float | Decimal) and value != int(value):
            raise ValueError(f"{value!r} is not an integer")
        return int(value)
    return float(value)  # double, float


def _set_message(target: ProtoMessage, desc: Descriptor, value: Any) -> None:
    name = desc.full_name
    if name == "google.protobuf.Timestamp":
        if isinstance(value, datetime):
            target.FromDatetime(utc(value))  # type: ignore[attr-defined]
        else:
            target.FromMilliseconds(int(value))  # type: ignore[attr-defined]
    elif name == "google.protobuf.Duration":
        target.FromTimedelta(value if isinstance(value, timedelta) else timedelta(seconds=float(value)))  # type: ignore[attr-defined]
    elif name in WRAPPERS:
        target.value = _scalar(desc.fields_by_name["value"], value)  # type: ignore[attr-defined]
    elif isinstance(value, dict):
        fill(target, value)
    else:
        raise TypeError(f"{type(value).__name__} value for message {name}")
    target.SetInParent()  # an all-default sub-message is still set


def _set(msg: ProtoMessage, fd: FieldDescriptor, value: Any) -> None:
    if is_map(fd):
        target = getattr(msg, fd.name)
        value_fd = fd.message_type.fields_by_name["value"]
        for k, v in value.items() if isinstance(value, dict) else value:
            if v is None:
                continue
            if value_fd.message_type is not None:
                _set_message(target[k], value_fd.message_type, v)
            else:
                target[k] = _scalar(value_fd, v)
    elif fd.is_repeated:
        target = getattr(msg, fd.name)
        for item in value:
            if item is None:
                continue
            if fd.message_type is not None:
                _set_message(target.add(), fd.message_type, item)
            else:
                target.append(_scalar(fd, item))
    elif fd.message_type is not None:
        _set_message(getattr(msg, fd.name), fd.message_type, value)
    else:
        setattr(msg, fd.name, _scalar(fd, value))


def fill(msg: ProtoMessage, row: dict[str, Any]) -> ProtoMessage:
    """Set the message's fields from the row's columns of the same names (nulls and other columns left out)."""
    fields = msg.DESCRIPTOR.fields_by_name
    for name, value in row.items():
        fd = fields.get(name)
        if fd is None or value is None:
            continue
        try:
            _set(msg, fd, value)
        except (TypeError, ValueError, OverflowError) as e:
            raise SinkError(f"kafka sink: column {name!r} cannot go to field {fd.full_name}: {e}") from None
    return msg


# -- the writer -------------------------------------------------------------------------------------------------


class KafkaTimeout(RuntimeError):
    pass


class KafkaWriter(BaseSink[KafkaSink]):
    kind = "kafka"
    spec_type = KafkaSink

    def __init__(self, dagger: DaggerSpec, shape: OutputShape, retry: RetryPolicy | None = None) -> None:
        super().__init__(dagger, shape, retry)
        sink = self.sink
        self.topic = sink.topic
        self.transactional_id = transactional_id(dagger)
        self.commit_topic = commit_topic(dagger)
        self._message: type[ProtoMessage] | None = proto_class(dagger, sink.proto) if sink.format == "proto" else None
        self.unmatched_columns: tuple[str, ...] = ()
        if self._message is not None:
            known = self._message.DESCRIPTOR.fields_by_name
            self.unmatched_columns = tuple(c for c in (*shape.key_columns, *shape.value_columns) if c not in known)
            if self.unmatched_columns:
                log.warning(
                    "%s: columns %s have no field in %s: not written", self.label, self.unmatched_columns, sink.proto
                )
        # Read once, at open: an unset variable fails here, naming it, not at the first batch. Never logged.
        self._password = secret(sink.password_env, "kafka", "password_env")
        self._producer: Producer | None = None
        self._delivery_errors: list[KafkaError] = []

    # -- connection and the batch record ----------------------------------------------------------------------

    def _secrets(self) -> dict[str, str]:
        return {} if self._password is None else {"sasl.password": self._password}

    def _client_config(self) -> dict[str, str]:
        """For the admin and consumer clients: where the brokers are and how to connect and authenticate."""
        shared = {k: v for k, v in self.sink.config.items() if k.startswith(_SHARED_CLIENT_KEYS)}
        return {"bootstrap.servers": self.sink.bootstrap_servers} | shared | self._secrets()

    def producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.sink.bootstrap_servers,
            "partitioner": "murmur2_random",  # the Java client's: keys land where Kafka Streams/Flink expect them
            "linger.ms": 5,
            "client.id": f"dagger-sink.{self.dagger.qualified_name}",
            **self.sink.config,
            # After sink.config (which the spec already refuses to carry these): exactly-once depends on them.
            "transactional.id": self.transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            "on_delivery": self._on_delivery,
            **self._secrets(),
        }

    def _ensure_ready(self) -> Producer:
        if self._producer is not None:
            return self._producer
        # The output topic with the broker's default partitions (the dagger owns it); the commit topic with one.
        ensure_topics(self._client_config(), {self.topic: None, self.commit_topic: 1})
        producer = Producer(self.producer_config())
        producer.init_transactions(TIMEOUT_S)  # fences a previous instance, aborting its open transaction
        self.last_batch_id = self.read_last_committed()
        self._producer = producer
        return producer

    def _on_delivery(self, error: KafkaError | None, _msg: Message) -> None:
        if error is not None:
            self._delivery_errors.append(error)

    def read_last_committed(self) -> int | None:
        """The batch id of this dagger's last committed marker, reading the commit topic's tail backwards in
        growing windows; the broker's reported high watermark is only a hint where to start."""
        consumer = Consumer(
            self._client_config()
            | {
                "group.id": f"{self.transactional_id}.commits-reader",  # no subscribe, no commits: never joins
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            tp = TopicPartition(self.commit_topic, 0)
            low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
            start = max(low, high - 1) if high > low else low
            found = self._read_markers(consumer, start, None)
            stop, window = start, 64
            while found is None and stop > low:
                start = max(low, stop - window)
                found = self._read_markers(consumer, start, stop)
                stop, window = start, window * 4
            return found
        finally:
            consumer.close()

    def _read_markers(self, consumer: Consumer, start: int, stop: int | None) -> int | None:
        """The highest batch id among our markers at offsets [start, stop) (stop None: to the partition's end)."""
        consumer.assign([TopicPartition(self.commit_topic, 0, start)])
        best: int | None = None
        key = self.transactional_id.encode()
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return best
                raise KafkaException(error)
            offset = msg.offset() or 0
            if offset < start:
                continue
            if stop is not None and offset >= stop:
                return best
            if msg.key() == key:
                batch_id = int(json.loads(msg.value() or b"{}")["batch_id"])
                best = batch_id if best is None else max(best, batch_id)
        raise KafkaTimeout(f"no end of {self.commit_topic}[0] within {TIMEOUT_S:.0f}s")

    # -- writing ----------------------------------------------------------------------------------------------

    def records(self, batch: pa.Table) -> list[tuple[bytes | None, bytes]]:
        keys = self.shape.key_columns
        out: list[tuple[bytes | None, bytes]] = []
        for row in rows(batch):
            key = compact_json({k: json_value(row[k]) for k in keys}) if keys else None
            if self._message is None:
                value = compact_json({k: json_value(v) for k, v in row.items()})
            else:
                value = fill(self._message(), row).SerializeToString(deterministic=True)
            out.append((key, value))
        return out

    def _produce(self, producer: Producer, topic: str, **kwargs: Any) -> None:
        while True:
            try:
                producer.produce(topic, **kwargs)
                return
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)

    def _write_batch(self, batch: pa.Table, batch_id: int) -> tuple[int, int] | None:
        check_columns(self.kind, batch, self.shape.key_columns, "key columns")
        records = self.records(batch)  # encode first: a data error must not leave a transaction open
        producer = self._ensure_ready()
        if self._is_replay(batch_id):
            return None
        headers = [("dagger.batch_id", str(batch_id).encode()), ("dagger.name", self.dagger.qualified_name.encode())]
        self._delivery_errors.clear()
        producer.begin_transaction()
        for key, value in records:
            self._produce(producer, self.topic, key=key, value=value, headers=headers)
        if producer.flush(TIMEOUT_S) > 0:
            raise KafkaTimeout(f"{self.topic}: records not acknowledged within {TIMEOUT_S:.0f}s")
        if self._delivery_errors:
            raise KafkaException(self._delivery_errors[0])
        # The marker only after every row is acknowledged: a visible marker never stands for a partial batch.
        marker = {"batch_id": batch_id, "topic": self.topic, "rows": len(records), "dagger": self.dagger.qualified_name}
        self._produce(
            producer, self.commit_topic, key=self.transactional_id.encode(), value=compact_json(marker), partition=0
        )
        producer.commit_transaction(TIMEOUT_S)
        return len(records), 0

    def _retriable(self, error: Exception) -> bool:
        return isinstance(error, KafkaException | KafkaTimeout | BufferError)

    def _recover(self, error: Exception) -> None:
        """Start over with a new producer: its init_transactions aborts whatever the failed attempt left open, and
        the marker is read again (the failed commit may have gone through)."""
        old, self._producer = self._producer, None
        if old is not None:
            try:
                old.purge(in_queue=True, in_flight=False)
                old.abort_transaction(5)
            except KafkaException:
                pass  # fenced or fatal: the new producer's init_transactions aborts it
        try:
            self._ensure_ready()
        except Exception as e:  # the next attempt fails the same way and is counted there
            log.warning("%s: not reconnected yet: %s", self.label, e)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(TIMEOUT_S)
            self._producer = None
        super().close()
