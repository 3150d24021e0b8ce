"""The session's services answer over their own protocols: the fixtures later issues build on."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import psycopg
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odin.apis import http_client
from odin.cluster.secret import rest_token
from odin.paths import REPO
from tests.support.services import Services
from tests.support.waiting import wait_for


def test_kafka_round_trip(services: Services) -> None:
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": services.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": services.kafka_bootstrap, "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic, key=str(i % 2).encode(), value=f"event-{i}".encode())
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": services.kafka_bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # Tansu answers a group's first join after about half the session timeout: 23 s at librdkafka's 45 s
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(got) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.add(msg.value())
    consumer.close()
    assert got == {f"event-{i}".encode() for i in range(100)}


def test_victoria_metrics_accepts_influx_lines(services: Services) -> None:
    series = f"smoke_{uuid.uuid4().hex[:8]}"
    now_ms = int(time.time() * 1000)
    r = http_client.post(
        f"{services.victoria_metrics_url}/write",
        params={"precision": "ms"},
        content=f"{series},city=jakarta value=42 {now_ms}",
    )
    assert r.status_code == 204
    http_client.get(f"{services.victoria_metrics_url}/internal/force_flush")
    query = {"query": f"{series}_value", "time": now_ms / 1000}
    result = wait_for(
        lambda: http_client.get(f"{services.victoria_metrics_url}/api/v1/query", params=query).json()["data"]["result"],
        30,
        f"{series} to be searchable in VictoriaMetrics",
    )
    assert result[0]["metric"]["city"] == "jakarta" and float(result[0]["value"][1]) == 42


def test_influxdb_v1_write_and_query(services: Services) -> None:
    series = f"smoke_{uuid.uuid4().hex[:8]}"
    r = http_client.post(
        f"{services.influxdb_url}/write", params={"db": "daggers"}, content=f"{series},city=bandung n=7i"
    )
    assert r.status_code == 204
    q = http_client.get(f"{services.influxdb_url}/query", params={"db": "daggers", "q": f'SELECT n FROM "{series}"'})
    assert q.json()["results"][0]["series"][0]["values"][0][1] == 7


def test_postgres_platform_database(services: Services) -> None:
    with psycopg.connect(services.postgres_dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS smoke (id int primary key)")
        conn.execute("INSERT INTO smoke VALUES (1) ON CONFLICT DO NOTHING")
        assert conn.execute("SELECT count(*) FROM smoke").fetchone() == (1,)


def test_spark_master_has_worker_and_rest_endpoint(services: Services) -> None:
    doc = http_client.get(f"{services.spark_ui_url}/json/").json()
    assert doc["status"] == "ALIVE"
    assert [w["state"] for w in doc["workers"]] == ["ALIVE"]
    # The REST submission server runs anything it is sent: only requests signed with the stack's secret get in.
    status = f"{services.spark_rest_url}/v1/submissions/status/driver-none"
    assert http_client.get(status).status_code == 403
    assert services.stack is not None and services.stack.rest_secret_file.stat().st_mode & 0o777 == 0o600
    signed = {"Authorization": f"Bearer {rest_token(services.stack.rest_secret_file, 'test')}"}
    # a status query for an unknown driver is a well-formed reply
    assert http_client.get(status, headers=signed).json()["action"] == "SubmissionStatusResponse"


def test_an_environment_is_read_by_many_while_terraform_plans_it(services: Services) -> None:
    """Every Airflow task, health check and CLI reads the environment's nodes (Terraform's outputs) while others plan
    or apply it: a reader once met a backend file half written by another process's `terraform init`."""
    assert services.stack is not None
    state = str(services.stack.state_dir)
    read = (
        "import sys; from odin.stack import Stack\n"
        f"stack = Stack('local', __import__('pathlib').Path({state!r}))\n"
        "for _ in range(15): assert stack.nodes(), 'no nodes'\n"
    )
    plan = (
        "from pathlib import Path; from odin.stack import Stack\n"
        f"stack = Stack('local', Path({state!r}))\n"
        "for _ in range(5): stack.terraform.plan(stack.resolve(None, None, None).terraform_vars())\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, cwd=REPO)
             for code in (read, read, read, plan)]  # fmt: skip
    failures = [p.communicate(timeout=600)[1] for p in procs if p.wait(timeout=600) != 0]
    assert not failures, failures[0][-2000:]
