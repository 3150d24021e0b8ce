"""Alerts the platform raises itself (not from a vmalert rule), posted to Alertmanager's API v2 so they are routed,
grouped, silenced and recorded like every other alert: e.g. the page for a crashlooping dagger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from odin.apis import http_client


def post_alert(
    alertmanager_url: str, labels: dict[str, str], annotations: dict[str, str], lasts: timedelta = timedelta(hours=1)
) -> None:
    """Fire one alert; it resolves after `lasts` unless posted again. Raises httpx.HTTPError."""
    now = datetime.now(UTC)
    alert = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": now.isoformat(),
        "endsAt": (now + lasts).isoformat(),
    }
    http_client.post(f"{alertmanager_url}/api/v2/alerts", json=[alert], timeout=10).raise_for_status()
