"""Alertmanager's configuration, from the registry's teams: one route and receiver per team, so a team's alerts
reach that team's receiver; the rest reach the platform's. Every receiver is the platform's webhook endpoint
(odin/alerting/receiver.py) under the receiver's name, which records the alerts in the registry; a real deployment
adds the team's pager or chat to its receiver here. Checked with `amtool check-config` before Alertmanager loads it.

`python -m odin.alerting.routing --out FILE --receiver-url URL` writes the platform's route alone: the alertmanager
role's first configuration, before the registry has teams; `odin up` and `odin team add` sync the teams' routes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:  # `main`, the alertmanager role's task on a cold `odin up`, needs neither (1.6 s of imports)
    from odin.registry import Registry

PLATFORM = "platform"
# One notification per alert name, team, cluster and dagger; a cluster's trouble inhibits its daggers' warnings.
GROUP_BY = ["alertname", "team", "cluster", "dagger"]


class RoutingError(RuntimeError):
    pass


def team_receiver(team: str) -> str:
    return f"team-{team}"


def config(teams: list[str], receiver_url: str) -> dict[str, Any]:
    def webhook(name: str) -> dict[str, Any]:
        return {"name": name, "webhook_configs": [{"url": f"{receiver_url}/alerts/{name}", "send_resolved": True}]}

    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": PLATFORM,
            "group_by": GROUP_BY,
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "4h",
            "routes": [{"matchers": [f'team="{t}"'], "receiver": team_receiver(t)} for t in sorted(teams)],
        },
        "receivers": [webhook(PLATFORM)] + [webhook(team_receiver(t)) for t in sorted(teams)],
        "inhibit_rules": [
            {
                "source_matchers": ['alertname="ClusterDegraded"'],
                "target_matchers": ['severity="warning"'],
                "equal": ["team", "cluster"],
            }
        ],
    }


def render(teams: list[str], receiver_url: str) -> str:
    return yaml.safe_dump(config(teams, receiver_url), sort_keys=False)


def check(path: Path) -> None:
    """`amtool check-config`: raises RoutingError with amtool's words when Alertmanager would refuse the file."""
    amtool = shutil.which("amtool")
    if amtool is None:
        raise RoutingError("amtool is not installed: `apt-get install prometheus-alertmanager` (make setup does)")
    done = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RoutingError(f"{path}: {(done.stdout + done.stderr).strip()}")


def write(path: Path, teams: list[str], receiver_url: str) -> bool:
    """Write the configuration if it changed, checked first; True when it changed."""
    text = render(teams, receiver_url)
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".yml", delete=False) as f:
        f.write(text)
    staged = Path(f.name)
    try:
        check(staged)
        staged.replace(path)
    finally:
        staged.unlink(missing_ok=True)
    return True


def sync(registry: Registry, path: Path, receiver_url: str, alertmanager_url: str) -> bool:
    """Routes for the registry's teams now; Alertmanager reloads a changed file. True when it changed. Nothing to do
    where the alertmanager role never ran (no file yet): its first `odin up` syncs."""
    import httpx

    from odin.apis import http_client

    if not path.exists():
        return False
    changed = write(path, registry.teams(), receiver_url)
    if changed:
        try:
            http_client.post(f"{alertmanager_url}/-/reload", timeout=10).raise_for_status()
        except httpx.ConnectError:
            pass  # not running: it reads the file when it starts
        except httpx.HTTPError as e:
            raise RoutingError(f"Alertmanager at {alertmanager_url} did not reload {path}: {e}") from e
    return changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--receiver-url", required=True)
    args = parser.parse_args(argv)
    if not args.out.exists():  # never undo a sync of the teams' routes
        write(args.out, [], args.receiver_url)


if __name__ == "__main__":
    main()
