"""What a consumer of a Loki run may read and write, judged from the catalog and the environment, failing closed:
anything not known to be a perf stream, a perf broker or the team's own place is refused.

Reads: catalog perf streams only (a raw topic counts only if a catalog perf stream has it, on that stream's
brokers). Dead letters: `<perf topic>.dlq` or under the team's prefix, never a catalog topic. Sinks: a Kafka topic
under `<team>.` on a perf broker (never a catalog stream's topic), the environment's sink database or the team's
own, the environment's TSDB (not the platform's `dagger_metrics`), no log file, telemetry only to the
environment's store.
"""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from jobs.spec import DaggerSpec, InfluxSink, KafkaSink, LogSink, PostgresSink
from odin.registry.records import StreamRecord

TELEMETRY = "dagger_metrics"  # the platform's measurement of every dagger's progress


def _addresses(servers: str) -> set[str]:
    return {s.strip() for s in servers.split(",") if s.strip()}


def _stores(values: dict[str, str]) -> set[str]:
    return {u.rstrip("/") for u in (values.get("victoria_metrics_url"), values.get("influxdb_url")) if u}


def _pg(dsn: str) -> dict[str, str]:
    """A DSN's parameters (URL or key=value), the port defaulted."""
    return {"port": "5432", **{k: str(v) for k, v in conninfo_to_dict(dsn).items()}}


def consumer_refusals(
    where: str, spec: DaggerSpec, streams: list[StreamRecord], values: dict[str, str], team: str | None
) -> list[str]:
    """Why consumer `spec` may not run (`where`: its path in the playbook, e.g. load.consumers.0.spec)."""
    catalog = {s.name: s for s in streams}
    perf = [s for s in streams if s.perf_twin_of]
    perf_brokers = set().union(*(_addresses(s.bootstrap_servers) for s in perf)) if perf else set()
    catalog_topics = {t for s in streams for t in s.topics}
    out: list[str] = []
    if team is not None and spec.team != team:
        out.append(f"{where}.team: {spec.team!r}: a run aimed at team {team} runs only that team's daggers")
    for j, s in enumerate(spec.streams):
        record = catalog.get(s.stream) if s.stream else None
        if s.stream is not None:
            topics = list(record.topics) if record is not None else []
            if record is None or not record.perf_twin_of:
                out.append(f"{where}.streams.{j}: stream {s.stream!r} is not a perf stream")
        else:
            topics = list(s.topics)
            owners = [p for p in perf if set(s.topics) <= set(p.topics)]
            if not owners:
                out.append(f"{where}.streams.{j}: topics {s.topics} are not a catalog perf stream's topics")
            elif not _addresses(s.kafka.bootstrap_servers) <= _addresses(owners[0].bootstrap_servers):
                out.append(
                    f"{where}.streams.{j}.kafka.bootstrap_servers: {s.kafka.bootstrap_servers} is not where perf "
                    f"stream {owners[0].name} is ({owners[0].bootstrap_servers})"
                )
        if s.dlq_topic is not None:
            allowed = {f"{t}.dlq" for t in topics if t.endswith("-perf")}
            if s.dlq_topic in catalog_topics or not (s.dlq_topic in allowed or s.dlq_topic.startswith(f"{spec.team}.")):
                out.append(
                    f"{where}.streams.{j}.dlq_topic: {s.dlq_topic!r}: dead letters go to <perf topic>.dlq "
                    f"({', '.join(sorted(allowed)) or 'none here'}) or a topic under {spec.team}."
                )
    out.extend(_sink_refusals(where, spec, values, perf_brokers, catalog_topics))
    telemetry = _stores(values)
    if spec.telemetry_url is not None and spec.telemetry_url.rstrip("/") not in telemetry:
        out.append(f"{where}.telemetry_url: {spec.telemetry_url} is not the environment's metrics store")
    return out


def _sink_refusals(
    where: str, spec: DaggerSpec, values: dict[str, str], perf_brokers: set[str], catalog_topics: set[str]
) -> list[str]:
    sink, at = spec.sink, f"{where}.sink"
    if isinstance(sink, LogSink) and sink.path is not None:
        return [f"{at}.path: a Loki consumer's log sink is its own log (leave path out)"]
    if isinstance(sink, KafkaSink):
        out = []
        if sink.topic in catalog_topics or not sink.topic.startswith(f"{spec.team}."):
            out.append(f"{at}.topic: {sink.topic!r}: a team's output topic starts with {spec.team}. and is no "
                       "catalog stream's")  # fmt: skip
        if not perf_brokers or not _addresses(sink.bootstrap_servers) <= perf_brokers:
            out.append(f"{at}.bootstrap_servers: {sink.bootstrap_servers}: a Loki consumer writes to the perf "
                       f"brokers only ({', '.join(sorted(perf_brokers)) or 'none in the catalog'})")  # fmt: skip
        return out
    if isinstance(sink, PostgresSink):
        if "postgres_dsn" not in values:
            return [f"{at}: the environment has no sink database"]
        own = _pg(values["postgres_dsn"])
        got = _pg(sink.dsn)
        same_server = (got.get("host"), got.get("port")) == (own.get("host"), own.get("port"))
        # the environment's scratch database exactly as Odin gives it, or the team's own (its role and password
        # come from the team's secrets, never another role's password file)
        if got != own and not (same_server and got.get("dbname") == spec.team and "passfile" not in got):
            return [f"{at}.dsn: a Loki consumer writes to the environment's sink database (${{postgres_dsn}}: "
                    f"{own.get('dbname')}) or its team's ({spec.team}) on {own.get('host')}:{own.get('port')}, not "
                    f"{got.get('dbname') or '?'} on {got.get('host')}:{got.get('port')}"]  # fmt: skip
        return []
    if isinstance(sink, InfluxSink):
        out = []
        stores = _stores(values)
        if sink.url.rstrip("/") not in stores:
            out.append(f"{at}.url: {sink.url} is not the environment's TSDB ({', '.join(sorted(stores))})")
        if (sink.measurement or spec.name).startswith(TELEMETRY):
            out.append(f"{at}.measurement: {TELEMETRY}* is the platform's telemetry")
        return out
    return []
