"""Geo UDFs after raystack/dagger: S2Id, S2AreaInKm2, GeoHash, Distance. All vectorised over Arrow batches.

Policy shared by the library: NULL (or non-finite) data gives NULL; an invalid *parameter* that is almost always
a literal in the query (S2 level outside 0..30, geohash precision outside 1..12) fails the query with a clear
error, as the Java UDF would, so a typo is caught on the first batch instead of writing NULLs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import DoubleType, StringType

from jobs.udfs._arrow import (
    combined,
    float64_result,
    float_column,
    int_column,
    scalar_or_none,
    str_values,
    valid_mask,
    with_nulls,
)
from jobs.udfs.registry import UdfDef
from jobs.udfs.s2 import MAX_LEVEL, parse_cell_ids, s2_cell_areas_km2, s2_cell_ids

# raystack Distance: haversine on a sphere of radius 6371 km (Distance.java RADIUS_OF_EARTH).
EARTH_RADIUS_KM = 6371.0
GEOHASH_BASE32 = "0123456789bcdefghjkmnpqrstuvwxyz"
GEOHASH_MAX_PRECISION = 12  # 60 bits: what com.github.davidmoten.geo (raystack's GeoHash) supports
_BASE32_CODES = np.frombuffer(GEOHASH_BASE32.encode(), dtype=np.uint8)


# --- S2Id ---------------------------------------------------------------------------------------------------------


def s2_id(lat: pa.Array, lng: pa.Array, level: pa.Array) -> pa.Array:
    """S2Id kernel: decimal signed cell id strings (Java ``Long.toString(S2CellId.id())``)."""
    lat_v, lat_ok = float_column(lat)
    lng_v, lng_ok = float_column(lng)
    lvl_v, lvl_ok = int_column(level)
    valid = lat_ok & lng_ok & lvl_ok
    bad = valid & ((lvl_v < 0) | (lvl_v > MAX_LEVEL))
    if bad.any():
        raise ValueError(f"S2Id: level must be an integer in 0..{MAX_LEVEL}, got {int(lvl_v[bad][0])}")
    uniform = scalar_or_none(lvl_v, valid)
    levels: int | npt.NDArray[np.int64] = int(uniform) if uniform is not None else np.where(valid, lvl_v, 0)
    ids = s2_cell_ids(np.where(valid, lat_v, np.nan), np.where(valid, lng_v, np.nan), levels)
    # Arrow's C++ integer->string cast: no Python loop over a million ids.
    return pc.cast(pa.array(ids, type=pa.int64(), mask=~valid), pa.string())


def s2_area_in_km2(s2id: pa.Array) -> pa.Array:
    """S2AreaInKm2 kernel: exact cell area in km^2; NULL for NULL, unparsable or invalid ids."""
    arr = combined(s2id)
    if pa.types.is_integer(arr.type):
        ids, ok = int_column(arr)
    else:
        # A batch holds few distinct cells: parse each distinct string once.
        encoded = pc.dictionary_encode(arr if pa.types.is_string(arr.type) else pc.cast(arr, pa.string()))
        if len(encoded.dictionary) == 0:
            return pa.nulls(len(arr), type=pa.float64())
        dict_ids, dict_ok = parse_cell_ids(str_values(encoded.dictionary))
        idx = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
        ids, ok = dict_ids[idx], dict_ok[idx] & valid_mask(encoded.indices)
    uniq, inverse = np.unique(np.where(ok, ids, 0), return_inverse=True)
    areas = s2_cell_areas_km2(uniq)[inverse]
    ok &= np.isfinite(areas)
    return float64_result(np.where(ok, areas, 0.0), ok)


# --- GeoHash -------------------------------------------------------------------------------------------------------


def _to180(lng: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """davidmoten Position.to180: d < 0 -> -to180(|d|); d > 180 -> d - floor((d + 180) / 360) * 360."""
    mag = np.abs(lng)
    wrapped = np.where(mag > 180, mag - np.floor((mag + 180) / 360) * 360, mag)
    return np.where(lng < 0, -wrapped, wrapped)


def _bisect(value: npt.NDArray[np.float64], low: float, span: float, nbits: int) -> npt.NDArray[np.uint64]:
    """The ``nbits``-bit index geohash's repeated ``value >= mid`` halving of [low, low+span] ends in.

    The halving midpoints are exactly the grid low + k*span/2^nbits (dyadic, representable), so the index is the
    largest k with value >= grid(k), clamped to the last cell: one floor() plus an exact one-step correction.
    """
    count = 1 << nbits
    width = span / count
    k = np.clip(np.floor((value - low) / width), 0, count - 1)
    k = np.where(value < low + k * width, k - 1, k)
    k = np.where((k < count - 1) & (value >= low + (k + 1) * width), k + 1, k)
    return np.clip(k, 0, count - 1).astype(np.uint64)


def _spread_bits(v: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Move bit b of a 32-bit value to bit 2b (Morton interleave)."""
    v = v & np.uint64(0xFFFFFFFF)
    for shift, mask in ((16, 0x0000FFFF0000FFFF), (8, 0x00FF00FF00FF00FF), (4, 0x0F0F0F0F0F0F0F0F)):
        v = (v | (v << np.uint64(shift))) & np.uint64(mask)
    v = (v | (v << np.uint64(2))) & np.uint64(0x3333333333333333)
    return (v | (v << np.uint64(1))) & np.uint64(0x5555555555555555)


def geohash_codes(lat: npt.ArrayLike, lng: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """(n, 12) base32 ASCII codes of the 12-character geohash; shorter geohashes are prefixes of it.

    Latitudes must be within [-90, 90] (callers mask the rest); longitudes are wrapped as davidmoten's to180.
    """
    lat_a = np.asarray(lat, dtype=np.float64)
    lng_a = _to180(np.asarray(lng, dtype=np.float64))
    bits = GEOHASH_MAX_PRECISION * 5 // 2  # 30 longitude bits, then 30 latitude bits, interleaved lon first
    code = (_spread_bits(_bisect(lng_a, -180.0, 360.0, bits)) << np.uint64(1)) | _spread_bits(
        _bisect(lat_a, -90.0, 180.0, bits)
    )
    shifts = np.arange(55, -1, -5, dtype=np.uint64)
    digits = ((code[:, None] >> shifts[None, :]) & np.uint64(31)).astype(np.intp)
    return _BASE32_CODES[digits]


def geohash_encode(lat: float, lng: float, precision: int) -> str:
    """One geohash (convenience for callers outside Spark)."""
    if not 1 <= precision <= GEOHASH_MAX_PRECISION:
        raise ValueError(f"geohash precision must be in 1..{GEOHASH_MAX_PRECISION}, got {precision}")
    return geohash_codes([lat], [lng])[0, :precision].tobytes().decode()


def geo_hash(lat: pa.Array, lng: pa.Array, precision: pa.Array) -> pa.Array:
    """GeoHash kernel: geohash of ``precision`` characters; NULL for NULL/non-finite input or |lat| > 90."""
    lat_v, lat_ok = float_column(lat)
    lng_v, lng_ok = float_column(lng)
    prec, prec_ok = int_column(precision)
    valid = lat_ok & lng_ok & prec_ok
    bad = valid & ((prec < 1) | (prec > GEOHASH_MAX_PRECISION))
    if bad.any():
        raise ValueError(f"GeoHash: precision must be in 1..{GEOHASH_MAX_PRECISION}, got {int(prec[bad][0])}")
    valid &= (lat_v >= -90) & (lat_v <= 90)  # davidmoten rejects these (IllegalArgumentException)
    chars = geohash_codes(np.where(valid, lat_v, 0.0), np.where(valid, lng_v, 0.0))
    lengths = np.where(valid, prec, 0).astype(np.int32)
    # Variable-width string array straight from buffers: row r keeps its first lengths[r] characters.
    keep = np.arange(GEOHASH_MAX_PRECISION)[None, :] < lengths[:, None]
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    out = pa.StringArray.from_buffers(
        len(lengths), pa.py_buffer(offsets.tobytes()), pa.py_buffer(chars[keep].tobytes())
    )
    return with_nulls(out, valid)


# --- Distance ------------------------------------------------------------------------------------------------------


def haversine_km(
    lat1: npt.ArrayLike, lng1: npt.ArrayLike, lat2: npt.ArrayLike, lng2: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """raystack Distance, operation for operation: haversine, radius 6371 km, radians as ``deg * PI / 180``."""
    la1, lo1, la2, lo2 = (np.asarray(a, dtype=np.float64) for a in (lat1, lng1, lat2, lng2))
    dlat = (la2 - la1) * np.pi / 180
    dlng = (lo2 - lo1) * np.pi / 180
    sin_lat, sin_lng = np.sin(dlat / 2), np.sin(dlng / 2)
    a = sin_lat * sin_lat + np.cos(la1 * np.pi / 180) * np.cos(la2 * np.pi / 180) * sin_lng * sin_lng
    # Rounding can push a a hair above 1 for antipodal points; Java would return NaN there, we return ~pi*R.
    c = 2 * np.arctan2(np.sqrt(a), np.sqrt(np.maximum(0.0, 1 - a)))
    return EARTH_RADIUS_KM * c


def distance(lat1: pa.Array, lng1: pa.Array, lat2: pa.Array, lng2: pa.Array) -> pa.Array:
    """Distance kernel: great-circle km; NULL if any argument is NULL or non-finite."""
    cols = [float_column(c) for c in (lat1, lng1, lat2, lng2)]
    valid = cols[0][1] & cols[1][1] & cols[2][1] & cols[3][1]
    km = haversine_km(*(np.where(valid, v, 0.0) for v, _ in cols))
    return float64_result(km, valid)


GEO_UDFS: tuple[UdfDef, ...] = (
    UdfDef(
        "S2Id",
        s2_id,
        StringType(),
        "S2Id(latitude DOUBLE, longitude DOUBLE, level INT) -> STRING",
        "Decimal id of the level-`level` S2 cell containing the point, signed 64-bit as Java's "
        "Long.toString(S2CellId.id()) (so CAST(... AS BIGINT) works). NULL if any argument is NULL or "
        "non-finite; a level outside 0..30 fails the query.",
        "SELECT S2Id(driver_location.latitude, driver_location.longitude, 13) AS s2_id, COUNT(*) AS n\n"
        "FROM booking GROUP BY S2Id(driver_location.latitude, driver_location.longitude, 13)",
    ),
    UdfDef(
        "S2AreaInKm2",
        s2_area_in_km2,
        DoubleType(),
        "S2AreaInKm2(s2id STRING) -> DOUBLE",
        "Exact area in km^2 of the S2 cell with that decimal id (signed or unsigned; BIGINT also accepted), "
        "S2Cell.exactArea() * 510072000 / (4*pi). NULL for NULL, unparsable or invalid ids.",
        "SELECT s2_id, S2AreaInKm2(s2_id) AS area_km2 FROM cells",
    ),
    UdfDef(
        "GeoHash",
        geo_hash,
        StringType(),
        "GeoHash(latitude DOUBLE, longitude DOUBLE, precision INT) -> STRING",
        "Geohash of `precision` characters (1..12) of the WGS84 point; longitude wrapped into [-180, 180]. "
        "NULL if any argument is NULL/non-finite or |latitude| > 90; a precision outside 1..12 fails the query.",
        "SELECT GeoHash(pickup.latitude, pickup.longitude, 6) AS geohash_pickup, COUNT(*) AS n\n"
        "FROM booking GROUP BY GeoHash(pickup.latitude, pickup.longitude, 6)",
    ),
    UdfDef(
        "Distance",
        distance,
        DoubleType(),
        "Distance(latitude1 DOUBLE, longitude1 DOUBLE, latitude2 DOUBLE, longitude2 DOUBLE) -> DOUBLE",
        "Great-circle (haversine) distance in km on a sphere of radius 6371 km. NULL if any argument is NULL "
        "or non-finite.",
        "SELECT Distance(pickup.latitude, pickup.longitude, dropoff.latitude, dropoff.longitude) AS km FROM booking",
    ),
)
