"""Synthetic events in the seeds' shape (booking log, driver location pings, API gateway log), and a producer.

Deterministic for a seed, so a test can compute the expected aggregates from the same events it produced.
Event times advance at `rate` events per second of event time from `start`, in order per key-less stream.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from confluent_kafka import Producer
from daggers.events import api_log_pb2, booking_log_pb2, common_pb2, driver_location_pb2
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp


@dataclass(frozen=True)
class City:
    city_id: int
    name: str
    lat: float  # centre
    long: float
    radius_deg: float


CITIES = (
    City(1, "jakarta", -6.2088, 106.8456, 0.15),
    City(2, "bandung", -6.9175, 107.6191, 0.08),
    City(3, "surabaya", -7.2575, 112.7521, 0.10),
    City(4, "bali", -8.4095, 115.1889, 0.20),
)
SERVICE_TYPES = ("RIDE", "CAR", "FOOD", "SEND")
VEHICLE_FOR = {"RIDE": "BIKE", "FOOD": "BIKE", "SEND": "BIKE", "CAR": "CAR_4_SEATER"}
BOOKING_STATUSES = ("CREATED", "DRIVER_FOUND", "PICKED_UP", "COMPLETED", "CUSTOMER_CANCELLED", "NO_DRIVER_FOUND")
DRIVER_STATUSES = ("AVAILABLE", "ON_TRIP", "BREAK")
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
M = TypeVar("M", bound=Message)
API_PATHS = ("/v1/bookings", "/v1/estimate", "/v1/drivers/nearby", "/v1/payments", "/v1/profile")


def stamp(ts: Timestamp, seconds: float) -> None:
    ts.seconds = int(seconds)
    ts.nanos = round((seconds - int(seconds)) * 1e6) * 1000  # microsecond precision, as Spark keeps


def _point(rng: random.Random, city: City) -> tuple[float, float]:
    return (
        round(city.lat + rng.uniform(-city.radius_deg, city.radius_deg), 6),
        round(city.long + rng.uniform(-city.radius_deg, city.radius_deg), 6),
    )


def _timed(
    n: int, seed: int, start: datetime | None, rate: float, make: Callable[[random.Random, int], M]
) -> Iterator[M]:
    """`n` events `make(rng, i)` from one seeded generator, stamped `rate` per second of event time from `start`."""
    rng = random.Random(seed)
    t0 = (start or DEFAULT_START).timestamp()
    for i in range(n):
        msg = make(rng, i)
        stamp(msg.event_timestamp, t0 + i / rate)
        yield msg


def booking(
    rng: random.Random, i: int, *, seed: int = 0, customers: int = 5000, cities: tuple[City, ...] = CITIES
) -> booking_log_pb2.BookingLog:
    """The `i`-th booking of a generator seeded `seed` (event time not set)."""
    city = rng.choice(cities)
    service = rng.choice(SERVICE_TYPES)
    lat, long = _point(rng, city)
    drop_lat, drop_long = _point(rng, city)
    status = rng.choice(BOOKING_STATUSES)
    return booking_log_pb2.BookingLog(
        order_number=f"ORD-{seed}-{i}",
        status=status,
        service_type=service,
        vehicle_type=VEHICLE_FOR[service],
        city_id=city.city_id,
        customer_id=f"C{rng.randrange(customers)}",
        driver_id="" if status in ("CREATED", "NO_DRIVER_FOUND") else f"D{rng.randrange(customers // 2)}",
        lat=lat,
        long=long,
        pickup_location=common_pb2.Location(latitude=lat, longitude=long),
        dropoff_location=common_pb2.Location(latitude=drop_lat, longitude=drop_long),
        total_fare=round(rng.uniform(8_000, 90_000), 0),
        surge_factor=rng.choice((1.0, 1.0, 1.0, 1.2, 1.5)),
        payment_type=rng.choice(("CASH", "WALLET", "CARD")),
        tags=rng.sample(("promo", "new_user", "airport", "priority"), k=rng.randrange(3)),
        metadata={"app_version": rng.choice(("4.1.0", "4.2.1"))},
    )


def ping(
    rng: random.Random, _i: int, *, seed: int = 0, drivers: int = 2000, cities: tuple[City, ...] = CITIES
) -> driver_location_pb2.DriverLocationPing:
    city = rng.choice(cities)
    service = rng.choice(SERVICE_TYPES)
    lat, long = _point(rng, city)
    return driver_location_pb2.DriverLocationPing(
        driver_id=f"D{rng.randrange(drivers)}",
        latitude=lat,
        longitude=long,
        driver_location=common_pb2.Location(latitude=lat, longitude=long),
        driver_status=rng.choice(DRIVER_STATUSES),
        service_type=service,
        vehicle_type=VEHICLE_FOR[service],
        city_id=city.city_id,
        accuracy_meters=round(rng.uniform(3, 30), 1),
        speed_kmh=round(rng.uniform(0, 60), 1),
        bearing_degrees=round(rng.uniform(0, 360), 1),
    )


def request(rng: random.Random, _i: int, *, seed: int = 0) -> api_log_pb2.ApiLog:
    return api_log_pb2.ApiLog(
        path=rng.choice(API_PATHS),
        method=rng.choice(("GET", "GET", "POST")),
        status_code=rng.choices((200, 201, 400, 404, 500, 503), weights=(70, 10, 8, 6, 4, 2))[0],
        latency_ms=round(rng.lognormvariate(3.5, 0.8), 2),
    )


def booking_logs(
    n: int, *, seed: int = 0, start: datetime | None = None, rate: float = 1000.0, customers: int = 5000
) -> Iterator[booking_log_pb2.BookingLog]:
    return _timed(n, seed, start, rate, lambda rng, i: booking(rng, i, seed=seed, customers=customers))


def driver_pings(
    n: int, *, seed: int = 0, start: datetime | None = None, rate: float = 1000.0, drivers: int = 2000
) -> Iterator[driver_location_pb2.DriverLocationPing]:
    return _timed(n, seed, start, rate, lambda rng, i: ping(rng, i, seed=seed, drivers=drivers))


def api_logs(
    n: int, *, seed: int = 0, start: datetime | None = None, rate: float = 1000.0
) -> Iterator[api_log_pb2.ApiLog]:
    return _timed(n, seed, start, rate, lambda rng, i: request(rng, i, seed=seed))


def produce(
    bootstrap_servers: str,
    topic: str,
    messages: Iterator[Message] | Iterator[bytes],
    *,
    partitions: int | None = None,
    partition: int | None = None,
    key: str | None = None,
) -> int:
    """Produce `messages` (protobuf messages or raw bytes) to `topic`; returns how many were acknowledged.

    With `partitions`, messages are spread round-robin over that many partitions (explicit, so a test knows
    where each event went); with `partition`, all go to that one; otherwise the message field `key` (if given) is
    the Kafka key.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000,
            "enable.idempotence": True,
        }
    )
    errors: list[str] = []
    sent = 0

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for i, m in enumerate(messages):
        value = m if isinstance(m, bytes) else m.SerializeToString()
        kwargs: dict[str, object] = {"on_delivery": on_delivery}
        if partitions:
            kwargs["partition"] = i % partitions
        elif partition is not None:
            kwargs["partition"] = partition
        elif key and not isinstance(m, bytes):
            kwargs["key"] = str(getattr(m, key)).encode()
        for _attempt in range(2400):  # local queue full: let deliveries drain, for at most ~2 minutes
            try:
                producer.produce(topic, value, **kwargs)  # type: ignore[arg-type]
                break
            except BufferError:
                producer.poll(0.05)
        else:
            raise RuntimeError(f"produce to {topic}: the broker at {bootstrap_servers} accepted nothing for 2 minutes")
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"produce to {topic}: {remaining} undelivered, {len(errors)} failed: {errors[:3]}")
    return sent
