"""Collection UDFs after raystack/dagger: ElementAt, ListContains, MapGet, Split.

A Spark Python UDF has one fixed result type, so the functions raystack types as "Object" return STRING: the
element's Java ``String.valueOf`` (``3.0`` for a double, ``true`` for a boolean), which is what raystack's
ElementAt returns too (its output type strategy is STRING) and what its docs CAST from. Inputs may be of any
type: arrays of any element type, maps as Spark MAP or as raystack's ``Row[]`` (ARRAY<STRUCT<key, value>>).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import ArrayType, BooleanType, StringType

from jobs.udfs._arrow import combined, int_column, str_values, valid_mask
from jobs.udfs.java import java_double_to_string, java_float_to_string
from jobs.udfs.registry import UdfDef

# --- Java String.valueOf over Arrow columns ---------------------------------------------------------------------------


def _json_default(value: object) -> str:
    return str(value)


def java_strings(arr: pa.Array) -> pa.Array:
    """Each value as Java's ``String.valueOf`` prints it (NULL stays NULL). Nested values become JSON."""
    arr = combined(arr)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(pa.string())
    if pa.types.is_integer(t):
        return arr.cast(pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, pa.scalar("true"), pa.scalar("false"))
    if pa.types.is_floating(t):
        fmt = java_float_to_string if t == pa.float32() else java_double_to_string
        return pa.array([None if v is None else fmt(v) for v in arr.to_pylist()], type=pa.string())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), type=pa.string())
    out: list[str | None] = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
        elif isinstance(v, Decimal):
            out.append(str(v))
        elif isinstance(v, bytes):
            out.append(v.decode("utf-8", errors="replace"))
        elif hasattr(v, "isoformat"):
            out.append(v.isoformat())
        else:
            out.append(json.dumps(v, default=_json_default, separators=(",", ":")))
    return pa.array(out, type=pa.string())


def _list_array(arr: pa.Array, fn: str) -> pa.Array:
    """The argument as a list array; a MAP becomes the list of its (key, value) entry structs."""
    arr = combined(arr)
    if pa.types.is_null(arr.type):
        return pa.array([None] * len(arr), type=pa.list_(pa.null()))
    if pa.types.is_map(arr.type):
        # Arrow's list kernels (flatten, parent indices) have no map kernels; a map *is* a list of entries.
        offsets = arr.offsets.to_numpy(zero_copy_only=False)
        entries = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        mask = pc.is_null(arr) if arr.null_count else None
        return pa.ListArray.from_arrays(pa.array(offsets - offsets[0], type=pa.int32()), entries, mask=mask)
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        raise TypeError(f"{fn}: the first argument must be an ARRAY (or MAP), got {arr.type}")
    return arr


def _take_or_null(values: pa.Array, positions: npt.NDArray[np.int64], ok: npt.NDArray[np.bool_]) -> pa.Array:
    if not ok.any():
        return pa.nulls(len(positions), type=values.type)
    return values.take(pa.array(np.where(ok, positions, 0), type=pa.int64(), mask=~ok))


# --- ElementAt --------------------------------------------------------------------------------------------------------


def _element_positions(
    lists: pa.Array, index: pa.Array, negative_from_end: bool
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Absolute positions in ``lists.values`` of element ``index`` of each list, and where one exists."""
    idx, idx_ok = int_column(index)
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    pos = np.where(idx < 0, lengths + idx, idx) if negative_from_end else idx
    ok = valid_mask(lists) & idx_ok & (pos >= 0) & (pos < lengths)
    starts = lists.offsets.to_numpy(zero_copy_only=False)[:-1].astype(np.int64)
    return starts + pos, ok


def _struct_path(values: pa.Array, path: str) -> pa.Array | None:
    """Field ``a.b.c`` of a STRUCT column, or None if the path does not exist."""
    current = values
    for name in path.split("."):
        if not pa.types.is_struct(current.type) or current.type.get_field_index(name) < 0:
            return None
        current = pc.struct_field(current, name)
    return current


def element_at(*args: pa.Array) -> pa.Array:
    """ElementAt kernel, raystack's three forms:

    - ``ElementAt(array, index)``: element ``index`` (0-based, negative counts from the end) as a string;
      NULL if the array is NULL, the index out of range, or the element NULL.
    - ``ElementAt(array, pathOfArray, index, path[, tableName])``: field ``path`` (dotted) of struct element
      ``index`` (0-based) as a string; ``""`` if the array is NULL, the index out of range or negative, the path
      missing or the value NULL. ``pathOfArray`` and ``tableName`` name the proto field and stream for raystack's
      descriptor lookup; Spark rows carry their schema, so they are accepted and not needed.
    """
    if len(args) == 2:
        lists = _list_array(args[0], "ElementAt")
        positions, ok = _element_positions(lists, args[1], negative_from_end=True)
        return java_strings(_take_or_null(lists.values, positions, ok))
    if len(args) not in (4, 5):
        raise TypeError(f"ElementAt takes 2, 4 or 5 arguments, got {len(args)}")
    lists = _list_array(args[0], "ElementAt")
    positions, ok = _element_positions(lists, args[2], negative_from_end=False)
    elements = _take_or_null(lists.values, positions, ok)
    paths = np.array(str_values(args[3]), dtype=object)
    out = pa.array([""] * len(lists), type=pa.string())
    for path in set(paths[ok].tolist()) - {None}:
        rows = ok & (paths == path)
        field = _struct_path(elements, path)
        if field is not None:
            text = java_strings(field).fill_null("")
            out = pc.if_else(pa.array(rows), text, out)
    return out


# --- ListContains -----------------------------------------------------------------------------------------------------


def _aligned(flat: pa.Array, item: pa.Array) -> tuple[pa.Array, pa.Array]:
    """``flat`` and ``item`` in one comparable type: the item cast to the element type, else both as strings."""
    if item.type == flat.type:
        return flat, item
    try:
        return flat, item.cast(flat.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return java_strings(flat), java_strings(item)


def _matches(flat: pa.Array, wanted: pa.Array) -> npt.NDArray[np.bool_]:
    """Element-wise Java ``equals``: NULL equals NULL (Arrays.asList(...).contains(null))."""
    flat, wanted = _aligned(flat, wanted)
    eq = pc.fill_null(pc.equal(flat, wanted), False).to_numpy(zero_copy_only=False)
    both_null = ~valid_mask(flat) & ~valid_mask(wanted)
    return eq | both_null


def list_contains(lists: pa.Array, item: pa.Array) -> pa.Array:
    """ListContains kernel: whether the array holds ``item``; false for a NULL array (never NULL)."""
    lists = _list_array(lists, "ListContains")
    item = combined(item)
    n = len(lists)
    flat = lists.flatten()
    if len(flat) == 0:
        return pa.array(np.zeros(n, dtype=bool))
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    hit = _matches(flat, item.take(pa.array(parents)))
    return pa.array(np.bincount(parents[hit], minlength=n) > 0)


# --- MapGet -----------------------------------------------------------------------------------------------------------


def map_get(mapping: pa.Array, key: pa.Array) -> pa.Array:
    """MapGet kernel: the value of the first entry whose key equals ``key``, as a string; NULL if none.

    Accepts a Spark MAP or raystack's ``Row[]`` form, an ARRAY of STRUCTs whose first field is the key and second
    the value.
    """
    entries = _list_array(mapping, "MapGet")
    key = combined(key)
    n = len(entries)
    flat = entries.flatten()
    if pa.types.is_struct(flat.type) and flat.type.num_fields >= 2:
        keys, values = flat.field(0), flat.field(1)
    else:
        raise TypeError(
            f"MapGet: the first argument must be a MAP or an ARRAY of (key, value) STRUCTs, got {flat.type}"
        )
    if len(flat) == 0:
        return pa.nulls(n, type=pa.string())
    parents = pc.list_parent_indices(entries).to_numpy(zero_copy_only=False)
    hit = _matches(keys, key.take(pa.array(parents))) & valid_mask(keys)
    found_rows, first = np.unique(parents[hit], return_index=True)
    positions = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    positions[found_rows] = np.flatnonzero(hit)[first]
    ok[found_rows] = True
    return java_strings(_take_or_null(values, positions, ok))


# --- Split ------------------------------------------------------------------------------------------------------------

_REGEX_META = frozenset(".$|()[{^?*+\\")


@cache
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def _literal(regex: str) -> str | None:
    """The literal text a regex matches when Java's String.split fast path applies (``","``, ``"\\\\."``)."""
    if len(regex) == 1 and regex not in _REGEX_META:
        return regex
    if len(regex) == 2 and regex[0] == "\\" and not regex[1].isalnum():
        return regex[1]
    return None


def java_split(text: str, regex: str, limit: int = 0) -> list[str]:
    """``text.split(regex, limit)`` as java.lang.String does it (Java 8+): no leading empty string for a zero-width
    match at the start; ``limit == 0`` drops trailing empty strings; no match at all gives ``[text]``."""
    literal = _literal(regex)
    if literal is not None:
        parts = text.split(literal, limit - 1) if limit > 0 else text.split(literal)
        if len(parts) == 1:
            return [text]
    else:
        parts, index = [], 0
        for match in _compiled(regex).finditer(text):
            if limit > 0 and len(parts) >= limit - 1:
                break
            if index == 0 and match.start() == 0 and match.end() == 0:
                continue  # zero-width match at the beginning: no leading empty string
            parts.append(text[index : match.start()])
            index = match.end()
        if index == 0 and not parts:
            return [text]
        parts.append(text[index:])
    if limit == 0:
        while parts and parts[-1] == "":
            parts.pop()
    return parts


def split(*args: pa.Array) -> pa.Array:
    """Split kernel.

    ``Split(input, delimiter)`` is raystack's: Java ``input.split(delimiter)`` (delimiter is a regex, trailing
    empty strings dropped), an empty delimiter means a space, and a NULL input or delimiter gives an empty array.
    Registering it shadows Spark's built-in ``split`` in the session, so the 3-argument form keeps Spark's
    meaning: ``Split(str, regex, limit)`` = Java ``str.split(regex, limit > 0 ? limit : -1)``, NULL for NULL.
    """
    if len(args) not in (2, 3):
        raise TypeError(f"Split takes 2 or 3 arguments, got {len(args)}")
    texts, delimiters = str_values(args[0]), str_values(args[1])
    if len(args) == 2:
        out: list[list[str] | None] = [
            [] if t is None or d is None else java_split(t, d or " ") for t, d in zip(texts, delimiters, strict=True)
        ]
        return pa.array(out, type=pa.list_(pa.string()))
    limits, limit_ok = int_column(args[2])
    out = [
        None if t is None or d is None or not ok else java_split(t, d, int(lim) if lim > 0 else -1)
        for t, d, lim, ok in zip(texts, delimiters, limits, limit_ok, strict=True)
    ]
    return pa.array(out, type=pa.list_(pa.string()))


COLLECTION_UDFS: tuple[UdfDef, ...] = (
    UdfDef(
        "ElementAt",
        element_at,
        StringType(),
        "ElementAt(array ARRAY<T>, index INT) -> STRING | "
        "ElementAt(array ARRAY<STRUCT>, pathOfArray STRING, index INT, path STRING[, tableName STRING]) -> STRING",
        "Element `index` (0-based; negative counts from the end) as a string, NULL if absent; with a path: "
        "field `path` of struct element `index`, '' if absent.",
        "SELECT ElementAt(cancel_reasons, -1) AS last_reason,\n"
        "       CAST(ElementAt(routes, 'routes', 0, 'start.latitude') AS DOUBLE) AS first_lat FROM booking",
    ),
    UdfDef(
        "ListContains",
        list_contains,
        BooleanType(),
        "ListContains(inputList ARRAY<STRING>, item STRING) -> BOOLEAN",
        "Whether the array holds `item` (NULL matches NULL); false for a NULL array.",
        "SELECT order_number FROM booking WHERE ListContains(tags, 'priority')",
    ),
    UdfDef(
        "MapGet",
        map_get,
        StringType(),
        "MapGet(inputMap MAP<K, V> | ARRAY<STRUCT<key, value>>, key K) -> STRING",
        "Value for `key` as a string (first matching entry); NULL if absent or the map is NULL.",
        "SELECT CAST(MapGet(metadata, 'data1') AS STRING) AS data1 FROM booking",
    ),
    UdfDef(
        "Split",
        split,
        ArrayType(StringType()),
        "Split(inputString STRING, delimiter STRING) -> ARRAY<STRING>",
        "Java String.split(delimiter): delimiter is a regex, trailing empty strings dropped, '' means ' '; "
        "empty array for a NULL input or delimiter. Split(str, regex, limit) keeps Spark's split semantics.",
        "SELECT Split(route_ids, ',') AS ids, ElementAt(Split(service_area, '\\\\.'), 0) AS city FROM booking",
    ),
)
