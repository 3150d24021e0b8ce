"""Protobuf messages → Spark schema and Arrow record batches, column by column.

Decoding is the hot path of every dagger (one Python call per event), so it is planned once per message type:
each needed top-level field gets an extractor that turns a list of parsed messages into one Arrow array.
Nested messages become structs, repeated fields lists, maps maps, enums their names, Timestamps timestamps.
Only the fields a query uses are decoded (`columns`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError, Message
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

import protos

TIMESTAMP = "google.protobuf.Timestamp"
ROWTIME = "rowtime"
SENTINEL = "__sentinel"  # set only on the end-of-input row that closes the last windows (`dagger run --once`)
MAX_DEPTH = 6  # recursive messages are cut here
ARROW_TS = pa.timestamp("us", tz="UTC")
WRAPPERS = {f"google.protobuf.{n}Value" for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool")}
WRAPPERS |= {"google.protobuf.StringValue", "google.protobuf.BytesValue"}

F = FieldDescriptor
_SCALARS: dict[int, tuple[T.DataType, pa.DataType]] = {
    F.TYPE_DOUBLE: (T.DoubleType(), pa.float64()),
    F.TYPE_FLOAT: (T.FloatType(), pa.float32()),
    F.TYPE_INT64: (T.LongType(), pa.int64()),
    F.TYPE_SINT64: (T.LongType(), pa.int64()),
    F.TYPE_SFIXED64: (T.LongType(), pa.int64()),
    F.TYPE_UINT64: (T.LongType(), pa.int64()),  # values above 2^63 do not fit Spark's long: kept as wrapped
    F.TYPE_FIXED64: (T.LongType(), pa.int64()),
    F.TYPE_INT32: (T.IntegerType(), pa.int32()),
    F.TYPE_SINT32: (T.IntegerType(), pa.int32()),
    F.TYPE_SFIXED32: (T.IntegerType(), pa.int32()),
    F.TYPE_UINT32: (T.LongType(), pa.int64()),
    F.TYPE_FIXED32: (T.LongType(), pa.int64()),
    F.TYPE_BOOL: (T.BooleanType(), pa.bool_()),
    F.TYPE_STRING: (T.StringType(), pa.string()),
    F.TYPE_BYTES: (T.BinaryType(), pa.binary()),
    F.TYPE_ENUM: (T.StringType(), pa.string()),
}


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


def _types(fd: FieldDescriptor, depth: int) -> tuple[T.DataType, pa.DataType]:
    """(Spark type, Arrow type) of one field, repeated-ness included."""
    if is_map(fd):
        k, v = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        (sk, ak), (sv, av) = _types(k, depth + 1), _types(v, depth + 1)
        return T.MapType(sk, sv, True), pa.map_(ak, av)
    if fd.type == F.TYPE_MESSAGE:
        full = fd.message_type.full_name
        if full == TIMESTAMP:
            single: tuple[T.DataType, pa.DataType] = (T.TimestampType(), ARROW_TS)
        elif full in WRAPPERS:
            single = _types(fd.message_type.fields_by_name["value"], depth + 1)
        else:
            single = _struct_types(fd.message_type, None, depth + 1)
    else:
        single = _SCALARS[fd.type]
    if _is_repeated(fd):
        return T.ArrayType(single[0], True), pa.list_(single[1])
    return single


def _struct_types(desc: Descriptor, columns: Sequence[str] | None, depth: int) -> tuple[T.StructType, pa.DataType]:
    fields = [f for f in desc.fields if columns is None or f.name in columns]
    if depth > MAX_DEPTH:
        fields = [f for f in fields if f.type != F.TYPE_MESSAGE or f.message_type.full_name == TIMESTAMP]
    pairs = [(f.name, *_types(f, depth)) for f in fields]
    return (
        T.StructType([T.StructField(n, s, True) for n, s, _ in pairs]),
        pa.struct([pa.field(n, a) for n, _, a in pairs]),
    )


def field_names(desc: Descriptor) -> list[str]:
    return [f.name for f in desc.fields]


# -- extraction: list of messages → Arrow array ----------------------------------------------------------

Extractor = Callable[[list[Any]], pa.Array]


def _ts_micros(ts: Any) -> int:
    return ts.seconds * 1_000_000 + ts.nanos // 1000


def _scalar_extractor(fd: FieldDescriptor, arrow: pa.DataType) -> Extractor:
    # map(attrgetter) iterates in C: the cheapest way to read one field of every message.
    get = attrgetter(fd.name)
    if fd.type == F.TYPE_ENUM:
        to_name = _enum_names(fd)
        return lambda msgs: to_name(np.fromiter(map(get, msgs), np.int64, len(msgs)))
    return lambda msgs: pa.array(list(map(get, msgs)), arrow)


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


def _message_extractor(fd: FieldDescriptor, arrow: pa.DataType, depth: int) -> Extractor:
    name, full = fd.name, fd.message_type.full_name
    if full == TIMESTAMP:

        def ts(msgs: list[Any]) -> pa.Array:
            return pa.array([_ts_micros(getattr(m, name)) if m.HasField(name) else None for m in msgs], ARROW_TS)

        return ts
    if full in WRAPPERS:

        def wrapper(msgs: list[Any]) -> pa.Array:
            return pa.array([getattr(m, name).value if m.HasField(name) else None for m in msgs], arrow)

        return wrapper
    children = _plan(fd.message_type, None, depth + 1)

    def struct(msgs: list[Any]) -> pa.Array:
        subs = [getattr(m, name) for m in msgs]
        mask = pa.array([not m.HasField(name) for m in msgs], pa.bool_())
        arrays = [ex(subs) for _, ex in children]
        return pa.StructArray.from_arrays(arrays, fields=list(arrow), mask=mask)

    return struct


def _repeated_extractor(fd: FieldDescriptor, arrow: pa.DataType, depth: int) -> Extractor:
    name = fd.name
    if is_map(fd):
        key_type = arrow.key_type
        values_of = _item_extractor(fd.message_type.fields_by_name["value"], arrow.item_type, depth)

        def mapping(msgs: list[Any]) -> pa.Array:
            offsets, keys, values = [0], [], []
            for m in msgs:
                d = getattr(m, name)
                keys.extend(d.keys())
                values.extend(d.values())
                offsets.append(len(keys))
            return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, key_type), values_of(values))

        return mapping

    item = _item_extractor(fd, arrow.value_type, depth)

    def repeated(msgs: list[Any]) -> pa.Array:
        offsets, flat = [0], []
        for m in msgs:
            flat.extend(getattr(m, name))
            offsets.append(len(flat))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), item(flat))

    return repeated


def _item_extractor(fd: FieldDescriptor, arrow: pa.DataType, depth: int) -> Extractor:
    """Extractor over the elements of a repeated field (the elements themselves, not messages holding them)."""
    if fd.type == F.TYPE_ENUM:
        to_name = _enum_names(fd)
        return lambda items: to_name(np.fromiter(items, np.int64, len(items)))
    if fd.type != F.TYPE_MESSAGE:
        return lambda items: pa.array(items, arrow)
    full = fd.message_type.full_name
    if full == TIMESTAMP:
        return lambda items: pa.array([_ts_micros(t) for t in items], ARROW_TS)
    if full in WRAPPERS:
        return lambda items: pa.array([w.value for w in items], arrow)
    children = _plan(fd.message_type, None, depth + 1)
    return lambda items: pa.StructArray.from_arrays([ex(items) for _, ex in children], fields=list(arrow))


def _plan(desc: Descriptor, columns: Sequence[str] | None, depth: int) -> list[tuple[str, Extractor]]:
    _, arrow = _struct_types(desc, columns, depth)
    plan = []
    for f in arrow:
        fd = desc.fields_by_name[f.name]
        if _is_repeated(fd):
            ex = _repeated_extractor(fd, f.type, depth)
        elif fd.type == F.TYPE_MESSAGE:
            ex = _message_extractor(fd, f.type, depth)
        else:
            ex = _scalar_extractor(fd, f.type)
        plan.append((f.name, ex))
    return plan


@dataclass
class Decoded:
    batch: pa.RecordBatch
    errors: list[tuple[int, str]] = field(default_factory=list)  # (index in the input, reason)


class Decoder:
    """Decodes payloads of one message type into Arrow batches with the stream's schema (+ `rowtime`).

    `timestamp_field` (dotted for nested) gives event time: a Timestamp, or an integer of epoch seconds or
    milliseconds (told apart by magnitude). A payload that does not parse, or has no event time, is an error
    for that event only.
    """

    def __init__(
        self,
        desc: Descriptor,
        timestamp_field: str,
        columns: Sequence[str] | None = None,
        computed: Sequence[Computed] = (),
    ) -> None:
        self.cls: type[Message] = message_factory.GetMessageClass(desc)
        self.desc = desc
        self.timestamp_path = timestamp_field.split(".")
        self._check_timestamp_field()
        wanted = None if columns is None else [c for c in field_names(desc) if c in set(columns)]
        self.plan = _plan(desc, wanted, 0)
        spark_struct, arrow_struct = _struct_types(desc, wanted, 0)
        self.computed: list[tuple[Computed, Any]] = []
        if computed:  # imported here: workers of daggers without such calls need not load the UDF library
            from jobs.udfs import SCALAR_UDFS

            self.computed = [(c, SCALAR_UDFS[c.function]) for c in computed]
        extra = [(c.name, udf.return_type) for c, udf in self.computed]
        self.spark_schema = T.StructType(
            [
                *spark_struct.fields,
                *(T.StructField(name, dtype) for name, dtype in extra),
                T.StructField(ROWTIME, T.TimestampType()),
                T.StructField(SENTINEL, T.BooleanType()),
            ]
        )
        self.arrow_schema = pa.schema(
            [
                *arrow_struct,
                *(pa.field(name, to_arrow_type(dtype)) for name, dtype in extra),
                pa.field(ROWTIME, ARROW_TS),
                pa.field(SENTINEL, pa.bool_()),
            ]
        )

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

    def _rowtime(self, m: Any) -> int:
        """Event time in µs of one message; 0 when it has none (unset, or the epoch itself)."""
        for part in self.timestamp_path[:-1]:
            if not m.HasField(part):
                return 0
            m = getattr(m, part)
        v = getattr(m, self.timestamp_path[-1])
        if hasattr(v, "seconds"):
            return _ts_micros(v)
        return int(v * 1000) if v > 100_000_000_000 else int(v * 1_000_000)  # epoch ms vs s

    def _rowtimes(self, msgs: list[Any]) -> npt.NDArray[np.int64]:
        """Event times in µs (0: none). A top-level field is read column-wise, a nested one message by message."""
        n = len(msgs)
        if len(self.timestamp_path) > 1:
            return np.fromiter(map(self._rowtime, msgs), np.int64, n)
        values = list(map(attrgetter(self.timestamp_path[0]), msgs))
        if self.desc.fields_by_name[self.timestamp_path[0]].type == F.TYPE_MESSAGE:  # a Timestamp
            seconds = np.fromiter(map(attrgetter("seconds"), values), np.int64, n)
            nanos = np.fromiter(map(attrgetter("nanos"), values), np.int64, n)
            return seconds * 1_000_000 + nanos // 1000
        epoch = np.array(values, dtype=np.float64) if n else np.zeros(0)
        return np.where(epoch > 100_000_000_000, epoch * 1000, epoch * 1_000_000).astype(np.int64)

    def _parse(self, payloads: Sequence[bytes | None]) -> tuple[list[Any], list[int], list[tuple[int, str]]]:
        """Parsed messages, their indexes in `payloads`, and the payloads that do not parse."""
        parse = self.cls.FromString
        try:  # the common case: every payload parses
            return list(map(parse, payloads)), list(range(len(payloads))), []
        except (DecodeError, TypeError):
            pass
        msgs: list[Any] = []
        kept: list[int] = []
        errors: list[tuple[int, str]] = []
        for i, p in enumerate(payloads):
            try:
                msgs.append(parse(p or b""))
                kept.append(i)
            except DecodeError as e:
                errors.append((i, f"not a valid {self.desc.full_name}: {e}"))
        return msgs, kept, errors

    def decode(self, payloads: Sequence[bytes | None]) -> Decoded:
        msgs, kept, errors = self._parse(payloads)
        rowtimes = self._rowtimes(msgs)
        missing = rowtimes == 0
        if missing.any():
            reason = f"{'.'.join(self.timestamp_path)} is missing: no event time"
            errors = sorted(errors + [(kept[i], reason) for i in np.flatnonzero(missing).tolist()])
            msgs = list(compress(msgs, ~missing))
            rowtimes = rowtimes[~missing]
        arrays = [ex(msgs) for _, ex in self.plan]
        arrays += self._computed({name: a for (name, _), a in zip(self.plan, arrays, strict=True)}, len(msgs))
        arrays += [pa.array(rowtimes, ARROW_TS), pa.nulls(len(msgs), pa.bool_())]
        return Decoded(pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema), errors)

    def _computed(self, columns: dict[str, pa.Array], n: int) -> list[pa.Array]:
        """UDF calls pushed into the reader (jobs/sql/pushdown.py), by the same kernels Spark would run."""
        out = []
        for c, udf in self.computed:
            args = [columns[v] if kind == "column" else pa.repeat(pa.scalar(v), n) for kind, v in c.args]
            out.append(udf.kernel(*args).cast(to_arrow_type(udf.return_type)))
        return out

    def sentinel(self, rowtime_micros: int) -> pa.RecordBatch:
        """One row with only `rowtime` and `__sentinel` set: advances the watermark, then is filtered out."""
        arrays = [pa.nulls(1, f.type) for f in self.arrow_schema][:-2]
        arrays += [pa.array([rowtime_micros], ARROW_TS), pa.array([True])]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
