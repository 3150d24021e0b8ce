"""Health of each node, checked the way a client of the service would: over its own protocol."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from odin.apis import http_client
from odin.endpoints import Endpoints

Node = dict[str, Any]
TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str


def _http(url: str) -> httpx.Response:
    return http_client.get(url, timeout=TIMEOUT_S)


def _kafka(node: Node) -> Health:
    from confluent_kafka.admin import AdminClient

    if not port_open(node["host"], node["ports"]["kafka"]):
        return Health(False, "port closed")
    quiet = logging.getLogger("odin.health.kafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient(
        {"bootstrap.servers": f"{node['host']}:{node['ports']['kafka']}", "socket.timeout.ms": 3000, "logger": quiet}
    )
    md = admin.list_topics(timeout=TIMEOUT_S)
    return Health(True, f"{len(md.brokers)} broker(s), {len(md.topics)} topic(s)")


def _victoria_metrics(node: Node) -> Health:
    r = _http(f"http://{node['host']}:{node['ports']['http']}/health")
    return Health(r.status_code == 200, r.text.strip()[:60])


def _influxdb(node: Node) -> Health:
    r = _http(f"http://{node['host']}:{node['ports']['http']}/ping")
    return Health(r.status_code == 204, f"version {r.headers.get('X-Influxdb-Version', '?')}")


def _postgres(node: Node) -> Health:
    import psycopg

    if not port_open(node["host"], node["ports"]["postgres"]):
        return Health(False, "port closed")
    # The superuser on the unix socket: the only role without a password file of its own to read.
    with psycopg.connect(Endpoints({node["name"]: node}).postgres_admin, connect_timeout=int(TIMEOUT_S)) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        roles = conn.execute("SELECT count(*) FROM pg_roles WHERE rolcanlogin").fetchone()
    return Health(True, f"PostgreSQL {version[0] if version else '?'}, {roles[0] if roles else '?'} login role(s)")


def _spark_master(node: Node) -> Health:
    doc = _http(f"http://{node['host']}:{node['ports']['ui']}/json/").json()
    alive = sum(w.get("state") == "ALIVE" for w in doc.get("workers", []))
    return Health(doc.get("status") == "ALIVE", f"{doc.get('status')}, {alive} worker(s) alive")


def _spark_worker(node: Node) -> Health:
    doc = _http(f"http://{node['host']}:{node['ports']['ui']}/json/").json()
    master = doc.get("masterurl", "")
    registered = master == node["settings"]["master_url"]
    return Health(registered, f"{doc.get('cores')} cores, {doc.get('memory')} MB, master {master or 'none'}")


def _airflow(node: Node) -> Health:
    doc = _http(f"http://{node['host']}:{node['ports']['http']}/api/v2/monitor/health").json()
    parts = {k: v.get("status") for k, v in doc.items() if isinstance(v, dict)}
    ok = all(s == "healthy" for s in parts.values()) and bool(parts)
    return Health(ok, ", ".join(f"{k}={v}" for k, v in sorted(parts.items())))


def _alertmanager(node: Node) -> Health:
    ready = _http(f"http://{node['host']}:{node['ports']['http']}/-/ready")
    receiver = _http(f"http://{node['host']}:{node['ports']['receiver']}/health")
    counts = receiver.json() if receiver.status_code == 200 else {}
    detail = f"receiver: {counts.get('alerts', '?')} alert(s) recorded, {counts.get('rejected', '?')} refused"
    return Health(ready.status_code == 200 and receiver.status_code == 200, detail)


def _vmalert(node: Node) -> Health:
    r = _http(f"http://{node['host']}:{node['ports']['http']}/api/v1/rules")
    groups = r.json().get("data", {}).get("groups", []) if r.status_code == 200 else []
    return Health(r.status_code == 200, f"{sum(len(g.get('rules', [])) for g in groups)} rule(s)")


def _traffic(node: Node) -> Health:
    r = _http(f"http://{node['host']}:{node['ports']['http']}/health")
    doc = r.json()
    if r.status_code != 200:
        return Health(False, "; ".join(doc.get("problems", [])) or f"HTTP {r.status_code}")
    streams = doc.get("streams", {})
    rates = sorted({s["rate"] for s in streams.values()})
    return Health(True, f"{len(streams)} stream(s) at {'/'.join(f'{x:g}' for x in rates)} events/s each")


CHECKS: dict[str, Callable[[Node], Health]] = {
    "kafka_broker": _kafka,
    "victoria_metrics": _victoria_metrics,
    "influxdb": _influxdb,
    "postgres": _postgres,
    "spark_master": _spark_master,
    "spark_worker": _spark_worker,
    "airflow": _airflow,
    "alertmanager": _alertmanager,
    "vmalert": _vmalert,
    "traffic": _traffic,
}

URLS: dict[str, Callable[[Node], str]] = {
    "kafka_broker": lambda n: f"{n['host']}:{n['ports']['kafka']}",
    "victoria_metrics": lambda n: f"http://{n['host']}:{n['ports']['http']}",
    "influxdb": lambda n: f"http://{n['host']}:{n['ports']['http']}",
    "postgres": lambda n: f"postgresql://{n['host']}:{n['ports']['postgres']} (scram-sha-256)",
    "spark_master": lambda n: (
        f"spark://{n['host']}:{n['ports']['master']} (REST :{n['ports']['rest']}, "
        f"UI http://{n['host']}:{n['ports']['ui']})"
    ),
    "spark_worker": lambda n: f"http://{n['host']}:{n['ports']['ui']}",
    "airflow": lambda n: f"http://{n['host']}:{n['ports']['http']}",
    "alertmanager": lambda n: f"http://{n['host']}:{n['ports']['http']} (receiver :{n['ports']['receiver']})",
    "vmalert": lambda n: f"http://{n['host']}:{n['ports']['http']}",
    "traffic": lambda n: f"http://{n['host']}:{n['ports']['http']}/health",
}


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def check(node: Node) -> Health:
    """Never raises: an unreachable service is simply unhealthy, with the reason."""
    try:
        return CHECKS[node["role"]](node)
    except Exception as e:
        return Health(False, f"{type(e).__name__}: {str(e)[:120]}")
