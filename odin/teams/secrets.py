"""Each team's secrets: what its daggers name in a spec (the sink's `password_env`, `token_env`, `username_env`;
a stream's `kafka.password_env`).

A spec names an environment variable, never a value. A deployed driver runs on a worker the platform does not
choose, from an environment nobody types into, so the platform keeps each team's values in one file Odin's user
alone reads (0600, in a 0700 directory of Odin's state: shared storage on a real deployment, as the checkpoints),
and the driver puts them into its environment before it opens a sink (jobs/engine/driver.py), as the source's read tasks
do on executors (jobs/engine/kafka_source.py). Spark's own ways to pass
environment variables (the REST submission's `environmentVariables`, `spark.driverEnv.*`) would show the values in
the master's UI and JSON API. Who set which name, and when, is in the registry's history; values are never logged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from odin.names import ENV_VAR
from odin.paths import write_atomic

ENV_NAME = re.compile(ENV_VAR)


class TeamSecrets:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def path(self, team: str) -> Path:
        return self.state_dir / "teams" / team / "secrets.json"

    def load(self, team: str) -> dict[str, str]:
        return load(self.path(team))

    def names(self, team: str) -> list[str]:
        return sorted(self.load(team))

    def set(self, team: str, name: str, value: str) -> None:
        check(name, value)
        self._write(team, self.load(team) | {name: value})

    def unset(self, team: str, name: str) -> bool:
        values = self.load(team)
        if values.pop(name, None) is None:
            return False
        self._write(team, values)
        return True

    def _write(self, team: str, values: dict[str, str]) -> None:
        path = self.path(team)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, json.dumps(values), mode=0o600)  # a driver starting meanwhile reads a whole file


def load(path: Path) -> dict[str, str]:
    """The secrets kept in `path`; none if there is no such file."""
    try:
        values: dict[str, str] = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return values


def check(name: str, value: str) -> None:
    """ValueError unless `name` is an environment variable's name and `value` is not empty."""
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"secret name {name!r}: an environment variable name (A-Z, 0-9, _; no leading digit)")
    if not value:
        raise ValueError(f"secret {name}: the value is empty")
