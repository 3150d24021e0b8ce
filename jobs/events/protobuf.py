"""Protobuf payloads → Arrow record batches with the stream's schema (and its Spark schema).

Decoding is the hot path of every dagger: ptars (Rust) decodes a whole chunk of payloads into Arrow columns at
once, with no Python object per event. Nested messages become structs, repeated fields lists, maps maps, enums
their names, Timestamps timestamps, wrapper types nullable values. Only the fields a query uses are kept.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError, Message
from ptars import HandlerPool, PtarsConfig
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type

import protos
from jobs.events.predicates import Predicate, passing

TIMESTAMP = "google.protobuf.Timestamp"
ROWTIME = "rowtime"
SENTINEL = "__sentinel"  # set on rows that only carry event time: Spark drops them right after the watermark
EVENTS = "__events"  # events a sentinel row stands for: dropped by the reader's WHERE, or 0 at end of input
LATE = "__late"  # late events a sentinel row stands for: sent to the dead-letter topic (jobs/engine/event_time.py)
WATERMARK = "__watermark"  # set on one sentinel row when the stream's watermark moves: Spark's watermark column
INTERNAL = (SENTINEL, EVENTS, LATE, WATERMARK)  # columns after `rowtime` that only the engine reads
ARROW_TS = pa.timestamp("us", tz="UTC")
EPOCH_MS_ABOVE = 100_000_000_000  # an epoch number event time above this is milliseconds (year 5138 in seconds)
WRAPPERS = {f"google.protobuf.{n}Value" for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool")}
WRAPPERS |= {"google.protobuf.StringValue", "google.protobuf.BytesValue"}

F = FieldDescriptor
# Enums come as numbers and are named here (numbers the schema does not know become null, not "99").
PTARS = PtarsConfig(timestamp_tz="UTC", timestamp_unit="us", duration_unit="us", enum_repr="int32")


@dataclass(frozen=True)
class Computed:
    """A UDF call the reader evaluates and adds as a column (see jobs/sql/pushdown.py)."""

    name: str  # the column the reader adds
    function: str  # registered UDF name, as in the SQL
    args: tuple[tuple[str, Any], ...]  # ("column", field name) or ("literal", value)

    def describe(self) -> str:
        shown = (repr(v) if kind == "literal" else v for kind, v in self.args)
        return f"{self.name} = {self.function}({', '.join(shown)})"


class SchemaError(ValueError):
    """A message or field that cannot be found or used; the message says which and what exists."""


def compile_protos(files: list[Path], out_dir: Path) -> Path:
    """A descriptor set for a spec's extra `.proto` files (imports resolved against their folders and protos/)."""
    from grpc_tools import protoc

    out = out_dir / "extra-schemas.desc"
    include = Path(protoc.__file__).parent / "_proto"
    dirs = sorted({str(f.resolve().parent) for f in files})
    args = ["protoc", *(f"-I{d}" for d in dirs), f"-I{protos.PROTO_ROOT}", f"-I{include}"]
    args += [f"--descriptor_set_out={out}", "--include_imports", *(str(f.resolve()) for f in files)]
    if protoc.main(args) != 0:
        raise SchemaError(f"protoc could not compile schemas {[str(f) for f in files]}")
    return out


@lru_cache(maxsize=32)
def _schemas(extra: tuple[str, ...]) -> tuple[DescriptorPool, tuple[str, ...]]:
    """The pool (and message names) of protos/ plus a spec's `schemas`: descriptor sets, or `.proto` files compiled
    here. Cached: Spark tasks of one worker process look messages up once, not per task."""
    # On a cluster's executors the driver's paths may not exist: protos.local_file finds the shipped copies.
    sets = [
        protos.local_file(p) for p in (protos.DESCRIPTOR_SET, *(Path(p) for p in extra if not p.endswith(".proto")))
    ]
    sources = [protos.local_file(Path(p)) for p in extra if p.endswith(".proto")]
    with tempfile.TemporaryDirectory(prefix="dagger-schemas-") as tmp:
        if sources:
            sets.append(compile_protos(sources, Path(tmp)))
        try:  # both read the files fully before the temp dir goes
            return protos.load_pool(sets), tuple(protos.message_names(sets))
        except FileNotFoundError as e:
            raise SchemaError(str(e)) from None


def find_message(name: str, extra: Iterable[Path | str] = ()) -> Descriptor:
    pool, known = _schemas(tuple(str(p) for p in extra))
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        raise SchemaError(f"unknown protobuf message {name!r}; known: {', '.join(known)}") from None


def is_map(fd: FieldDescriptor) -> bool:
    return fd.type == F.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry


def _is_repeated(fd: FieldDescriptor) -> bool:
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == F.LABEL_REPEATED


def field_names(desc: Descriptor) -> list[str]:
    return [f.name for f in desc.fields]


def _copied(m: Message) -> Any:
    copy = type(m)()
    copy.CopyFrom(m)
    return copy


def _keep_fields(message: descriptor_pb2.DescriptorProto, keep: set[str]) -> None:
    fields = [_copied(f) for f in message.field if f.name in keep]
    used = sorted({f.oneof_index for f in fields if f.HasField("oneof_index")})  # a oneof without fields is invalid
    oneofs = [_copied(message.oneof_decl[i]) for i in used]
    for f in fields:
        if f.HasField("oneof_index"):
            f.oneof_index = used.index(f.oneof_index)
    del message.field[:], message.oneof_decl[:]
    message.field.extend(fields)
    message.oneof_decl.extend(oneofs)


def projected(desc: Descriptor, keep: set[str]) -> Descriptor:
    """`desc` with only its fields in `keep` (in a pool of its own): ptars then skips the other fields' bytes as
    protobuf skips fields a schema does not know, without decoding them. `desc` itself when nothing is left out, or
    when the pool refuses the projection (then every field is decoded, as before)."""
    if set(field_names(desc)) <= keep:
        return desc
    files = protos.file_set(desc.file).file  # the message's own file last
    outer: list[str] = []  # the messages `desc` is nested in, outermost first
    parent = desc.containing_type
    while parent is not None:
        outer.insert(0, parent.name)
        parent = parent.containing_type
    messages = files[-1].message_type
    for name in outer:
        messages = next(m for m in messages if m.name == name).nested_type
    _keep_fields(next(m for m in messages if m.name == desc.name), keep)
    try:
        return protos.pool_of(files).FindMessageTypeByName(desc.full_name)
    except (TypeError, ValueError, KeyError):
        return desc


# -- ptars' Arrow → the stream's Arrow: enum names, unsigned as Spark's long, every field nullable ----------------

Conform = Callable[[pa.Array], pa.Array]


def _same(a: pa.Array) -> pa.Array:
    return a


def _conformer(fd: FieldDescriptor, arrow: pa.DataType, element: bool = False) -> tuple[pa.DataType, Conform]:
    """The stream's type for one field as ptars decodes it, and the function taking ptars' array to it.
    `element`: `arrow` is one element of the repeated field `fd`."""
    if pa.types.is_map(arrow):
        entry = fd.message_type.fields_by_name
        key_type, key = _conformer(entry["key"], arrow.key_type)
        item_type, item = _conformer(entry["value"], arrow.item_type)
        out = pa.map_(key_type, item_type)
        return out, lambda a: pa.MapArray.from_arrays(a.offsets, key(a.keys), item(a.items), type=out)
    if pa.types.is_list(arrow) and not element:
        value_type, value = _conformer(fd, arrow.value_type, element=True)
        out = pa.list_(value_type)
        return out, lambda a: pa.ListArray.from_arrays(a.offsets, value(a.values), type=out)
    if pa.types.is_struct(arrow):
        children = [(f.name, *_conformer(fd.message_type.fields_by_name[f.name], f.type)) for f in arrow]
        fields = [pa.field(name, t) for name, t, _ in children]

        def struct(a: pa.Array) -> pa.Array:
            arrays = [conform(a.field(name)) for name, _, conform in children]
            return pa.StructArray.from_arrays(arrays, fields=fields, mask=a.is_null() if a.null_count else None)

        return pa.struct(fields), struct
    if fd.type == F.TYPE_ENUM:
        name = _enum_names(fd)
        return pa.string(), lambda a: name(a.to_numpy(zero_copy_only=False).astype(np.int64))
    if pa.types.is_unsigned_integer(arrow):  # Spark has no unsigned types; values above 2^63 wrap
        return pa.int64(), lambda a: a.cast(pa.int64(), safe=False)
    return arrow, _same


def _enum_names(fd: FieldDescriptor) -> Callable[[npt.NDArray[np.int64]], pa.Array]:
    """Enum numbers → names, vectorised; numbers the schema does not know (newer producers) become null."""
    numbers = {v.number: v.name for v in fd.enum_type.values}
    low = min(numbers)
    table = pa.array([numbers.get(n) for n in range(low, max(numbers) + 1)], pa.string())

    def to_name(values: npt.NDArray[np.int64]) -> pa.Array:
        index = values - low
        unknown = (index < 0) | (index >= len(table))
        return table.take(pa.array(np.where(unknown, 0, index), mask=unknown))

    return to_name


class EventTime:
    """One payload's event time (µs) exactly as Decoder.decode reads it (the same parser, the same rules), without
    what a Decoder builds for its batches: the source's planner reads the last event of each partition each batch,
    and a Decoder there cost its process ~20 MB and 0.1 s (Arrow's compute kernels, the UDF library). It parses every
    field: an event malformed only in a field the query does not read (which the query's Decoder skips) has no time
    here, as an unparsable one, and the planner's bound for that batch stays where it was
    (jobs/engine/event_time.py)."""

    def __init__(self, desc: Descriptor, timestamp_field: str) -> None:
        self.handler = HandlerPool([desc.file], config=PTARS).get_for_message(desc)
        self.path = timestamp_field.split(".")

    def micros(self, payload: bytes | None) -> int | None:
        """None where Decoder.decode makes the payload an error: it does not parse, or has no event time."""
        try:
            value: Any = self.handler.array_to_record_batch(pa.array([payload], pa.binary())).column(self.path[0])[0]
        except ValueError:
            return None
        for part in self.path[1:]:
            value = value[part] if value.is_valid else value  # an unset parent: no event time
        if not value.is_valid:
            return None
        if pa.types.is_timestamp(value.type):
            return int(value.value) or None
        epoch = float(value.as_py())
        return int(epoch * 1000 if epoch > EPOCH_MS_ABOVE else epoch * 1_000_000) or None


@dataclass
class Decoded:
    batch: pa.RecordBatch
    errors: list[tuple[int, str]] = field(default_factory=list)  # (index in the input, reason)
    dropped: pa.RecordBatch | None = None  # the sentinel row for the events the reader's WHERE dropped
    rows: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))  # input index of each row
    latest: int | None = None  # latest event time (µs) of the events with one, the WHERE's dropped ones included


class Decoder:
    """Decodes payloads of one message type into Arrow batches with the stream's schema (+ `rowtime`).

    ptars (Rust) turns the wire bytes into Arrow columns without a Python object per event; this class names
    enums, keeps the columns a query uses, and derives event time. `timestamp_field` (dotted for nested) gives
    event time: a Timestamp, or an integer of epoch seconds or milliseconds (told apart by magnitude). A payload
    that does not parse, or has no event time, is an error for that event only. Recursive message fields are
    kept as their serialized bytes.

    With `filters`, events the query's WHERE would drop are left out; one sentinel row per batch keeps the latest
    event time among them (so the watermark moves exactly as if Spark had seen them) and their number.
    """

    def __init__(
        self,
        desc: Descriptor,
        timestamp_field: str,
        columns: Sequence[str] | None = None,
        computed: Sequence[Computed] = (),
        filters: Sequence[Predicate] = (),
    ) -> None:
        self.cls: type[Message] = message_factory.GetMessageClass(desc)
        self.desc = desc
        self.timestamp_path = timestamp_field.split(".")
        self._check_timestamp_field()
        wanted = set(field_names(desc) if columns is None else columns)
        # Fields the reader's UDF calls read need decoding too, but reach Spark only if the query reads them.
        needed = wanted | {v for c in computed for kind, v in c.args if kind == "column"} | {p.column for p in filters}
        decoded = projected(desc, needed | {self.timestamp_path[0]})
        self.handler = HandlerPool([decoded.file], config=PTARS).get_for_message(decoded)
        self.filters = tuple(filters)
        self.conformers: dict[str, Conform] = {}
        self.emitted: list[str] = []
        fields = []
        for f in self.handler.schema():
            if f.name in needed:
                arrow, self.conformers[f.name] = _conformer(desc.fields_by_name[f.name], f.type)
                if f.name in wanted:
                    self.emitted.append(f.name)
                    fields.append(pa.field(f.name, arrow))
        self.computed: list[tuple[Computed, Any]] = []
        if computed:  # imported here: workers of daggers without such calls need not load the UDF library
            from jobs.udfs import SCALAR_UDFS

            self.computed = [(c, SCALAR_UDFS[c.function]) for c in computed]
        fields += [pa.field(c.name, to_arrow_type(udf.return_type)) for c, udf in self.computed]
        fields += [pa.field(ROWTIME, ARROW_TS), pa.field(SENTINEL, pa.bool_()), pa.field(EVENTS, pa.int64())]
        fields += [pa.field(LATE, pa.int64()), pa.field(WATERMARK, ARROW_TS)]
        self.arrow_schema = pa.schema(fields)
        try:
            self.spark_schema: T.StructType = from_arrow_schema(self.arrow_schema)
        except (TypeError, NotImplementedError) as e:
            raise SchemaError(f"{desc.full_name}: a field has no Spark type: {e}") from None

    def _check_timestamp_field(self) -> None:
        desc: Descriptor | None = self.desc
        for i, part in enumerate(self.timestamp_path):
            assert desc is not None
            fd = desc.fields_by_name.get(part)
            if fd is None or _is_repeated(fd):
                raise SchemaError(
                    f"timestamp_field {'.'.join(self.timestamp_path)!r}: no field {part!r} in {desc.full_name}; "
                    f"fields: {', '.join(field_names(desc))}"
                )
            last = i == len(self.timestamp_path) - 1
            if fd.type == F.TYPE_MESSAGE and fd.message_type.full_name != TIMESTAMP:
                desc = fd.message_type
                if last:
                    raise SchemaError(f"timestamp_field {part!r} is a {desc.full_name}, not a Timestamp or number")
            elif not last:
                raise SchemaError(f"timestamp_field: {part!r} is not a message, cannot select inside it")
            elif fd.type not in (F.TYPE_MESSAGE, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_INT32, F.TYPE_DOUBLE):
                raise SchemaError(f"timestamp_field {part!r} must be a Timestamp or epoch seconds/milliseconds")

    def _rowtimes(self, raw: pa.RecordBatch) -> npt.NDArray[np.int64]:
        """Event times in µs; 0 when an event has none (unset, or the epoch itself)."""
        import pyarrow.compute as pc  # here, not at the top: the source's planning processes never decode

        values: pa.Array = raw.column(self.timestamp_path[0])
        for part in self.timestamp_path[1:]:
            values = pc.struct_field(values, part)  # null where a parent message is unset
        if pa.types.is_timestamp(values.type):
            return values.cast(pa.int64()).fill_null(0).to_numpy()
        epoch = values.cast(pa.float64()).fill_null(0).to_numpy()
        return np.where(epoch > EPOCH_MS_ABOVE, epoch * 1000, epoch * 1_000_000).astype(np.int64)  # ms vs s

    def _convert(self, payloads: Sequence[bytes | None]) -> tuple[pa.RecordBatch, list[int], list[tuple[int, str]]]:
        """ptars' batch of the payloads that parse, their indexes in `payloads`, and the ones that do not."""
        try:  # the common case: every payload parses (a missing payload is an empty message)
            return self.handler.array_to_record_batch(pa.array(payloads, pa.binary())), list(range(len(payloads))), []
        except ValueError:
            pass
        kept: list[int] = []
        errors: list[tuple[int, str]] = []
        for i, p in enumerate(payloads):  # which ones: protobuf's own parser tells, with the reason
            try:
                self.cls.FromString(p or b"")
                kept.append(i)
            except DecodeError as e:
                errors.append((i, f"not a valid {self.desc.full_name}: {e}"))
        try:
            return self.handler.array_to_record_batch(pa.array([payloads[i] for i in kept], pa.binary())), kept, errors
        except ValueError:  # the two parsers disagree on some payload: ptars decides, one payload at a time
            batches, still = [], []
            for i in kept:
                try:
                    batches.append(self.handler.array_to_record_batch(pa.array([payloads[i]], pa.binary())))
                    still.append(i)
                except ValueError as e:
                    errors.append((i, f"not a valid {self.desc.full_name}: {e}"))
            if not batches:
                return self.handler.array_to_record_batch(pa.array([], pa.binary())), [], sorted(errors)
            table = pa.Table.from_batches(batches).combine_chunks()
            return table.to_batches()[0], still, sorted(errors)

    def decode(self, payloads: Sequence[bytes | None]) -> Decoded:
        raw, kept, errors = self._convert(payloads)
        rows = np.asarray(kept, np.int64)
        rowtimes = self._rowtimes(raw)
        missing = rowtimes == 0
        if missing.any():
            reason = f"{'.'.join(self.timestamp_path)} is missing: no event time"
            errors = sorted(errors + [(kept[i], reason) for i in np.flatnonzero(missing).tolist()])
            raw = raw.filter(pa.array(~missing))
            rowtimes, rows = rowtimes[~missing], rows[~missing]
        latest = int(rowtimes.max()) if len(rowtimes) else None
        conformed = {name: conform(raw.column(name)) for name, conform in self.conformers.items()}
        dropped = None
        if self.filters and len(raw):
            keep = passing(self.filters, conformed)
            if keep.false_count:
                mask = keep.to_numpy(zero_copy_only=False)
                dropped = self.sentinel(int(rowtimes[~mask].max()), events=int(keep.false_count))
                conformed = {name: column.filter(keep) for name, column in conformed.items()}
                rowtimes, rows = rowtimes[mask], rows[mask]
        n = len(rowtimes)
        arrays = [conformed[name] for name in self.emitted]
        arrays += self._computed(conformed, n)
        arrays += [pa.array(rowtimes, ARROW_TS)] + [pa.nulls(n, self.arrow_schema.field(c).type) for c in INTERNAL]
        return Decoded(pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema), errors, dropped, rows, latest)

    def _computed(self, columns: dict[str, pa.Array], n: int) -> list[pa.Array]:
        """UDF calls pushed into the reader (jobs/sql/pushdown.py), by the same kernels Spark would run."""
        out = []
        for c, udf in self.computed:
            args = [columns[v] if kind == "column" else pa.repeat(pa.scalar(v), n) for kind, v in c.args]
            out.append(udf.kernel(*args).cast(to_arrow_type(udf.return_type)))
        return out

    def sentinel(
        self, rowtime_micros: int, events: int = 0, late: int | None = None, watermark: int | None = None
    ) -> pa.RecordBatch:
        """One row with only `rowtime` and the internal columns set, dropped right after Spark's watermark: it stands
        for `events` events (`late` of them sent to the dead-letter topic), or carries the stream's `watermark`."""
        arrays = [pa.nulls(1, f.type) for f in self.arrow_schema][: -len(INTERNAL) - 1]
        arrays += [pa.array([rowtime_micros], ARROW_TS), pa.array([True]), pa.array([events], pa.int64())]
        arrays += [pa.array([late], pa.int64()), pa.array([watermark], ARROW_TS)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
