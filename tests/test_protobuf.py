"""Protobuf → Arrow decoding (the Kafka reader's hot path), checked against protobuf's own JSON mapping."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from daggers.events import booking_log_pb2
from google.protobuf import json_format, message_factory, struct_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from jobs.events.protobuf import INTERNAL, ROWTIME, Decoder, EventTime, field_names, find_message, projected
from odin.traffic.generator import booking_logs


def booking_decoder(columns: list[str] | None = None) -> Decoder:
    return Decoder(find_message("daggers.events.BookingLog"), "event_timestamp", columns)


def as_json(value: Any) -> Any:
    """Arrow's Python values in protobuf's JSON mapping (maps as dicts)."""
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return dict(value)
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def test_every_field_kind_decodes_like_protobufs_json_mapping() -> None:
    events = list(booking_logs(500, seed=4))
    decoded = booking_decoder().decode([e.SerializeToString() for e in events])
    assert decoded.errors == []
    batch = decoded.batch
    location = batch.schema.field("pickup_location").type
    assert pa.types.is_struct(location) and location.field("latitude").type == pa.float64()
    assert batch.schema.field("tags").type == pa.list_(pa.string())
    assert batch.schema.field("metadata").type == pa.map_(pa.string(), pa.string())
    assert batch.schema.field("status").type == pa.string()
    rows = batch.to_pylist()
    for event, row in zip(events, rows, strict=True):
        expected = json_format.MessageToDict(
            event, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        expected["event_timestamp"] = event.event_timestamp.ToDatetime(tzinfo=UTC)
        for name, value in expected.items():
            got = as_json(row[name])
            assert got == value, (name, got, value)
        micros = event.event_timestamp.seconds * 1_000_000 + event.event_timestamp.nanos // 1000
        assert row[ROWTIME] == datetime.fromtimestamp(micros / 1e6, UTC)


def test_only_the_columns_asked_for_are_decoded() -> None:
    events = list(booking_logs(10, seed=1))
    batch = booking_decoder(["status", "lat"]).decode([e.SerializeToString() for e in events]).batch
    assert batch.column_names == ["status", "lat", ROWTIME, *INTERNAL]
    assert batch.column("lat").to_pylist() == [e.lat for e in events]


def test_fields_the_query_does_not_read_are_skipped_as_unknown_fields() -> None:
    """ptars decodes only the fields a dagger's query reads (its share of a read task's CPU 0.15-0.17 -> 0.06 s per
    250k surge events): the others are skipped as protobuf skips fields a schema does not know, so an event whose
    unread field is malformed reaches the query; read, the same field makes the event an error as before."""
    event = next(iter(booking_logs(1, seed=2)))
    # a valid event, then field 10 (pickup_location, a Location) again, its bytes no Location parses
    payload = event.SerializeToString() + bytes([10 << 3 | 2, 2, 0xFF, 0xFF])
    decoded = booking_decoder(["customer_id", "status"]).decode([payload])
    assert decoded.errors == [] and decoded.batch.column("customer_id").to_pylist() == [event.customer_id]
    assert [i for i, _ in booking_decoder(["customer_id", "pickup_location"]).decode([payload]).errors] == [0]


def test_a_projection_keeps_the_oneofs_of_the_fields_it_keeps() -> None:
    value = struct_pb2.Value.DESCRIPTOR  # oneof kind: null, number, string, bool, struct, list
    kept = projected(value, {"bool_value", "list_value"})
    assert field_names(kept) == ["bool_value", "list_value"]
    assert [(o.name, [f.name for f in o.fields]) for o in kept.oneofs] == [("kind", ["bool_value", "list_value"])]
    assert projected(value, set(field_names(value))) is value


def test_bad_payloads_and_missing_event_times_are_errors_not_rows() -> None:
    good = list(booking_logs(5, seed=2))
    no_time = booking_log_pb2.BookingLog(order_number="no-time")
    unknown_status = booking_log_pb2.BookingLog.FromString(good[0].SerializeToString())
    unknown_status.status = 99  # a newer producer's enum value: kept, as null
    payloads = [
        good[0].SerializeToString(),
        b"\xff\xff\xff not protobuf",
        no_time.SerializeToString(),
        None,
        unknown_status.SerializeToString(),
        *(g.SerializeToString() for g in good[1:]),
    ]
    decoded = booking_decoder(["order_number", "status"]).decode(payloads)
    assert [i for i, _ in decoded.errors] == [1, 2, 3]
    assert "not a valid daggers.events.BookingLog" in decoded.errors[0][1]
    assert "event_timestamp is missing" in decoded.errors[1][1]
    assert decoded.batch.column("order_number").to_pylist() == [g.order_number for g in [good[0], good[0], *good[1:]]]
    assert decoded.batch.column("status").to_pylist()[1] is None
    assert decoded.batch.column("status").to_pylist()[0] == booking_log_pb2.BookingStatus.Name(good[0].status)


def clicks(tmp_path: Path) -> tuple[Descriptor, type[Message]]:
    """A message whose event time may be a nested Timestamp or epoch milliseconds, seconds or fractional seconds."""
    proto = tmp_path / "clicks.proto"
    proto.write_text(
        'syntax = "proto3";\npackage t;\nimport "google/protobuf/timestamp.proto";\n'
        "message Meta { google.protobuf.Timestamp at = 1; }\n"
        "message Click { string id = 1; Meta meta = 2; int64 at_ms = 3; int64 at_s = 4; double at_f = 5; }\n"
    )
    desc = find_message("t.Click", [proto])
    return desc, Decoder(desc, "meta.at").cls


def test_event_time_from_a_nested_timestamp_or_epoch_numbers(tmp_path: Path) -> None:
    desc, cls = clicks(tmp_path)
    events = [cls(id="a", at_ms=1_700_000_000_123, at_s=1_700_000_000), cls(id="b")]
    events[0].meta.at.FromMicroseconds(1_700_000_000_123_456)
    payloads = [c.SerializeToString() for c in events]
    expect = {
        "meta.at": datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC),
        "at_ms": datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),
        "at_s": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
    }
    for field, when in expect.items():
        decoded = Decoder(desc, field, ["id"]).decode(payloads)
        assert decoded.batch.column(ROWTIME).to_pylist() == [when], field
        assert [i for i, _ in decoded.errors] == [1], field


def test_the_planners_event_time_of_one_payload_is_the_decoders(tmp_path: Path) -> None:
    """The source's planner reads one event per partition with EventTime rather than a Decoder: the same time for
    every payload, and none where the decoder finds an error."""
    desc, cls = clicks(tmp_path)
    events = [
        cls(id="a", at_ms=1_700_000_000_123, at_s=1_700_000_000, at_f=1_700_000_000.25),
        cls(id="b"),
        cls(id="c", meta={}),
        cls(id="d", at_ms=99_999_999_999, at_s=-5, at_f=100_000_000_001.5),
    ]
    events[0].meta.at.FromMicroseconds(1_700_000_000_123_456)
    payloads = [c.SerializeToString() for c in events] + [b"\xff\xff not protobuf", None]
    for field in ("meta.at", "at_ms", "at_s", "at_f"):
        decoder, reader = Decoder(desc, field, ["id"]), EventTime(desc, field)
        assert [reader.micros(p) for p in payloads] == [decoder.decode([p]).latest for p in payloads], field
    bookings = [e.SerializeToString() for e in booking_logs(200, seed=9)]
    decoder, reader = booking_decoder([]), EventTime(find_message("daggers.events.BookingLog"), "event_timestamp")
    assert [reader.micros(p) for p in bookings] == [decoder.decode([p]).latest for p in bookings]
    assert all(reader.micros(p) for p in bookings)


def test_enums_unsigned_wrappers_and_recursion_inside_any_structure(tmp_path: Path) -> None:
    proto = tmp_path / "kinds.proto"
    proto.write_text(
        'syntax = "proto3";\npackage k;\nimport "google/protobuf/timestamp.proto";\n'
        'import "google/protobuf/wrappers.proto";\n'
        "enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }\n"
        "message Leaf { Color color = 1; repeated Color colors = 2; uint32 small = 3; }\n"
        "message Node { string id = 1; Node child = 2; }\n"
        "message Event { google.protobuf.Timestamp at = 1; repeated Leaf leaves = 2; map<string, Color> by_name = 3;\n"
        "  uint64 big = 4; google.protobuf.Int64Value maybe = 5; Node tree = 6; float ratio = 7; Leaf leaf = 8; }\n"
    )
    desc = find_message("k.Event", [proto])
    decoder = Decoder(desc, "at")
    cls = decoder.cls
    full = cls(big=2**64 - 1, ratio=0.5, by_name={"a": 1, "b": 7})
    full.at.FromMicroseconds(1_700_000_000_000_001)
    full.leaves.add(color=2, colors=[1, 9, 2], small=2**32 - 1)
    full.maybe.value = -3
    full.tree.id = "root"
    full.tree.child.id = "kid"
    bare = cls()
    bare.at.FromMicroseconds(1_700_000_000_000_002)
    decoded = decoder.decode([full.SerializeToString(), bare.SerializeToString()])
    assert decoded.errors == []
    got, empty = decoded.batch.to_pylist()
    # Unknown enum numbers (a newer producer's) are null wherever they are; unsigned values as Spark's long.
    assert got["leaves"] == [{"color": "GREEN", "colors": ["RED", None, "GREEN"], "small": 2**32 - 1}]
    assert dict(got["by_name"]) == {"a": "RED", "b": None}
    assert got["big"] == -1 and got["maybe"] == -3 and got["ratio"] == 0.5
    assert got["tree"]["id"] == "root"
    node = message_factory.GetMessageClass(find_message("k.Node", [proto]))
    assert node.FromString(got["tree"]["child"]).id == "kid"  # a recursive field is kept as its serialized bytes
    assert empty["maybe"] is None and empty["leaf"] is None and empty["leaves"] == [] and empty["tree"] is None
    schema = {f.name: f.dataType.simpleString() for f in decoder.spark_schema.fields}
    assert schema["big"] == "bigint" and schema["ratio"] == "float" and schema["by_name"] == "map<string,string>"
