"""The dagger UDF library (jobs/udfs) against independent references, then through Spark SQL.

References: s2sphere (and s2cell) for S2, published geohash vectors plus a textbook bisection, haversine and the
spherical law of cosines computed here, zoneinfo/datetime for calendars, and vectors printed by OpenJDK 17
running raystack's own Java code (java.util.Calendar, SimpleDateFormat, String.split, Double.toString).
"""

from __future__ import annotations

import datetime as dt
import math
import multiprocessing
import re
import zoneinfo
from concurrent.futures import ProcessPoolExecutor
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import s2cell
import s2sphere
from daggers.events import booking_log_pb2
from pyspark.sql import SparkSession

from jobs.engine.plan import DaggerPlan, plan_dagger
from jobs.spec import parse_spec
from jobs.udfs import AGGREGATES_AT_SQL_LEVEL, SCALAR_UDFS, SHADOWED_BY_BUILTINS, register_udfs
from jobs.udfs.collections import element_at, java_split, list_contains, map_get, split
from jobs.udfs.geo import distance, geo_hash, geohash_encode, haversine_km, s2_area_in_km2, s2_id
from jobs.udfs.java import java_double_to_string, java_float_to_string, resolve_zone
from jobs.udfs.s2 import LOOKUP_IJ, LOOKUP_POS, s2_cell_areas_km2, s2_cell_id_scalar, s2_cell_ids, s2_cell_levels
from jobs.udfs.time import (
    end_of_month,
    end_of_week,
    format_time_in_zone,
    start_of_month,
    start_of_week,
    timestamp_from_unix,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "udfs.md"
UTC = dt.UTC


# --- references ----------------------------------------------------------------------------------------------------


def _s2sphere_leaf_chunk(points: tuple[list[float], list[float]]) -> list[int]:
    lats, lngs = points
    return [
        s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(a, b)).id() for a, b in zip(lats, lngs, strict=True)
    ]


def s2sphere_ids(lat: np.ndarray, lng: np.ndarray, level: int) -> np.ndarray:
    """s2sphere's cell ids (parent(level) of the leaf), as signed int64."""
    ids = [
        s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(a, b)).parent(level).id()
        for a, b in zip(lat.tolist(), lng.tolist(), strict=True)
    ]
    return np.array(ids, dtype=np.uint64).view(np.int64)


def signed(cell_id: int) -> int:
    return cell_id - (1 << 64) if cell_id >= 1 << 63 else cell_id


def random_points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Half uniform on the sphere, half uniform in (lat, lng) (denser near the poles)."""
    rng = np.random.default_rng(seed)
    half = n // 2
    lat = np.concatenate([np.degrees(np.arcsin(rng.uniform(-1, 1, half))), rng.uniform(-90, 90, n - half)])
    lng = rng.uniform(-180, 180, n)
    return lat, lng


def edge_points() -> tuple[np.ndarray, np.ndarray]:
    """Poles, antimeridian, zeros, cube-face edges and corners, out-of-range lat/lng, and S2 cell vertices."""
    corner = math.degrees(math.atan(1 / math.sqrt(2)))  # lat of the cube corners
    pts: list[tuple[float, float]] = []
    for lat in (90.0, -90.0, 89.999999999, -89.9999999999, 0.0, -0.0, 45.0, -45.0, corner, -corner, 1e-300, 5e-324):
        for lng in (0.0, -0.0, 180.0, -180.0, 45.0, -45.0, 135.0, -135.0, 90.0, -90.0, 1e-300, 179.99999999999997):
            pts.append((lat, lng))
    pts += [(95.0, 10.0), (-100.0, 20.0), (180.0, 0.0), (1000.0, 3.0), (10.0, 540.0), (10.0, -720.5), (45.0, 1e6)]
    # Vertices and edge midpoints of random cells at every level (points exactly on cell edges, up to rounding),
    # and their float neighbours on both sides.
    rng = np.random.default_rng(11)
    for level in range(31):
        for lat, lng in zip(*random_points(6, 100 + level), strict=True):
            cell = s2sphere.Cell(s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level))
            for k in range(4):
                a, b = cell.get_vertex(k), cell.get_vertex((k + 1) % 4)
                for p in (a, s2sphere.Point(a[0] + b[0], a[1] + b[1], a[2] + b[2]).normalize()):
                    ll = s2sphere.LatLng.from_point(p)
                    v_lat, v_lng = ll.lat().degrees, ll.lng().degrees
                    for d_lat, d_lng in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                        pts.append(
                            (
                                float(np.nextafter(v_lat, math.copysign(math.inf, d_lat)) if d_lat else v_lat),
                                float(np.nextafter(v_lng, math.copysign(math.inf, d_lng)) if d_lng else v_lng),
                            )
                        )
    rng.shuffle(pts)
    arr = np.array(pts, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


def textbook_geohash(lat: float, lng: float, precision: int) -> str:
    """The classic bisection (geohash.org / geohash.js), one bit at a time."""
    lat_lo, lat_hi, lng_lo, lng_hi = -90.0, 90.0, -180.0, 180.0
    bits, even, out = [], True, []
    while len(out) < precision:
        if even:
            mid = (lng_lo + lng_hi) / 2
            bits.append(lng >= mid)
            lng_lo, lng_hi = (mid, lng_hi) if lng >= mid else (lng_lo, mid)
        else:
            mid = (lat_lo + lat_hi) / 2
            bits.append(lat >= mid)
            lat_lo, lat_hi = (mid, lat_hi) if lat >= mid else (lat_lo, mid)
        even = not even
        if len(bits) == 5:
            out.append("0123456789bcdefghjkmnpqrstuvwxyz"[sum(b << (4 - i) for i, b in enumerate(bits))])
            bits = []
    return "".join(out)


def python_haversine(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = math.radians(lat2 - lat1), math.radians(lng2 - lng1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371 * math.asin(min(1.0, math.sqrt(a)))


def vincenty_sphere_km(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    """Great-circle distance by the Vincenty formula for a sphere (a different formula from haversine)."""
    p1, p2, dl = math.radians(lat1), math.radians(lat2), math.radians(lng2 - lng1)
    num = math.hypot(
        math.cos(p2) * math.sin(dl), math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    )
    den = math.sin(p1) * math.sin(p2) + math.cos(p1) * math.cos(p2) * math.cos(dl)
    return 6371 * math.atan2(num, den)


def java_wall_to_epoch_ms(wall: dt.datetime, tz: dt.tzinfo) -> int:
    """A lenient java.util.Calendar's instant for a wall time: the later reading of an ambiguous time."""
    readings = [wall.replace(tzinfo=tz, fold=f) for f in (0, 1)]
    return max((r - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1) for r in readings)


def local_date(epoch_ms: int, tz: dt.tzinfo) -> dt.date:
    return (dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=epoch_ms)).astimezone(tz).date()


# --- S2 ------------------------------------------------------------------------------------------------------------


def test_hilbert_lookup_tables_match_s2sphere() -> None:
    assert LOOKUP_POS.tolist() == list(s2sphere.sphere.LOOKUP_POS)
    assert LOOKUP_IJ.tolist() == list(s2sphere.sphere.LOOKUP_IJ)


def test_s2_raystack_vector() -> None:
    # raystack S2IdTest: the National Monument, Jakarta, level 13.
    assert s2_cell_ids([-6.170024], [106.8243203], 13).tolist() == [3344474489181175808]


def test_s2_cell_ids_match_s2sphere_on_random_points() -> None:
    lat, lng = random_points(300_000, seed=2026)  # s2sphere is pure Python: a million took half a minute
    chunks = [(lat[i : i + 50_000].tolist(), lng[i : i + 50_000].tolist()) for i in range(0, len(lat), 50_000)]
    # spawn, not fork: the process may already run a JVM (the session-scoped Spark fixture) and its threads.
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        leaves = np.array([c for chunk in pool.map(_s2sphere_leaf_chunk, chunks) for c in chunk], dtype=np.uint64)
    assert np.array_equal(s2_cell_ids(lat, lng, 30), leaves.view(np.int64))
    for level in (0, 1, 5, 13, 17, 24, 29):
        lsb = np.uint64(1 << (2 * (30 - level)))
        expected = ((leaves & ~(lsb - np.uint64(1))) | lsb).view(np.int64)  # S2CellId.parent(level)
        assert np.array_equal(s2_cell_ids(lat, lng, level), expected), level
    # ... and s2sphere's own parent() on a sample, so the bit arithmetic above is not the only reference.
    sample = slice(0, 20_000)
    for level in (13, 30):
        assert np.array_equal(
            s2_cell_ids(lat[sample], lng[sample], level), s2sphere_ids(lat[sample], lng[sample], level)
        )


def test_s2_cell_ids_match_s2cell() -> None:
    lat, lng = random_points(100_000, seed=7)
    for level in (13, 30):
        expected = [
            signed(s2cell.lat_lon_to_cell_id(a, b, level)) for a, b in zip(lat.tolist(), lng.tolist(), strict=True)
        ]
        assert s2_cell_ids(lat, lng, level).tolist() == expected


def test_s2_cell_ids_edge_cases_every_level() -> None:
    lat, lng = edge_points()
    assert len(lat) > 3000
    for level in range(31):
        assert np.array_equal(s2_cell_ids(lat, lng, level), s2sphere_ids(lat, lng, level)), level


def test_s2_scalar_fallback_matches_s2sphere_on_edges() -> None:
    # The exactness guard recomputes near-edge points with this path: it must be S2 itself.
    lat, lng = edge_points()
    for level in (0, 13, 30):
        got = [s2_cell_id_scalar(a, b, level) for a, b in zip(lat.tolist(), lng.tolist(), strict=True)]
        assert got == s2sphere_ids(lat, lng, level).tolist()


def test_s2_guard_changes_nothing_when_numpy_trig_is_libm() -> None:
    lat, lng = random_points(200_000, seed=5)
    for level in (13, 30):
        assert np.array_equal(s2_cell_ids(lat, lng, level), s2_cell_ids(lat, lng, level, guard=False))


def test_s2_per_row_levels_invalid_and_non_finite() -> None:
    lat, lng = random_points(5_000, seed=9)
    levels = np.random.default_rng(1).integers(0, 31, len(lat))
    expected = [s2_cell_id_scalar(a, b, int(c)) for a, b, c in zip(lat, lng, levels, strict=True)]
    assert s2_cell_ids(lat, lng, levels).tolist() == expected
    assert s2_cell_ids([math.nan, 1.0, 1.0], [1.0, math.inf, 1.0], 13).tolist()[:2] == [0, 0]
    assert s2_cell_ids([], [], 13).tolist() == []
    for bad in (-1, 31, 2.5):
        with pytest.raises(ValueError, match="level"):
            s2_cell_ids([1.0], [2.0], bad)
    assert s2_cell_levels(s2_cell_ids(lat, lng, levels)).tolist() == levels.tolist()
    assert s2_cell_levels([0, 2, signed((7 << 61) | 1)]).tolist() == [-1, -1, -1]  # none, odd lsb, face 7


def test_s2_area_matches_s2sphere_exact_area() -> None:
    lat, lng = random_points(300, seed=3)
    ids, expected = [], []
    for i, (a, b) in enumerate(zip(lat.tolist(), lng.tolist(), strict=True)):
        cell_id = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(a, b)).parent(i % 31)
        ids.append(signed(cell_id.id()))
        expected.append(s2sphere.Cell(cell_id).exact_area() * 510_072_000 / (4 * math.pi))
    # S2 promises ~6 digits for exactArea of the smallest cells (l'Huilier on nearly-flat triangles).
    levels = np.arange(len(ids)) % 31
    got = s2_cell_areas_km2(ids)
    np.testing.assert_allclose(got[levels < 20], np.array(expected)[levels < 20], rtol=1e-9)
    np.testing.assert_allclose(got[levels >= 20], np.array(expected)[levels >= 20], rtol=1e-6)
    # raystack S2AreaInKm2Test, and the six faces cover the sphere.
    assert s2_cell_areas_km2([3267730965564227584])[0] == pytest.approx(909.97058, abs=1e-4)
    faces = [signed((f << 61) | (1 << 60)) for f in range(6)]
    assert s2_cell_areas_km2(faces).sum() == pytest.approx(510_072_000, rel=1e-12)


def test_s2_id_and_area_kernels_null_handling() -> None:
    out = s2_id(
        pa.array([-6.170024, None, math.nan, 10.0]), pa.array([106.8243203, 1.0, 1.0, None]), pa.array([13, 13, 13, 13])
    )
    assert out.to_pylist() == ["3344474489181175808", None, None, None]
    assert s2_id(pa.array([1.0]), pa.array([2.0]), pa.array([None], pa.int32())).to_pylist() == [None]
    with pytest.raises(ValueError, match=r"0\.\.30"):
        s2_id(pa.array([1.0]), pa.array([2.0]), pa.array([31]))
    # Decimal literals and float32 columns are widened exactly as Java widens them.
    f32 = np.float32(-33.87)
    got = s2_id(
        pa.array([f32], pa.float32()), pa.array([Decimal("151.2")], pa.decimal128(4, 1)), pa.array([30])
    ).to_pylist()
    assert got == [str(s2sphere_ids(np.array([float(f32)]), np.array([151.2]), 30)[0])]
    areas = s2_area_in_km2(pa.array(["3267730965564227584", "not a number", None, "0", str(3267730965564227584)]))
    assert areas.to_pylist()[1:4] == [None, None, None]
    assert areas.to_pylist()[0] == pytest.approx(909.97058, abs=1e-4)
    unsigned = str((5 << 61) | (1 << 60))  # face 5 as an unsigned decimal (> 2^63)
    assert s2_area_in_km2(pa.array([unsigned])).to_pylist()[0] == pytest.approx(510_072_000 / 6, rel=1e-9)
    assert s2_area_in_km2(pa.array([3267730965564227584])).to_pylist()[0] == pytest.approx(909.97058, abs=1e-4)


# --- GeoHash -------------------------------------------------------------------------------------------------------


def test_geohash_published_vectors() -> None:
    assert geohash_encode(42.6, -5.6, 5) == "ezs42"  # Wikipedia, "Geohash"
    assert geohash_encode(57.64911, 10.40744, 11) == "u4pruydqqvj"  # Wikipedia, "Geohash"
    assert geohash_encode(-6.170024, 106.8243203, 6) == "qqguyu"  # raystack GeoHashTest
    # davidmoten/geo (raystack's GeoHash library) tests, including its long form of (23, 120, 4).
    assert [geohash_encode(90, lng, 4) for lng in (-180, 0, 180)] == ["bpbp", "upbp", "zzzz"]
    packed = -1863821742661697532 & (2**64 - 1)
    assert geohash_encode(23, 120, 4) == "".join(
        "0123456789bcdefghjkmnpqrstuvwxyz"[(packed >> (59 - 5 * i)) & 31] for i in range(4)
    )


def test_geohash_matches_textbook_bisection() -> None:
    lat, lng = random_points(20_000, seed=21)
    lat = np.concatenate([lat, [0.0, -0.0, 90.0, -90.0, 45.0, 22.5, -67.5]])
    lng = np.concatenate([lng, [0.0, -0.0, 180.0, -180.0, 90.0, -135.0, 179.99999999999997]])
    precision = np.random.default_rng(2).integers(1, 13, len(lat))
    got = geo_hash(pa.array(lat), pa.array(lng), pa.array(precision)).to_pylist()
    expected = [textbook_geohash(a, b, int(p)) for a, b, p in zip(lat, lng, precision, strict=True)]
    assert got == expected


def test_geohash_wraps_longitude_and_rejects_bad_input() -> None:
    got = geo_hash(
        pa.array([10.0, 10.0, 10.0, 91.0, None, math.nan]), pa.array([190.0, 540.0, -540.0, 0, 0, 0]), pa.array([8] * 6)
    )
    assert got.to_pylist() == [
        textbook_geohash(10.0, -170.0, 8),
        textbook_geohash(10.0, -180.0, 8),
        textbook_geohash(10.0, 180.0, 8),
        None,
        None,
        None,
    ]
    for bad in (0, 13):
        with pytest.raises(ValueError, match="precision"):
            geo_hash(pa.array([1.0]), pa.array([1.0]), pa.array([bad]))


# --- Distance ------------------------------------------------------------------------------------------------------


def test_distance_raystack_vectors() -> None:
    got = distance(
        *(pa.array(v) for v in ([48.8566, 12.9716], [2.3522, 77.5946], [51.5074, 6.1751], [0.1278, 106.8650]))
    )
    assert got.to_pylist()[0] == pytest.approx(334.5761379805, abs=1e-10)
    assert got.to_pylist()[1] == pytest.approx(3294.208197583382, abs=1e-10)


def test_distance_matches_independent_formulas() -> None:
    rng = np.random.default_rng(4)
    pts = [
        rng.uniform(-90, 90, 5000),
        rng.uniform(-180, 180, 5000),
        rng.uniform(-90, 90, 5000),
        rng.uniform(-180, 180, 5000),
    ]
    km = haversine_km(*pts)
    rows = list(zip(*(p.tolist() for p in pts), strict=True))
    np.testing.assert_allclose(km, [python_haversine(*r) for r in rows], rtol=1e-9)
    np.testing.assert_allclose(km, [vincenty_sphere_km(*r) for r in rows], rtol=1e-8, atol=1e-6)
    assert haversine_km(1.5, 2.5, 1.5, 2.5) == 0.0
    assert haversine_km(0, 0, 0, 180) == pytest.approx(math.pi * 6371, rel=1e-12)
    assert (
        distance(pa.array([1.0, None]), pa.array([1.0, 1.0]), pa.array([2.0, 2.0]), pa.array([2.0, 2.0])).to_pylist()[1]
        is None
    )


# --- time ----------------------------------------------------------------------------------------------------------

ZONES = [
    "UTC",
    "Asia/Jakarta",
    "Asia/Kolkata",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Havana",
    "America/Sao_Paulo",
    "Asia/Kathmandu",
    "Pacific/Apia",
]


def random_instants_ms(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(-1_500_000_000_000, 2_080_000_000_000, n)
    # Also instants right at local midnights and DST transitions of the zones above.
    near = np.array([1552195800000, 1572759000000, 1541300400000, 1325239200000, 1577836800000, 1561939200000])
    return np.concatenate([base, near, near - 1, near + 1])


def test_time_raystack_vectors() -> None:
    t = 1562224758000  # Thursday 2019-07-04T07:19:18Z
    zones = pa.array(["Asia/Kolkata", "Asia/Jakarta", "UTC"])
    assert start_of_week(pa.array([t] * 3), zones).to_pylist() == [1561919400000, 1561914000000, 1561939200000]
    assert end_of_week(pa.array([t] * 3), zones).to_pylist() == [1562524199999, 1562518799999, 1562543999999]
    assert start_of_week(pa.array([1561939200000]), pa.array(["UTC"])).to_pylist() == [1561939200000]
    assert end_of_week(pa.array([1561939200000]), pa.array(["UTC"])).to_pylist() == [1562543999999]
    s = pa.array([t // 1000] * 3)
    assert start_of_month(s, zones).to_pylist() == [1561919400, 1561914000, 1561939200]
    assert end_of_month(s, zones).to_pylist() == [1564597799, 1564592399, 1564617599]
    stamps = timestamp_from_unix(pa.array([1554101494, -1554101494, 0, None])).to_pylist()
    assert stamps == [dt.datetime(2019, 4, 1, 6, 51, 34, tzinfo=UTC)] * 2 + [dt.datetime(1970, 1, 1, tzinfo=UTC), None]
    ts = pa.array([1607003114000] * 3, pa.timestamp("ms", tz="UTC"))
    got = format_time_in_zone(
        ts, pa.array(["Asia/Kolkata", "Asia/Jakarta", "Asia/Kolkata"]), pa.array(["hh:mm aa"] * 2 + ["yyyy/MM/dd"])
    )
    assert got.to_pylist() == ["07:15 PM", "08:45 PM", "2020/12/03"]


def test_week_and_month_bounds_match_zoneinfo() -> None:
    ms = random_instants_ms(3000, seed=8)
    for zone in ZONES:
        tz = zoneinfo.ZoneInfo(zone)
        col, zones = pa.array(ms), pa.array([zone] * len(ms))
        sow, eow = start_of_week(col, zones).to_pylist(), end_of_week(col, zones).to_pylist()
        secs = pa.array(np.floor_divide(ms, 1000))
        som, eom = start_of_month(secs, zones).to_pylist(), end_of_month(secs, zones).to_pylist()
        for i, m in enumerate(ms.tolist()):
            day = local_date(m, tz)
            monday = dt.datetime.combine(day - dt.timedelta(days=day.weekday()), dt.time())
            assert sow[i] == java_wall_to_epoch_ms(monday, tz), (zone, m)
            sunday_end = monday + dt.timedelta(days=6, hours=23, minutes=59, seconds=59, milliseconds=999)
            assert eow[i] == java_wall_to_epoch_ms(sunday_end, tz), (zone, m)
            assert sow[i] <= m <= eow[i] or zone == "Pacific/Apia", (zone, m)  # Apia skipped 2011-12-30
            day_s = local_date(m // 1000 * 1000, tz)
            first = dt.datetime(day_s.year, day_s.month, 1)
            nxt = dt.datetime(day_s.year + day_s.month // 12, day_s.month % 12 + 1, 1)
            assert som[i] == java_wall_to_epoch_ms(first, tz) // 1000, (zone, m)
            assert eom[i] == java_wall_to_epoch_ms(nxt - dt.timedelta(milliseconds=1), tz) // 1000, (zone, m)


def test_end_of_month_jdk_vectors_across_dst() -> None:
    # raystack's EndOfMonth run on OpenJDK 17 (java.util.Calendar); zones with midnight DST transitions.
    cases = {
        (1564531200, "America/Sao_Paulo"): 1564628399,
        (1564531200, "America/Havana"): 1564631999,
        (1564531200, "Australia/Lord_Howe"): 1564579799,
        (1564531200, "Asia/Jakarta"): 1564592399,
        (1564531200, "America/Asuncion"): 1564631999,
        (1564531200, "Pacific/Apia"): 1564570799,
        (1564531200, "Europe/Dublin"): 1564613999,
        (1551398400, "America/Sao_Paulo"): 1551409199,
        (1551398400, "America/Havana"): 1551416399,
        (1551398400, "Australia/Lord_Howe"): 1554037199,
        (1551398400, "Asia/Jakarta"): 1554051599,
        (1551398400, "America/Asuncion"): 1551409199,
        (1551398400, "Pacific/Apia"): 1554026399,
        (1551398400, "Europe/Dublin"): 1554073199,
        (1583020799, "America/Sao_Paulo"): 1583031599,
        (1583020799, "America/Havana"): 1583038799,
        (1583020799, "Australia/Lord_Howe"): 1585659599,
        (1583020799, "Asia/Jakarta"): 1585673999,
        (1583020799, "America/Asuncion"): 1583031599,
        (1583020799, "Pacific/Apia"): 1585648799,
        (1583020799, "Europe/Dublin"): 1583020799,
        (1572566400, "America/Sao_Paulo"): 1572577199,
        (1572566400, "America/Havana"): 1572580799,
        (1572566400, "Australia/Lord_Howe"): 1575118799,
        (1572566400, "Asia/Jakarta"): 1575133199,
        (1572566400, "America/Asuncion"): 1572577199,
        (1572566400, "Pacific/Apia"): 1575107999,
        (1572566400, "Europe/Dublin"): 1575158399,
        (1541030400, "America/Sao_Paulo"): 1541041199,
        (1541030400, "America/Havana"): 1541044799,
        (1541030400, "Australia/Lord_Howe"): 1543582799,
        (1541030400, "Asia/Jakarta"): 1543597199,
        (1541030400, "America/Asuncion"): 1541041199,
        (1541030400, "Pacific/Apia"): 1543571999,
        (1541030400, "Europe/Dublin"): 1543622399,
        (1509494400, "America/Sao_Paulo"): 1509501599,
        (1509494400, "America/Havana"): 1509508799,
        (1509494400, "Australia/Lord_Howe"): 1512046799,
        (1509494400, "Asia/Jakarta"): 1512061199,
        (1509494400, "America/Asuncion"): 1509505199,
        (1509494400, "Pacific/Apia"): 1512035999,
        (1509494400, "Europe/Dublin"): 1512086399,
        (1546300800, "America/Sao_Paulo"): 1546307999,
        (1546300800, "America/Havana"): 1546318799,
        (1546300800, "Australia/Lord_Howe"): 1548939599,
        (1546300800, "Asia/Jakarta"): 1548953999,
        (1546300800, "America/Asuncion"): 1546311599,
        (1546300800, "Pacific/Apia"): 1548928799,
        (1546300800, "Europe/Dublin"): 1548979199,
    }
    for (secs, zone), expected in cases.items():
        assert end_of_month(pa.array([secs]), pa.array([zone])).to_pylist() == [expected], zone


def test_raystack_quirks_are_not_reproduced() -> None:
    # OpenJDK 17 running raystack's code (Locale en) returns Monday 2019-07-08 for Sunday 2019-07-07, and
    # Monday 2019-07-15 as "StartOfMonth" of 2019-07-18: both Calendar field-resolution accidents. We follow the
    # documented contracts: the ISO week holding the instant, and the 1st of the month.
    assert start_of_week(pa.array([1562457600000]), pa.array(["UTC"])).to_pylist() == [1561939200000]
    assert end_of_week(pa.array([1562500000000]), pa.array(["UTC"])).to_pylist() == [1562543999999]
    assert start_of_month(pa.array([1563408000]), pa.array(["UTC"])).to_pylist() == [1561939200]


def test_time_null_unknown_zone_and_java_zone_ids() -> None:
    assert start_of_week(pa.array([None, 0], pa.int64()), pa.array(["UTC", "No/Such_Zone"])).to_pylist() == [None, None]
    assert start_of_month(pa.array([0]), pa.array([None], pa.string())).to_pylist() == [None]
    assert resolve_zone("IST") is not None and resolve_zone("IST").arrow_tz == "Asia/Kolkata"
    july = 1562224758  # EST is a fixed -05:00 in Java, America/New_York is on EDT in July
    assert start_of_month(pa.array([july] * 2), pa.array(["EST", "America/New_York"])).to_pylist() == [
        1561957200,
        1561953600,
    ]
    assert (
        start_of_month(pa.array([july] * 3), pa.array(["GMT+7", "GMT+07:00", "Asia/Jakarta"])).to_pylist()
        == [1561914000] * 3
    )
    assert timestamp_from_unix(pa.array([2**62])).to_pylist() == [None]


# Printed by OpenJDK 17: new SimpleDateFormat(P) with setTimeZone(TimeZone.getTimeZone(zone)), Locale en_US.
JDK_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSS z zzzz Z XXX X E EEEE u w W Y YY D F a h k K G MMM MMMM LL ''yy''"
JDK_FORMATTED = {
    (1607003114000, "Asia/Jakarta"): (
        "2020-12-03T20:45:14.000 WIB Western Indonesia Time +0700 +07:00 +07 Th"
        "u Thursday 4 49 1 2020 20 338 1 PM 8 20 8 AD Dec December 12 '20'"
    ),
    (1607003114000, "America/New_York"): (
        "2020-12-03T08:45:14.000 EST Eastern Standard Time -0500 -05:00 -05 Thu"
        " Thursday 4 49 1 2020 20 338 1 AM 8 8 8 AD Dec December 12 '20'"
    ),
    (1607003114000, "Europe/Dublin"): (
        "2020-12-03T13:45:14.000 GMT Greenwich Mean Time +0000 Z Z Thu Thursday"
        " 4 49 1 2020 20 338 1 PM 1 13 1 AD Dec December 12 '20'"
    ),
    (1607003114000, "Australia/Lord_Howe"): (
        "2020-12-04T00:45:14.000 LHDT Lord Howe Daylight Time +1100 +11:00 +11 "
        "Fri Friday 5 49 1 2020 20 339 1 AM 12 24 0 AD Dec December 12 '20'"
    ),
    (1607003114000, "Asia/Kathmandu"): (
        "2020-12-03T19:30:14.000 NPT Nepal Time +0545 +05:45 +05 Thu Thursday 4"
        " 49 1 2020 20 338 1 PM 7 19 7 AD Dec December 12 '20'"
    ),
    (1607003114000, "GMT+7"): (
        "2020-12-03T20:45:14.000 GMT+07:00 GMT+07:00 +0700 +07:00 +07 Thu Thurs"
        "day 4 49 1 2020 20 338 1 PM 8 20 8 AD Dec December 12 '20'"
    ),
    (1607003114000, "IST"): (
        "2020-12-03T19:15:14.000 IST India Standard Time +0530 +05:30 +05 Thu T"
        "hursday 4 49 1 2020 20 338 1 PM 7 19 7 AD Dec December 12 '20'"
    ),
    (1607003114000, "EST"): (
        "2020-12-03T08:45:14.000 EST Eastern Standard Time -0500 -05:00 -05 Thu"
        " Thursday 4 49 1 2020 20 338 1 AM 8 8 8 AD Dec December 12 '20'"
    ),
    (1607003114000, "America/Sao_Paulo"): (
        "2020-12-03T10:45:14.000 BRT Brasilia Standard Time -0300 -03:00 -03 Th"
        "u Thursday 4 49 1 2020 20 338 1 AM 10 10 10 AD Dec December 12 '20'"
    ),
    (1607003114000, "Pacific/Apia"): (
        "2020-12-04T03:45:14.000 WSDT Apia Daylight Time +1400 +14:00 +14 Fri F"
        "riday 5 49 1 2020 20 339 1 AM 3 3 3 AD Dec December 12 '20'"
    ),
    (1607003114000, "UTC"): (
        "2020-12-03T13:45:14.000 UTC Coordinated Universal Time +0000 Z Z Thu T"
        "hursday 4 49 1 2020 20 338 1 PM 1 13 1 AD Dec December 12 '20'"
    ),
    (1607003114000, "Asia/Singapore"): (
        "2020-12-03T21:45:14.000 SGT Singapore Standard Time +0800 +08:00 +08 T"
        "hu Thursday 4 49 1 2020 20 338 1 PM 9 21 9 AD Dec December 12 '20'"
    ),
    (1562224758000, "Europe/Dublin"): (
        "2019-07-04T08:19:18.000 IST Irish Standard Time +0100 +01:00 +01 Thu T"
        "hursday 4 27 1 2019 19 185 1 AM 8 8 8 AD Jul July 07 '19'"
    ),
    (1562224758000, "Australia/Lord_Howe"): (
        "2019-07-04T17:49:18.000 LHST Lord Howe Standard Time +1030 +10:30 +10 "
        "Thu Thursday 4 27 1 2019 19 185 1 PM 5 17 5 AD Jul July 07 '19'"
    ),
    (1577836799999, "Europe/Dublin"): (
        "2019-12-31T23:59:59.999 GMT Greenwich Mean Time +0000 Z Z Tue Tuesday "
        "2 1 5 2020 20 365 5 PM 11 23 11 AD Dec December 12 '19'"
    ),
    (1577836800000, "Australia/Lord_Howe"): (
        "2020-01-01T11:00:00.000 LHDT Lord Howe Daylight Time +1100 +11:00 +11 "
        "Wed Wednesday 3 1 1 2020 20 1 1 AM 11 11 11 AD Jan January 01 '20'"
    ),
    (1609459199999, "Asia/Kathmandu"): (
        "2021-01-01T05:44:59.999 NPT Nepal Time +0545 +05:45 +05 Fri Friday 5 1"
        " 1 2021 21 1 1 AM 5 5 5 AD Jan January 01 '21'"
    ),
    (1572759000000, "Australia/Lord_Howe"): (
        "2019-11-03T16:30:00.000 LHDT Lord Howe Daylight Time +1100 +11:00 +11 "
        "Sun Sunday 7 45 2 2019 19 307 1 PM 4 16 4 AD Nov November 11 '19'"
    ),
    (-1, "GMT+7"): (
        "1970-01-01T06:59:59.999 GMT+07:00 GMT+07:00 +0700 +07:00 +07 Thu Thurs"
        "day 4 1 1 1970 70 1 1 AM 6 6 6 AD Jan January 01 '70'"
    ),
    (0, "Australia/Lord_Howe"): (
        "1970-01-01T10:00:00.000 LHST Lord Howe Standard Time +1000 +10:00 +10 "
        "Thu Thursday 4 1 1 1970 70 1 1 AM 10 10 10 AD Jan January 01 '70'"
    ),
    (4102444800000, "Europe/Dublin"): (
        "2100-01-01T00:00:00.000 GMT Greenwich Mean Time +0000 Z Z Fri Friday 5"
        " 1 1 2100 00 1 1 AM 12 24 0 AD Jan January 01 '00'"
    ),
    (1998863656053, "America/Sao_Paulo"): (
        "2033-05-04T20:54:16.053 BRT Brasilia Standard Time -0300 -03:00 -03 We"
        "d Wednesday 3 19 1 2033 33 124 1 PM 8 20 8 AD May May 05 '33'"
    ),
    (-1835869121076, "America/New_York"): (
        "1911-10-29T07:21:18.924 EST Eastern Standard Time -0500 -05:00 -05 Sun"
        " Sunday 7 44 5 1911 11 302 5 AM 7 7 7 AD Oct October 10 '11'"
    ),
    (-1740478666202, "Pacific/Apia"): (
        "1914-11-06T02:12:13.798 WSST Apia Standard Time -1130 -11:30 -11 Fri F"
        "riday 5 45 1 1914 14 310 1 AM 2 2 2 AD Nov November 11 '14'"
    ),
    (-1783547905516, "Australia/Lord_Howe"): (
        "1913-06-26T12:01:34.484 LHST Lord Howe Standard Time +1000 +10:00 +10 "
        "Thu Thursday 4 26 4 1913 13 177 4 PM 12 12 0 AD Jun June 06 '13'"
    ),
    (1704067199000, "America/New_York"): (
        "2023-12-31T18:59:59.000 EST Eastern Standard Time -0500 -05:00 -05 Sun"
        " Sunday 7 1 6 2024 24 365 5 PM 6 18 6 AD Dec December 12 '23'"
    ),
}


def test_format_time_in_zone_jdk_vectors() -> None:
    for (ms, zone), expected in JDK_FORMATTED.items():
        got = format_time_in_zone(
            pa.array([ms], pa.timestamp("ms", tz="UTC")), pa.array([zone]), pa.array([JDK_PATTERN])
        )
        assert got.to_pylist() == [expected], (ms, zone)


def test_format_time_in_zone_matches_strftime() -> None:
    ms = random_instants_ms(2000, seed=12)
    java = "EEE, d MMM yyyy HH:mm:ss.SSS a hh K k D Z"
    for zone in ZONES:
        tz = zoneinfo.ZoneInfo(zone)
        got = format_time_in_zone(
            pa.array(ms, pa.timestamp("ms", tz="UTC")), pa.array([zone] * len(ms)), pa.array([java] * len(ms))
        )
        for m, text in zip(ms.tolist(), got.to_pylist(), strict=True):
            t = (dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=m)).astimezone(tz)
            offset = t.strftime("%z")[:5]
            expected = (
                f"{t:%a}, {t.day} {t:%b} {t.year:04d} {t:%H:%M:%S}.{t.microsecond // 1000:03d} {t:%p} {t:%I} "
                f"{t.hour % 12} {t.hour or 24} {t.timetuple().tm_yday} {offset}"
            )
            assert text == expected, (zone, m)


def test_format_time_in_zone_inputs_and_errors() -> None:
    # Integers are epoch seconds (as Spark's CAST(bigint AS TIMESTAMP)); DATEs are midnight UTC.
    assert format_time_in_zone(pa.array([1607003114]), pa.array(["UTC"]), pa.array(["HH:mm"])).to_pylist() == ["13:45"]
    assert format_time_in_zone(
        pa.array([dt.date(2020, 12, 3)]), pa.array(["UTC"]), pa.array(["yyyy-MM-dd HH"])
    ).to_pylist() == ["2020-12-03 00"]
    nulls = format_time_in_zone(
        pa.array([None, 0, 0], pa.timestamp("us", tz="UTC")),
        pa.array(["UTC", "Bad/Zone", None]),
        pa.array(["yyyy"] * 3),
    )
    assert nulls.to_pylist() == [None, None, None]
    for bad in ("yyyy-MM-dd bb", "'unterminated", "XXXX"):
        with pytest.raises(ValueError):
            format_time_in_zone(pa.array([0], pa.timestamp("s", tz="UTC")), pa.array(["UTC"]), pa.array([bad]))


# --- collections ---------------------------------------------------------------------------------------------------


def test_element_at_raystack_vectors() -> None:
    arrays = pa.array(
        [
            ["a", "a", "b", "v", "a"],
            ["a", "a", "c", "d", "e"],
            ["a", "a", None, "d", "e"],
            ["a", "a", "b"],
            ["a", "a", "b"],
        ]
    )
    assert element_at(arrays, pa.array([2, 2, 2, 5, -5])).to_pylist() == ["b", "c", None, None, None]
    assert element_at(arrays, pa.array([-2, -2, 3, -1, 0])).to_pylist() == ["v", "d", "d", "b", "a"]
    assert element_at(pa.array([[1.0, 3.0]]), pa.array([1])).to_pylist() == ["3.0"]
    assert element_at(pa.array([None, []], pa.list_(pa.int64())), pa.array([0, 0])).to_pylist() == [None, None]
    route = pa.struct(
        [
            ("start", pa.struct([("latitude", pa.float64()), ("longitude", pa.float64())])),
            ("distance_in_kms", pa.float32()),
        ]
    )
    routes = pa.array(
        [[{"start": {"latitude": -6.170024, "longitude": 106.8243203}, "distance_in_kms": 21.5}]] * 5 + [None, []],
        pa.list_(route),
    )
    n = len(routes)
    paths = pa.array(
        [
            "start.latitude",
            "start.longitude",
            "distance_in_kms",
            "start.invalid",
            "start.latitude",
            "start.latitude",
            "start.latitude",
        ]
    )
    got = element_at(routes, pa.array(["routes"] * n), pa.array([0, 0, 0, 0, 1, 1, 1]), paths)
    assert got.to_pylist() == ["-6.170024", "106.8243203", "21.5", "", "", "", ""]
    with_table = element_at(routes, pa.array(["routes"] * n), pa.array([0] * n), paths, pa.array(["booking"] * n))
    assert with_table.to_pylist()[:3] == ["-6.170024", "106.8243203", "21.5"]
    with pytest.raises(TypeError):
        element_at(routes, pa.array(["x"] * n), pa.array([0] * n))


def test_element_at_sliced_arrays_and_java_number_strings() -> None:
    sliced = pa.array([["x", "y"], ["z"], None, ["p", "q", "r"]]).slice(1)
    assert element_at(sliced, pa.array([0, 0, -1])).to_pylist() == ["z", None, "r"]
    doubles = pa.array([[1e7, 0.001, 1.234e-5, -0.0, math.nan, math.inf, 100.0]])
    assert [element_at(doubles, pa.array([i])).to_pylist()[0] for i in range(7)] == [
        "1.0E7",
        "0.001",
        "1.234E-5",
        "-0.0",
        "NaN",
        "Infinity",
        "100.0",
    ]
    assert element_at(pa.array([[True, False]]), pa.array([1])).to_pylist() == ["false"]
    assert element_at(pa.array([[7, 8]], pa.list_(pa.int32())), pa.array([-1])).to_pylist() == ["8"]


def test_java_number_strings_jdk_vectors() -> None:
    # Double.toString / Float.toString on OpenJDK 17.
    doubles = {
        3.0: "3.0",
        0.001: "0.001",
        1e7: "1.0E7",
        9999999.0: "9999999.0",
        1.234e-5: "1.234E-5",
        -6.170024: "-6.170024",
        1e21: "1.0E21",
        2e-3: "0.002",
        1.0e-4: "1.0E-4",
        1.7976931348623157e308: "1.7976931348623157E308",
        12345678.9: "1.23456789E7",
        0.30000000000000004: "0.30000000000000004",
    }
    assert {v: java_double_to_string(v) for v in doubles} == doubles
    floats = {
        21.5: "21.5",
        0.1: "0.1",
        1e10: "1.0E10",
        3.4028235e38: "3.4028235E38",
        1e-5: "1.0E-5",
        16777216: "1.6777216E7",
    }
    assert {v: java_float_to_string(float(np.float32(v))) for v in floats} == floats


def test_list_contains() -> None:
    lists = pa.array([["test1", "x"], None, ["a", None], [], ["b"]])
    assert list_contains(lists, pa.array(["test1", "test1", None, "a", None])).to_pylist() == [
        True,
        False,
        True,
        False,
        False,
    ]
    assert list_contains(pa.array([[1, 2, 3], [4]]), pa.array([2, 2], pa.int32())).to_pylist() == [True, False]
    assert list_contains(pa.array([[1, 2, 3], [4]]), pa.array(["3", "x"])).to_pylist() == [True, False]
    assert list_contains(pa.array([[]], pa.list_(pa.string())), pa.array(["a"])).to_pylist() == [False]


def test_map_get() -> None:
    maps = pa.array(
        [[("data1", "v1"), ("data2", "v2")], None, [("x", "y")], [("data1", None)]], pa.map_(pa.string(), pa.string())
    )
    assert map_get(maps, pa.array(["data1"] * 4)).to_pylist() == ["v1", None, None, None]
    assert map_get(maps.slice(1), pa.array(["x"] * 3)).to_pylist() == [None, "y", None]
    # raystack's Row[] maps: first field is the key, second the value; the first matching entry wins.
    rows = pa.array([[{"key": "a", "value": 1}, {"key": "a", "value": 2}], [{"key": "b", "value": 3}], None])
    assert map_get(rows, pa.array(["a", "a", "a"])).to_pylist() == ["1", None, None]
    assert map_get(
        pa.array([[(1, 2.5)]], pa.map_(pa.int64(), pa.float64())), pa.array([1], pa.int32())
    ).to_pylist() == ["2.5"]


# (input, delimiter) -> Java String.split output on OpenJDK 17 (raystack Split: "" delimiter means " ").
JDK_SPLITS = {
    ("a,b,,", ","): ["a", "b"],
    (",a,,b,", ","): ["", "a", "", "b"],
    (",", ","): [],
    ("", ","): [""],
    ("abc", ""): ["abc"],
    ("a b  c", " "): ["a", "b", "", "c"],
    ("a.b.c", "\\."): ["a", "b", "c"],
    ("a.b.c", "."): [],
    ("a1b22c333", "\\d+"): ["a", "b", "c"],
    ("abc", "x*"): ["a", "b", "c"],
    ("axxbxc", "x*"): ["a", "", "b", "", "c"],
    ("a|b|c", "\\|"): ["a", "b", "c"],
    ("a|b", "|"): ["a", "|", "b"],
    ("  a  b ", "\\s+"): ["", "a", "b"],
    ("boo:and:foo", "o"): ["b", "", ":and:f"],
    ("boo:and:foo", ":"): ["boo", "and", "foo"],
    ("1234567890 0987654321 000000000", " "): ["1234567890", "0987654321", "000000000"],
    ("üx,ß", ","): ["üx", "ß"],
}


def test_split_jdk_vectors_and_nulls() -> None:
    for (text, delimiter), expected in JDK_SPLITS.items():
        assert java_split(text, delimiter or " ") == expected, (text, delimiter)
    texts = [t for t, _ in JDK_SPLITS] + [None, "a,b"]
    delims = [d for _, d in JDK_SPLITS] + [",", None]
    assert split(pa.array(texts), pa.array(delims)).to_pylist() == [*JDK_SPLITS.values(), [], []]
    # Spark's split(str, regex, limit): Java str.split(regex, limit > 0 ? limit : -1), NULL for NULL.
    three = split(pa.array(["a,b,,", "a,b,,", None]), pa.array([",", ",", ","]), pa.array([-1, 2, 1]))
    assert three.to_pylist() == [["a", "b", "", ""], ["a", "b,,"], None]
    assert java_split("a,b,,", ",", -1) == ["a", "b", "", ""]
    assert java_split("x1y2z", r"\d") == re.split(r"\d", "x1y2z")


# --- registry and docs ---------------------------------------------------------------------------------------------

EXPECTED_NAMES = {
    "S2Id",
    "S2AreaInKm2",
    "GeoHash",
    "Distance",
    "TimestampFromUnix",
    "FormatTimeInZone",
    "StartOfWeek",
    "EndOfWeek",
    "StartOfMonth",
    "EndOfMonth",
    "ElementAt",
    "ListContains",
    "MapGet",
    "Split",
}


def test_registry_and_docs_cover_every_function() -> None:
    assert set(SCALAR_UDFS) == EXPECTED_NAMES
    docs = DOCS.read_text()
    for name, definition in SCALAR_UDFS.items():
        assert definition.name == name and definition.contract and definition.example and definition.signature
        assert f"### {name}" in docs, name
    for name in AGGREGATES_AT_SQL_LEVEL:
        assert name in docs


# --- through Spark SQL ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def udf_spark(spark: SparkSession) -> SparkSession:
    register_udfs(spark)
    return spark


def test_spark_geo_functions(udf_spark: SparkSession) -> None:
    lat, lng = random_points(3000, seed=31)
    e_lat, e_lng = edge_points()
    lat, lng = np.concatenate([lat, e_lat[:500], [math.nan]]), np.concatenate([lng, e_lng[:500], [1.0]])
    rows = [(i, float(a), float(b)) for i, (a, b) in enumerate(zip(lat, lng, strict=True))] + [(len(lat), None, 1.0)]
    df = udf_spark.createDataFrame(rows, "id INT, lat DOUBLE, long DOUBLE")
    df.createOrReplaceTempView("points")
    out = udf_spark.sql(
        """SELECT id, S2Id(lat, long, 13) AS l13, s2id(lat, long, 30) AS l30,
                  CAST(S2ID(lat, long, 13) AS BIGINT) AS n13,
                  GeoHash(lat, long, 7) AS gh, Distance(lat, long, -6.170024, 106.8243203) AS km,
                  S2AreaInKm2(S2Id(lat, long, 10)) AS area
           FROM points ORDER BY id"""
    ).collect()
    assert len(out) == len(lat) + 1
    finite = np.isfinite(lat)
    ref13, ref30 = s2sphere_ids(lat[finite], lng[finite], 13), s2sphere_ids(lat[finite], lng[finite], 30)
    got = [r for r in out[: len(lat)] if r.l13 is not None]
    assert [int(r.l13) for r in got] == ref13.tolist() == [r.n13 for r in got]
    assert [int(r.l30) for r in got] == ref30.tolist()
    # (longitudes beyond +-180 wrap as davidmoten's to180 does; the textbook bisection does not wrap)
    in_range = [r for r in out[: len(lat)] if np.isfinite(lat[r.id]) and abs(lat[r.id]) <= 90 and abs(lng[r.id]) <= 180]
    assert all(r.gh == textbook_geohash(float(lat[r.id]), float(lng[r.id]), 7) for r in in_range)
    assert all(
        r.km == pytest.approx(python_haversine(float(lat[r.id]), float(lng[r.id]), -6.170024, 106.8243203), rel=1e-9)
        for r in in_range
    )
    areas = s2_cell_areas_km2(s2sphere_ids(lat[:50], lng[:50], 10))
    assert [r.area for r in out[:50]] == pytest.approx(areas.tolist(), rel=1e-12)
    assert out[-2].l13 is None and out[-1].l13 is None and out[-1].gh is None and out[-1].km is None  # NaN, NULL
    with pytest.raises(Exception, match="level must be"):
        udf_spark.sql("SELECT S2Id(lat, long, 31) FROM points").collect()


def test_spark_time_functions(udf_spark: SparkSession) -> None:
    row = udf_spark.sql(
        """SELECT TimestampFromUnix(1554101494) AS ts, TimestampFromUnix(-1554101494) AS ts_neg,
                  FormatTimeInZone(TimestampFromUnix(1607003114), 'Asia/Kolkata', 'hh:mm aa') AS hhmm,
                  FormatTimeInZone(TimestampFromUnix(1607003114), 'Asia/Jakarta', 'yyyy-MM-dd HH:mm:ss z') AS local,
                  StartOfWeek(1562224758000, 'Asia/Jakarta') AS sow, EndOfWeek(1562224758000, 'Asia/Kolkata') AS eow,
                  StartOfMonth(1562224758, 'Asia/Kolkata') AS som, EndOfMonth(1562224758, 'Asia/Jakarta') AS eom,
                  StartOfWeek(unix_millis(TimestampFromUnix(1562224758)), 'UTC') AS sow_utc,
                  StartOfWeek(CAST(NULL AS BIGINT), 'UTC') AS sow_null, StartOfMonth(0, 'No/Zone') AS bad_zone,
                  CAST(TimestampFromUnix(0) AS STRING) AS epoch"""
    ).collect()[0]
    assert row.ts == row.ts_neg == dt.datetime(2019, 4, 1, 6, 51, 34)  # session time zone is UTC
    assert (row.hhmm, row.local) == ("07:15 PM", "2020-12-03 20:45:14 WIB")
    assert (row.sow, row.eow, row.som, row.eom) == (1561914000000, 1562524199999, 1561919400, 1564592399)
    assert (row.sow_utc, row.sow_null, row.bad_zone, row.epoch) == (1561939200000, None, None, "1970-01-01 00:00:00")


def test_spark_timestamps_follow_the_instant_not_the_session_zone(udf_spark: SparkSession) -> None:
    previous = udf_spark.conf.get("spark.sql.session.timeZone")
    udf_spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        row = udf_spark.sql(
            """SELECT FormatTimeInZone(TimestampFromUnix(1607003114), 'Asia/Kolkata', 'HH:mm') AS f,
                      CAST(TimestampFromUnix(0) AS STRING) AS epoch"""
        ).collect()[0]
    finally:
        udf_spark.conf.set("spark.sql.session.timeZone", previous)
    assert (row.f, row.epoch) == ("19:15", "1969-12-31 19:00:00")


def test_spark_collection_functions(udf_spark: SparkSession) -> None:
    row = udf_spark.sql(
        """SELECT ElementAt(array('a', 'b', 'c'), -1) AS last, ElementAt(array(1.5D, 3.0D), 1) AS dbl,
                  ElementAt(array('a'), 5) AS oob,
                  ElementAt(array(named_struct('start', named_struct('latitude', -6.170024D))), 'routes', 0,
                            'start.latitude') AS lat,
                  ElementAt(array(named_struct('start', named_struct('latitude', 1D))), 'routes', 3, 'start.latitude')
                    AS lat_oob,
                  ListContains(array('test1', 'x'), 'test1') AS has, ListContains(CAST(NULL AS ARRAY<STRING>), 'a')
                    AS has_null,
                  MapGet(map('data1', 'v1', 'data2', 'v2'), 'data2') AS mg, MapGet(map('k', 2.5D), 'nope') AS mg_none,
                  MapGet(array(named_struct('key', 'a', 'value', 7)), 'a') AS mg_rows,
                  session.Split('a,b,,', ',') AS raystack_split, Split('a,b,,', ',') AS builtin_split,
                  session.Split(CAST(NULL AS STRING), ',') AS split_null"""
    ).collect()[0]
    assert (row.last, row.dbl, row.oob, row.lat, row.lat_oob) == ("c", "3.0", None, "-6.170024", "")
    assert (row.has, row.has_null, row.mg, row.mg_none, row.mg_rows) == (True, False, "v2", None, "7")
    # Spark 4.2+ resolves built-ins before temporary functions: unqualified Split is Spark's split.
    assert (row.raystack_split, row.builtin_split, row.split_null) == (["a", "b"], ["a", "b", "", ""], [])


def test_spark_builtin_name_collisions_are_known(udf_spark: SparkSession) -> None:
    builtins = {r.function.lower() for r in udf_spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    clashing = {name for name in SCALAR_UDFS if name.lower() in builtins}
    assert clashing == set(SHADOWED_BY_BUILTINS)
    for name, qualified in SHADOWED_BY_BUILTINS.items():
        assert qualified.lower() == f"session.{name.lower()}"


def test_dagger_sql_split_is_raystacks(udf_spark: SparkSession) -> None:
    """In a dagger's SQL, Split is raystack's (trailing empty strings dropped), though Spark's split shadows it:
    evaluated in the Kafka reader when it reads a stream field, in Spark otherwise."""

    def plan(sql: str) -> DaggerPlan:
        stream = {"table": "booking", "topics": ["x"], "proto": "daggers.events.BookingLog"}
        return plan_dagger(parse_spec({"name": "split", "team": "tests", "streams": [stream], "sql": sql}))

    in_reader = plan("SELECT Split(order_number, '-') AS parts FROM `booking`")
    (stream,) = in_reader.streams
    assert [c.describe() for c in stream.computed] == ["__udf_1 = Split(order_number, '-')"]
    event = booking_log_pb2.BookingLog(order_number="a-b--")
    event.event_timestamp.seconds = 1_700_000_000
    assert stream.decoder.decode([event.SerializeToString()]).batch.column("__udf_1").to_pylist() == [["a", "b"]]

    in_spark = plan("SELECT Split(concat(order_number, '-x--'), '-') AS parts FROM `booking`")
    assert "session.Split(CONCAT(order_number, '-x--'), '-')" in in_spark.query.spark_sql
    udf_spark.createDataFrame([("a-b",)], "order_number string").createOrReplaceTempView("booking")
    assert udf_spark.sql(in_spark.query.spark_sql).collect()[0].parts == ["a", "b", "x"]
