"""`.venv/bin/python -m bench.udfs`: per-event cost of lat/lng -> S2 cell id, numpy (jobs.udfs.s2) vs s2sphere
and s2cell, over 1,000,000 random points; plus the other vectorised geo kernels. Figures, never pass/fail.

The libraries are timed on the same 1M points, one call per point (as a row-at-a-time UDF would); the numpy path
once per batch. Results are also checked equal, so a fast wrong answer cannot pass unnoticed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import s2cell
import s2sphere
from rich.console import Console
from rich.table import Table

from jobs.udfs.geo import distance, geo_hash, s2_id
from jobs.udfs.s2 import s2_cell_ids

console = Console()


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--level", type=int, default=13)
    args = parser.parse_args()
    n, level = args.points, args.level

    rng = np.random.default_rng(2026)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))  # uniform on the sphere
    lng = rng.uniform(-180, 180, n)
    lat_list, lng_list = lat.tolist(), lng.tolist()
    rows: list[tuple[str, float]] = []

    with console.status(f"numpy s2_cell_ids, {n:,} points"):
        ours = s2_cell_ids(lat, lng, level)
        rows.append((f"numpy s2_cell_ids (level {level})", best_of(5, lambda: s2_cell_ids(lat, lng, level))))
        rows.append(("numpy s2_cell_ids (level 30)", best_of(5, lambda: s2_cell_ids(lat, lng, 30))))
        lat_a, lng_a, lvl_a = pa.array(lat), pa.array(lng), pa.array(np.full(n, level, dtype=np.int32))
        rows.append(("S2Id Arrow kernel (ids as strings)", best_of(3, lambda: s2_id(lat_a, lng_a, lvl_a))))

    with console.status(f"s2cell, {n:,} points"):
        started = time.perf_counter()
        via_s2cell = [s2cell.lat_lon_to_cell_id(a, b, level) for a, b in zip(lat_list, lng_list, strict=True)]
        rows.append((f"s2cell.lat_lon_to_cell_id (level {level})", time.perf_counter() - started))

    with console.status(f"s2sphere, {n:,} points"):
        started = time.perf_counter()
        via_s2sphere = [
            s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(a, b)).parent(level).id()
            for a, b in zip(lat_list, lng_list, strict=True)
        ]
        rows.append((f"s2sphere CellId.from_lat_lng().parent({level})", time.perf_counter() - started))

    same_s2cell = np.array_equal(ours, np.array(via_s2cell, dtype=np.uint64).view(np.int64))
    same_s2sphere = np.array_equal(ours, np.array(via_s2sphere, dtype=np.uint64).view(np.int64))

    with console.status("other geo kernels"):
        prec = pa.array(np.full(n, 7, dtype=np.int32))
        rows.append(("GeoHash Arrow kernel (precision 7)", best_of(3, lambda: geo_hash(lat_a, lng_a, prec))))
        lat2, lng2 = pa.array(np.roll(lat, 1)), pa.array(np.roll(lng, 1))
        rows.append(("Distance Arrow kernel", best_of(3, lambda: distance(lat_a, lng_a, lat2, lng2))))

    table = Table(title=f"lat/lng kernels over {n:,} random points (one core)")
    for col in ("implementation", "total s", "per event µs"):
        table.add_column(col)
    for label, seconds in rows:
        table.add_row(label, f"{seconds:.3f}", f"{seconds / n * 1e6:.3f}")
    console.print(table)

    per_event = {label: seconds / n for label, seconds in rows}
    numpy_us = per_event[f"numpy s2_cell_ids (level {level})"] * 1e6
    s2cell_us = per_event[f"s2cell.lat_lon_to_cell_id (level {level})"] * 1e6
    s2sphere_us = per_event[f"s2sphere CellId.from_lat_lng().parent({level})"] * 1e6
    print(
        f"s2_numpy_us={numpy_us:.3f} s2cell_us={s2cell_us:.2f} s2sphere_us={s2sphere_us:.2f} "
        f"speedup_vs_s2cell={s2cell_us / numpy_us:.0f}x speedup_vs_s2sphere={s2sphere_us / numpy_us:.0f}x "
        f"identical_to_s2cell={same_s2cell} identical_to_s2sphere={same_s2sphere}"
    )
    return 0 if same_s2cell and same_s2sphere else 1


if __name__ == "__main__":
    raise SystemExit(main())
