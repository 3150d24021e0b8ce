"""What the service fixtures of tests/conftest.py yield."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from odin.endpoints import Endpoints
from odin.registry import Registry
from odin.stack import Stack, UpReport


@dataclass(frozen=True)
class Services(Endpoints):
    """A running test stack: where each service is (Endpoints), and the stack itself."""

    stack: Stack | None = None
    report: UpReport | None = None


@dataclass(frozen=True)
class TeamDb:
    """A team's database on the stack's PostgreSQL, as a deployed dagger of the team gets it: a DSN without a
    password, and the password in the environment variable `password_env` (set for the test)."""

    team: str
    dsn: str
    password_env: str
    password: str

    def sink(self, table: str) -> dict[str, Any]:
        return {"type": "postgres", "dsn": self.dsn, "password_env": self.password_env, "table": table}

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, password=self.password)


@dataclass(frozen=True)
class TeamCluster:
    registry: Registry
    state_dir: Path
    team: str
    cluster: str  # ready, 1 master and 1 worker with room for two daggers (driver + one executor each)
    member: str
