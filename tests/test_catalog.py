"""The stream catalog: the file, schema fingerprints, and loading it into the registry with version locking
(`buf breaking` judges changes) on the test stack's PostgreSQL."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from grpc_tools import protoc

import protos
from jobs.spec import DaggerSpec, SpecError, parse_spec, resolve_streams
from odin.catalog import CATALOG_FILE, CatalogError, load
from odin.catalog.lookup import registry_streams
from odin.catalog.schemas import Schema
from odin.catalog.sync import sync
from odin.paths import BIN_DIR
from odin.registry import Registry
from odin.registry.records import DaggerRecord
from tests.support.services import Services

BOOKING = "daggers.events.BookingLog"


def compiled(tmp: Path, name: str, edit: tuple[str, str] | None = None, file: str = "booking_log.proto") -> Path:
    """protos/ compiled into a descriptor set, after replacing edit[0] by edit[1] in `file`."""
    root = tmp / name
    shutil.copytree(protos.PROTO_ROOT / "daggers", root / "daggers")
    if edit is not None:
        path = root / "daggers" / "events" / file
        text = path.read_text()
        assert edit[0] in text, f"{edit[0]!r} not in {file}"
        path.write_text(text.replace(edit[0], edit[1]))
    out = tmp / f"{name}.desc"
    include = Path(protoc.__file__).parent / "_proto"
    files = [str(p) for p in sorted(root.rglob("*.proto"))]
    args = ["protoc", f"-I{root}", f"-I{include}", "--include_imports", f"--descriptor_set_out={out}", *files]
    assert protoc.main(args) == 0
    return out


def test_the_catalog_validates_and_every_stream_has_a_perf_twin() -> None:
    catalog = load()
    names = [s.name for s in catalog.all_streams()]
    assert {"booking-log", "driver-location", "api-log"} <= set(names)
    for stream in catalog.streams:
        twin = next(s for s in catalog.all_streams() if s.name == f"{stream.name}-perf")
        assert twin.proto == stream.proto and twin.perf_twin_of == stream.name
        assert twin.topics == [f"{t}-perf" for t in stream.topics]
        assert (stream.kafka_cluster, twin.kafka_cluster) == ("mainstream", "perfstream")  # brokers of their own


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (("proto: daggers.events.BookingLog", "proto: daggers.events.Booking"), r"streams.0.proto: .*unknown"),
        (("kafka_cluster: mainstream\n    topics: [RIDE", "kafka_cluster: other\n    topics: [RIDE"), "not in kafka"),
        (("topics: [api-log]", "topics: [driver-location-ping]"), "a topic belongs to one stream"),
        (("name: api-log", "name: api-log-perf"), "twins are added by the catalog"),
        (("name: api-log", "name: Api Log"), "streams.2.name"),
    ],
)
def test_a_bad_catalog_is_refused_naming_the_field(tmp_path: Path, edit: tuple[str, str], error: str) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text(CATALOG_FILE.read_text().replace(*edit))
    with pytest.raises(CatalogError, match=error):
        load(path)


def test_the_fingerprint_is_of_what_decoding_depends_on(tmp_path: Path) -> None:
    base = Schema.of(BOOKING, [compiled(tmp_path, "base")])
    assert base.fingerprint == Schema.of(BOOKING).fingerprint
    commented = compiled(tmp_path, "commented", ("message BookingLog {", "// a new comment\nmessage BookingLog {"))
    assert Schema.of(BOOKING, [commented]).fingerprint == base.fingerprint
    unrelated = compiled(
        tmp_path, "unrelated", ("message ApiLog {", "message ApiLog {\n  int64 extra = 99;"), "api_log.proto"
    )
    assert Schema.of(BOOKING, [unrelated]).fingerprint == base.fingerprint
    retyped = compiled(tmp_path, "retyped", ("  int32 city_id = 5;", "  int64 city_id = 5;"))
    assert Schema.of(BOOKING, [retyped]).fingerprint != base.fingerprint
    # a type it reaches: Location, in common.proto
    nested = compiled(
        tmp_path, "nested", ("message Location {", "message Location {\n  string h3 = 20;"), "common.proto"
    )
    assert Schema.of(BOOKING, [nested]).fingerprint != base.fingerprint


def test_schema_changes_are_locked_by_version_and_breaking_ones_refused(registry: Registry, tmp_path: Path) -> None:
    catalog = load()
    first = sync(registry, catalog, "local", "127.0.0.1:9092", actor="alice")
    assert {(r.name, r.verdict, r.schema_version) for r in first} >= {("booking-log", "added", 1)}
    assert registry.stream("booking-log-perf").perf_twin_of == "booking-log"  # type: ignore[union-attr]
    assert {r.verdict for r in sync(registry, catalog, "local", "127.0.0.1:9092")} == {"unchanged"}

    registry.ensure_team("pricing")
    registry.put_dagger(
        DaggerRecord(
            team="pricing",
            name="surge",
            spec={},
            spec_version=1,
            checkpoint="/nowhere",
            state="running",
            schema_versions={"booking-log": 1},
        )
    )
    # Compatible: a new field. A new version; the running dagger stays on the one it was deployed with.
    added = compiled(
        tmp_path,
        "added",
        (
            "  google.protobuf.Timestamp event_timestamp = 17;",
            "  google.protobuf.Timestamp event_timestamp = 17;\n  string promo = 18;",
        ),
    )
    second = {r.name: r for r in sync(registry, catalog, "local", "127.0.0.1:9092", descriptor_sets=[added])}
    assert (second["booking-log"].verdict, second["booking-log"].schema_version) == ("new schema version", 2)
    assert second["booking-log"].daggers_on_old == ["pricing/surge (v1)"]
    assert second["api-log"].verdict == "unchanged"
    assert registry.dagger("pricing", "surge").schema_versions == {"booking-log": 1}  # type: ignore[union-attr]

    # Not wire-compatible: a field's type changed. Refused; the registry keeps version 2.
    retyped = compiled(tmp_path, "retyped", ("  int32 city_id = 5;", "  string city_id = 5;"))
    third = {r.name: r for r in sync(registry, catalog, "local", "127.0.0.1:9092", descriptor_sets=[retyped])}
    refused = third["booking-log"]
    assert (refused.verdict, refused.schema_version, refused.ok) == ("refused", 2, False)
    assert any("city_id" in f and "int32" in f and "string" in f for f in refused.findings), refused.findings
    assert refused.daggers_on_old == ["pricing/surge (v1)"]
    assert registry.stream("booking-log").schema_version == 2  # type: ignore[union-attr]
    [entry] = [e for e in registry.history("stream:booking-log") if e.outcome == "refused"]
    assert entry.action == "catalog_schema_change" and "city_id" in entry.message
    assert entry.detail["daggers_on_old"] == ["pricing/surge (v1)"]


def test_odin_up_loaded_the_catalog_and_odin_catalog_shows_it(services: Services) -> None:
    assert services.report is not None and services.report.catalog
    assert all(r.verdict == "added" for r in services.report.catalog)
    assert services.stack is not None
    env = {**os.environ, "PATH": f"{BIN_DIR}:{os.environ['PATH']}"}
    state = ["--state-dir", str(services.stack.state_dir)]
    again = subprocess.run(
        [str(BIN_DIR / "odin"), "catalog", "sync", *state], capture_output=True, text=True, env=env, timeout=120
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "unchanged" in again.stdout and "added" not in again.stdout
    listed = subprocess.run(
        [str(BIN_DIR / "odin"), "catalog", "list", *state],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "250"},
        timeout=120,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "booking-log-perf" in listed.stdout and services.kafka_bootstrap in listed.stdout
    registry = Registry.connect(services.registry_url)
    try:
        where = {s.name: s.bootstrap_servers for s in registry.streams()}
    finally:
        registry.close()
    assert where["booking-log"] == services.kafka_bootstrap
    assert where["booking-log-perf"] == services.perf_kafka_bootstrap  # perf streams have a cluster of their own


def test_a_spec_names_a_catalog_stream_and_gets_its_topics_message_and_kafka(services: Services) -> None:
    assert services.stack is not None
    lookup = registry_streams("local", services.stack.state_dir)
    spec = parse_spec(
        {
            "name": "surge",
            "team": "pricing",
            "streams": [{"table": "booking", "stream": "booking-log", "kafka": {"max_events_per_trigger": 1000}}],
            "sql": "SELECT count(1) AS n FROM booking",
        }
    )
    [stream] = resolve_streams(spec, lookup).streams
    assert stream.topics == ["RIDE-booking-log", "CAR-booking-log", "SHOP-booking-log", "COMBO-booking-log"]
    assert (stream.proto, stream.kafka.bootstrap_servers) == (BOOKING, services.kafka_bootstrap)
    assert stream.kafka.max_events_per_trigger == 1000  # the spec's own settings stay

    def with_stream(**fields: object) -> DaggerSpec:
        return spec.model_copy(update={"streams": [spec.streams[0].model_copy(update=fields)]})

    with pytest.raises(SpecError, match=r"streams.0.stream: no stream 'bookings' in the catalog"):
        resolve_streams(with_stream(stream="bookings"), lookup)
    with pytest.raises(SpecError, match=r"streams.0.topics: \['mine'\] is not the catalog's"):
        resolve_streams(with_stream(topics=["mine"]), lookup)
    with pytest.raises(SpecError, match=r"topics and proto: required unless `stream` names a stream of the catalog"):
        parse_spec({**spec.model_dump(mode="json"), "streams": [{"table": "booking"}]})


def test_dagger_validate_resolves_a_catalog_stream_in_the_environment(services: Services, tmp_path: Path) -> None:
    assert services.stack is not None
    spec = tmp_path / "surge.yaml"
    spec.write_text(
        "name: surge\nteam: pricing\nstreams:\n  - table: booking\n    stream: driver-location\n"
        "sql: SELECT count(1) AS n FROM booking\n"
    )
    env = {**os.environ, "ODIN_HOME": str(services.stack.state_dir), "COLUMNS": "200"}
    ok = subprocess.run(
        [str(BIN_DIR / "dagger"), "validate", str(spec)], capture_output=True, text=True, env=env, timeout=120
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "driver-location-ping" in ok.stdout and "DriverLocationPing" in ok.stdout
    nowhere = {**env, "ODIN_HOME": str(tmp_path / "no-environment")}
    offline = subprocess.run(
        [str(BIN_DIR / "dagger"), "validate", str(spec)], capture_output=True, text=True, env=nowhere, timeout=120
    )
    assert offline.returncode == 0, offline.stdout + offline.stderr  # the reviewed catalog file, and it says so
    assert "driver-location-ping" in offline.stdout and "from the catalog file" in offline.stderr
    stray = spec.read_text().replace("stream: driver-location", "stream: driver-locations")
    spec.write_text(stray)
    refused = subprocess.run(
        [str(BIN_DIR / "dagger"), "validate", str(spec)], capture_output=True, text=True, env=nowhere, timeout=120
    )
    assert refused.returncode == 2
    assert "streams.0.stream: no stream 'driver-locations' in the catalog" in refused.stderr, refused.stderr
