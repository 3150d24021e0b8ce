"""Where a provisioned stack's services listen, from Terraform's `nodes` output: what clients connect to."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Node = dict[str, Any]
DATA_BROKER, PERF_BROKER = "kafka-broker", "kafka-perf"  # the local environment's two Kafka clusters (one node each)
# PostgreSQL's roles (ansible/roles/postgres): the bootstrap superuser, reachable on the unix socket only, and one
# role per platform service, none of which a team holds (a team's own role: odin/teams/databases.py).
PG_SUPERUSER = "postgres"
REGISTRY_ROLE, AIRFLOW_ROLE, SANDBOX_ROLE = "odin_registry", "odin_airflow", "odin_daggers"


@dataclass(frozen=True)
class Endpoints:
    nodes: dict[str, Node]

    def _node(self, role: str, name: str | None = None) -> Node:
        for node in self.nodes.values():
            if node["role"] == role and name in (None, node["name"]):
                return node
        raise LookupError(f"no {name or role} node in this environment; run `odin up` first")

    def _addr(self, role: str, port: str, name: str | None = None) -> str:
        n = self._node(role, name)
        return f"{n['host']}:{n['ports'][port]}"

    @property
    def kafka_bootstrap(self) -> str:
        """The environment's data streams' broker."""
        return self._addr("kafka_broker", "kafka", DATA_BROKER)

    @property
    def perf_kafka_bootstrap(self) -> str:
        """The perf cluster's broker: perf streams only, so Loki's broker faults harm no data stream."""
        return self._addr("kafka_broker", "kafka", PERF_BROKER)

    @property
    def victoria_metrics_url(self) -> str:
        return f"http://{self._addr('victoria_metrics', 'http')}"

    @property
    def influxdb_url(self) -> str:
        return f"http://{self._addr('influxdb', 'http')}"

    @property
    def postgres_address(self) -> str:
        """host:port of the platform's PostgreSQL (password authentication, scram-sha-256)."""
        return self._addr("postgres", "postgres")

    @property
    def postgres_admin(self) -> str:
        """libpq conninfo of the superuser on the server's unix socket (peer authentication: Odin's OS user only)."""
        node = self._node("postgres")
        socket_dir = Path(node["dirs"]["data"]) / "socket"
        return f"host={socket_dir} port={node['ports']['postgres']} user={PG_SUPERUSER} dbname=postgres"

    def postgres_passfile(self, role: str) -> Path:
        """A platform role's libpq password file (mode 0600), written by the postgres role."""
        return Path(self._node("postgres")["dirs"]["data"]) / "secrets" / f"{role}.pgpass"

    @property
    def postgres_dsn(self) -> str:
        """Database `daggers`, the platform's own scratch database for daggers it runs itself outside any team
        cluster (Loki's local consumers, `make demo`). No team holds its role; a team's daggers write to the
        team's database (odin/teams/databases.py)."""
        passfile = self.postgres_passfile(SANDBOX_ROLE)
        return f"postgresql://{SANDBOX_ROLE}@{self.postgres_address}/daggers?passfile={passfile}"

    @property
    def registry_url(self) -> str:
        """The platform registry (odin/registry): its own database and role on the platform's PostgreSQL."""
        passfile = self.postgres_passfile(REGISTRY_ROLE)
        return f"postgresql+psycopg://{REGISTRY_ROLE}@{self.postgres_address}/registry?passfile={passfile}"

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self._addr('spark_master', 'master')}"

    @property
    def spark_rest_url(self) -> str:
        return f"http://{self._addr('spark_master', 'rest')}"

    @property
    def spark_ui_url(self) -> str:
        return f"http://{self._addr('spark_master', 'ui')}"

    @property
    def alertmanager_url(self) -> str:
        return f"http://{self._addr('alertmanager', 'http')}"

    @property
    def alert_receiver_url(self) -> str:
        """The platform's webhook receiver (odin/alerting/receiver.py), beside Alertmanager."""
        return f"http://{self._addr('alertmanager', 'receiver')}"

    @property
    def vmalert_url(self) -> str:
        return f"http://{self._addr('vmalert', 'http')}"

    @property
    def traffic_url(self) -> str:
        return f"http://{self._addr('traffic', 'http')}"

    @property
    def alertmanager_config(self) -> Path:
        return Path(self._node("alertmanager")["dirs"]["data"]) / "alertmanager.yml"

    @property
    def airflow_url(self) -> str:
        return f"http://{self._addr('airflow', 'http')}"

    @property
    def airflow_passwords(self) -> Path:
        """Airflow's users and their passwords (JSON, mode 0600), written by the airflow role."""
        return Path(self._node("airflow")["dirs"]["data"]) / "secrets" / "passwords.json"

    def airflow_password(self, user: str) -> str:
        passwords: dict[str, str] = json.loads(self.airflow_passwords.read_text())
        if user not in passwords:
            raise LookupError(f"{user} is not an Airflow user here: add it with `odin up --airflow-user {user}=user`")
        return passwords[user]
