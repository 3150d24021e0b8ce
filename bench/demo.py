"""`make demo`: the surge dagger end to end on the embedded local stack.

1. `odin up` brings up Kafka (Tansu) and VictoriaMetrics.
2. Booking events of the last half hour go to a fresh topic.
3. `dagger run --once` runs the seed's surge query (docs/examples/surge-demand.yaml, topic swapped in) on local[2]:
   S2Id level 13, per-minute tumbling windows, results to VictoriaMetrics through the InfluxDB API.
4. The busiest cells are read back from VictoriaMetrics and checked against a count done in plain Python.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import s2sphere
import yaml
from daggers.events import booking_log_pb2, common_pb2
from rich.console import Console
from rich.table import Table

from odin import victoria
from odin.endpoints import Endpoints
from odin.kafka.topics import ensure_topics
from odin.paths import BIN_DIR, REPO, default_state_dir
from odin.stack import Stack
from odin.traffic.generator import booking_logs, produce

EVENTS = 100_000
SPEC = REPO / "docs" / "examples" / "surge-demand.yaml"
console = Console()


def truth(events: list[booking_log_pb2.BookingLog]) -> Counter[tuple[str, str, str, int]]:
    """Completed bookings per (city, S2 cell, vehicle type, window end in ms), counted in plain Python."""
    completed = booking_log_pb2.BookingStatus.Value("COMPLETED")
    out: Counter[tuple[str, str, str, int]] = Counter()
    for e in events:
        if e.status == completed:
            # s2sphere, independent of the dagger's vectorised S2; as Java's signed long, like S2Id returns it.
            cell = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(e.lat, e.long)).parent(13).id()
            token = str(cell - (1 << 64) if cell >= 1 << 63 else cell)
            end = (e.event_timestamp.seconds // 60 + 1) * 60_000
            out[(str(e.city_id), token, common_pb2.VehicleType.Name(e.vehicle_type), end)] += 1
    return out


def stored(vm: str, metric: str) -> Counter[tuple[str, str, str, int]]:
    out: Counter[tuple[str, str, str, int]] = Counter()
    for series in victoria.export(vm, metric):
        m = series["metric"]
        for ts, value in zip(series["timestamps"], series["values"], strict=True):
            out[(m["tag_city_id"], m["tag_s2id"], m["tag_vehicle_type"], ts)] = int(value)
    return out


def main() -> int:
    console.rule("1. odin up: Kafka (Tansu) and VictoriaMetrics")
    up = subprocess.run([str(BIN_DIR / "odin"), "up", "--only", "kafka_broker,victoria_metrics"], check=False)
    if up.returncode:
        return up.returncode
    where = Endpoints(Stack().nodes())
    kafka, vm = where.kafka_bootstrap, where.victoria_metrics_url

    run_id = int(time.time())
    topic = f"demo-booking-log-{run_id}"
    console.rule(f"2. produce {EVENTS:,} BookingLog events of the last 30 minutes to {topic}")
    start = datetime.now(UTC) - timedelta(minutes=30)
    events = list(booking_logs(EVENTS, seed=run_id, start=start, rate=EVENTS / 1800))
    ensure_topics({"bootstrap.servers": kafka}, {topic: 2})
    produce(kafka, topic, iter(events), partitions=2)

    console.rule("3. dagger run --once: the seed's surge query on local[2]")
    spec = yaml.safe_load(SPEC.read_text())
    spec["streams"][0]["topics"] = [topic]
    spec["streams"][0]["kafka"]["bootstrap_servers"] = kafka
    measurement = f"surge_demand_{run_id}"
    spec["sink"] |= {"url": vm, "measurement": measurement}
    spec["telemetry_url"] = vm
    demo_dir = default_state_dir() / "demo" / str(run_id)
    spec["checkpoint_dir"] = str(demo_dir / "checkpoint")
    demo_dir.mkdir(parents=True, exist_ok=True)
    spec_path = demo_dir / "surge-demand.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    console.print(f"spec: {spec_path}")
    run = subprocess.run([str(BIN_DIR / "dagger"), "run", "--once", str(spec_path)], check=False)
    if run.returncode:
        return run.returncode

    console.rule("4. read the windows back from VictoriaMetrics")
    want = truth(events)
    got: Counter[tuple[str, str, str, int]] = Counter()
    for _ in range(20):  # new series become searchable within seconds
        got = stored(vm, f"{measurement}_num_of_bookings")
        if got == want:
            break
        time.sleep(1)
    table = Table(title=f"busiest S2 cells (level 13) per minute: {measurement}_num_of_bookings", title_justify="left")
    for col in ("window end (UTC)", "city", "S2 cell", "vehicle", "completed bookings", "plain Python"):
        table.add_column(col, no_wrap=col == "S2 cell")
    for (city, cell, vehicle, end), n in sorted(got.items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
        when = datetime.fromtimestamp(end / 1000, UTC).strftime("%H:%M")
        table.add_row(when, city, cell, vehicle, str(n), str(want.get((city, cell, vehicle, end), 0)))
    console.print(table)
    ok = got == want
    console.print(
        f"[{'green' if ok else 'red'}]demo {'ok' if ok else 'FAILED'}[/]: {len(got):,} rows in VictoriaMetrics, "
        f"{sum(got.values()):,} completed bookings ({sum(want.values()):,} counted in plain Python). "
        f"Explore at {vm}/vmui (metric {measurement}_num_of_bookings, dagger_metrics_*); stop with `make down`."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
