"""The dagger forms' fields (the seeds' Datlantis): deploy and update take them; API users may send a whole `spec`."""

from __future__ import annotations

from typing import Any

from dags.provider.params import param_schemas
from jobs.lifecycle.request import SINK_TYPES
from jobs.spec import DaggerSpec, KafkaSettings, StreamSpec
from odin.catalog import load as load_catalog
from odin.form_choices import Choices


def _choices(values: list[str], description: str) -> dict[str, Any]:
    return {"type": "string", "description": description, **({"enum": values} if values else {})}


def form_fields(choices: Choices) -> dict[str, dict[str, Any]]:
    """Each field's Param arguments (default, JSON schema, section, help). `streams`, `teams` and `clusters` become
    dropdowns (fixed when Airflow parses the DAG file); empty: free text, checked by the first task."""
    streams, teams, clusters = choices.streams or catalog_streams(), choices.teams, choices.clusters
    spec = param_schemas(DaggerSpec, ["name", "sql", "watermark_delay", "trigger_interval", "parallelism"])
    stream = param_schemas(StreamSpec, ["table"])
    kafka = param_schemas(KafkaSettings, ["start", "max_events_per_trigger"])
    nullable = {"type": ["null", "string"], "default": None}
    fields: dict[str, dict[str, Any]] = {
        "team": {"section": "Dagger", **_choices(teams, "Your team: it owns the dagger and its cluster.")},
        "name": {"section": "Dagger", **spec["name"], **nullable, "description": "Slug, unique in the team."},
        "cluster": {"section": "Dagger", **_choices(clusters, "One of your team's clusters.")},
        "stream": {
            "section": "Source",
            **_choices(streams, "The catalog stream to read (odin catalog list)."),
            **({"default": streams[0]} if streams else {}),
        },
        "table": {"section": "Source", **stream["table"], "default": "data_stream"},
        "start": {"section": "Source", **kafka["start"]},
        "sql": {
            "section": "Query",
            **nullable,
            "format": "multiline",
            "description": "Dagger SQL over the table, e.g. a TUMBLE window GROUP BY.",
        },
        "sink_type": {"section": "Sink", "type": "string", "enum": SINK_TYPES, "default": "log"},
        "sink": {
            "section": "Sink",
            "type": ["null", "object"],
            "default": None,
            "description": 'The sink\'s settings, e.g. influx: {"measurement": "<team>_surge"} (default '
            '<team>_<name>); kafka: {"topic": "<team>.surge"}; postgres: {"table": "surge"} (in your team\'s '
            "database). The platform sets every address and credential.",
        },
        "watermark_delay": {"section": "Advanced", **spec["watermark_delay"]},
        "trigger_interval": {"section": "Advanced", **spec["trigger_interval"]},
        "parallelism": {"section": "Advanced", **spec["parallelism"]},
        "max_events_per_trigger": {
            "section": "Advanced",
            **kafka["max_events_per_trigger"],
            "type": ["null", "integer"],
        },
        "spec": {
            "section": "API",
            "type": ["null", "object"],
            "default": None,
            "description": "A whole dagger spec (`dagger schema`) instead of the fields above (team, name must match).",
        },
    }
    return fields


def catalog_streams() -> list[str]:
    """The catalog file's streams (the repo's, no registry): the stream dropdown before any registry wrote one."""
    return [s.name for s in load_catalog().all_streams()]
