"""The loki_chaos form's fields: a standard playbook (or a whole one inline), aimed at a target, with the run's settle
time and scale. The target's and settle's defaults, descriptions and limits are loki/playbook.py's models'; left
empty, the playbook's own apply (loki.runner.playbook_from_params)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dags.provider.params import param_schemas
from loki.playbook import SteadyState, Target, standard_names

PLAYBOOK = "broker-pause"  # the form's default


def _or_the_playbooks(model: type[BaseModel], field: str, example: str = "") -> dict[str, Any]:
    """A field the form may leave empty (the playbook's own then): empty, or what the model takes."""
    schema = model.model_json_schema()["properties"][field]
    [text] = [s for s in schema.get("anyOf", [schema]) if s.get("type") == "string"]  # `str | None`: its string
    description = schema["description"] + (f" E.g. {example}." if example else "") + " Empty: the playbook's."
    return {"type": "string", "default": "", "pattern": f"^$|{text['pattern']}", "description": description}


def form_fields() -> dict[str, dict[str, Any]]:
    """Each field's Param arguments. The playbooks' dropdown lists loki/playbooks (files: nothing else is read when
    Airflow parses the DAG file)."""
    return {
        "playbook": {
            "type": "string",
            "enum": standard_names(),
            "default": PLAYBOOK,
            "description": "A standard playbook (loki list).",
        },
        "playbook_spec": {
            "type": "object",
            "default": {},
            "description": "A whole playbook instead (`loki schema`); empty: the standard one.",
        },
        "environment": param_schemas(Target, ["environment"])["environment"],
        "team": _or_the_playbooks(Target, "team"),
        "cluster": _or_the_playbooks(Target, "cluster"),
        # as `loki simulate --rate-scale/--time-scale` (Playbook.scaled), with an upper bound for a shared machine
        "rate_scale": {
            "type": "number",
            "default": 1.0,
            "minimum": 0.001,
            "maximum": 10,
            "description": "Multiply every feeder rate.",
        },
        "time_scale": {
            "type": "number",
            "default": 1.0,
            "minimum": 0.01,
            "maximum": 10,
            "description": "Multiply every duration and start.",
        },
        "settle": _or_the_playbooks(SteadyState, "settle", example="300s"),
    }
