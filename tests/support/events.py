"""The seed queries' ground truth in plain Python: each event's S2 cell and window, and what the surge query counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import s2sphere
from daggers.events import common_pb2

# When the engine tests' events start (a fixed time; tests/support/catalog.py has the catalog streams' recent START).
START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def s2id(lat: float, lng: float, level: int = 13) -> str:
    """Independent reference: s2sphere, as Java's signed Long.toString(S2CellId.id())."""
    cell = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id()
    return str(cell - (1 << 64) if cell >= 1 << 63 else cell)


def window_end(seconds: int, size: int = 60) -> str:
    return datetime.fromtimestamp((seconds // size + 1) * size, UTC).isoformat()


def surge_truth(events: Iterable[Any]) -> Counter[tuple[int, str, str, str]]:
    truth: Counter[tuple[int, str, str, str]] = Counter()
    for e in events:
        if e.status == 4:  # COMPLETED
            vt = common_pb2.VehicleType.Name(e.vehicle_type)
            truth[(e.city_id, s2id(e.lat, e.long), vt, window_end(e.event_timestamp.seconds))] += 1
    return truth
