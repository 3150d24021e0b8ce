"""The platform's Alertmanager webhook receiver: records every notification's alerts in the registry (`alerts`),
where the health DAG, `dagger status` and reports read them. Alertmanager posts a team's alerts to
/alerts/team-<team> and the rest to /alerts/platform (odin/alerting/routing.py).

A notification that does not validate is refused (422, naming the field) and counted; when the registry cannot be
written the answer is 503, which Alertmanager retries: nothing it delivered is dropped silently.

`python -m odin.alerting.receiver --port N --registry-url URL` serves it (uvicorn), as the alertmanager role does.
"""

from __future__ import annotations

import argparse
import logging
from datetime import datetime
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError

from odin.registry import Registry
from odin.registry.records import AlertRecord, AlertStatus

log = logging.getLogger("odin.alerting.receiver")


class WebhookAlert(BaseModel):
    """One alert of Alertmanager's webhook payload (version 4)."""

    model_config = ConfigDict(extra="ignore")
    status: AlertStatus
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime | None = None
    endsAt: datetime | None = None
    fingerprint: str = Field(min_length=1, max_length=64)


class Notification(BaseModel):
    model_config = ConfigDict(extra="ignore")
    version: str
    receiver: str
    status: AlertStatus
    alerts: list[WebhookAlert]


def subject(labels: dict[str, str]) -> str:
    """What the alert is about, as the registry's history names it."""
    team = labels.get("team", "")
    if "dagger" in labels:  # telemetry tags `team.name`, the health check `name`
        return f"dagger:{team}/{labels['dagger'].removeprefix(f'{team}.')}"
    if "cluster" in labels:
        return f"cluster:{team}/{labels['cluster']}"
    return ""


def _when(at: datetime | None) -> datetime | None:
    return None if at is None or at.year < 2 else at  # Alertmanager's "not yet" is 0001-01-01


def records(receiver: str, notification: Notification) -> list[AlertRecord]:
    return [
        AlertRecord(
            fingerprint=a.fingerprint,
            status=a.status,
            alertname=a.labels.get("alertname", ""),
            team=a.labels.get("team"),
            subject=subject(a.labels),
            receiver=receiver,
            labels=a.labels,
            annotations=a.annotations,
            starts_at=_when(a.startsAt),
            ends_at=_when(a.endsAt),
        )
        for a in notification.alerts
    ]


def app(registry: Registry) -> FastAPI:
    api = FastAPI(title="Daggers platform alert receiver")
    counts = {"notifications": 0, "alerts": 0, "rejected": 0, "unrecorded": 0}

    @api.exception_handler(RequestValidationError)
    async def rejected(_request: Request, e: RequestValidationError) -> JSONResponse:
        counts["rejected"] += 1
        errors = [{"field": ".".join(str(p) for p in err["loc"]), "error": err["msg"]} for err in e.errors()]
        log.warning("notification refused: %s", errors)
        return JSONResponse({"refused": errors}, status_code=422)

    @api.post("/alerts/{receiver}")
    def receive(receiver: str, notification: Notification) -> JSONResponse:
        try:
            recorded = registry.record_alerts(records(receiver, notification))
        except SQLAlchemyError as e:  # Alertmanager retries a 5xx
            counts["unrecorded"] += 1
            log.error("registry: %s", e)
            return JSONResponse({"error": f"the registry cannot be written: {type(e).__name__}"}, status_code=503)
        counts["notifications"] += 1
        counts["alerts"] += recorded
        return JSONResponse({"recorded": recorded})

    @api.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", **counts}

    return api


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The platform's Alertmanager webhook receiver.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--registry-url", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    registry = Registry.connect(args.registry_url, check=False)
    try:
        uvicorn.run(app(registry), host=args.host, port=args.port, log_level="warning")
    finally:
        registry.close()


if __name__ == "__main__":
    main()
