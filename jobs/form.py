"""The dagger trigger form (the seeds' Datlantis): its fields, their choices, and the spec they make.

Fields are flat for people (select a stream, write the SQL, select a sink); API users may send a whole `spec`
instead. Both go through DaggerSpec, and its errors are given back in the form's own field names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from jobs.spec import DaggerSpec, KafkaSettings, Sink, SpecError, StreamSpec, check_size, parse_spec
from odin.params import param_schemas

log = logging.getLogger(__name__)
SECTIONS = ("Dagger", "Source", "Query", "Sink", "Advanced", "API")
SINK_TYPES = [m.model_fields["type"].default for m in get_args(get_args(Sink)[0])]
# A form field for each spec path it sets: a spec error at that path names the field instead.
FORM_PATHS = {
    "streams.0.stream": "stream",
    "streams.0.table": "table",
    "streams.0.kafka.start": "start",
    "streams.0.kafka.max_events_per_trigger": "max_events_per_trigger",
    "sink.type": "sink_type",
}


@dataclass(frozen=True)
class Request:
    """What a run asks for: the spec, the cluster to run it on, and whether an update may start over."""

    spec: DaggerSpec
    cluster: str
    reset_state: bool = False


def _field_name(path: str) -> str:
    for spec_path, field in FORM_PATHS.items():
        if path == spec_path or path.startswith(spec_path + "."):
            return field
    return path


def _spec_data(params: Mapping[str, Any]) -> dict[str, Any]:
    if params.get("spec"):
        data = dict(params["spec"])
        for key in ("team", "name"):
            if params.get(key) and data.get(key) not in (None, params[key]):
                raise SpecError(f"spec.{key}: {data[key]!r} differs from the {key} field {params[key]!r}")
            data.setdefault(key, params.get(key))
        return data
    kafka = {k: params[k] for k in ("start", "max_events_per_trigger") if params.get(k) is not None}
    return {
        "team": params.get("team"),
        "name": params.get("name"),
        "streams": [{"table": params.get("table") or "data_stream", "stream": params.get("stream"), "kafka": kafka}],
        "sql": params.get("sql"),
        "sink": {"type": params.get("sink_type") or "log", **(params.get("sink") or {})},
        **{k: params[k] for k in ("watermark_delay", "trigger_interval", "parallelism") if params.get(k) is not None},
    }


def request_from_params(params: Mapping[str, Any]) -> Request:
    """The run's params as a Request; SpecError names every bad field, as the form calls it."""
    check_size(len(json.dumps(dict(params), default=str)), "params")  # before anything reads them
    errors = []
    if not params.get("cluster"):
        errors.append("cluster: required (one of the team's clusters)")
    try:
        spec = parse_spec(_spec_data(params))
    except SpecError as e:
        lines = str(e).splitlines()
        errors += [f"{_field_name(w)}:{rest}" for w, _, rest in (line.partition(":") for line in lines)]
        raise SpecError("\n".join(errors)) from None
    if errors:
        raise SpecError("\n".join(errors))
    return Request(spec, str(params["cluster"]), bool(params.get("reset_state")))


# -- the form's fields (Airflow Params' arguments) -------------------------------------------------------------------


def _choices(values: list[str], description: str) -> dict[str, Any]:
    return {"type": "string", "description": description, **({"enum": values} if values else {})}


def form_fields(streams: list[str], teams: list[str], clusters: list[str]) -> dict[str, dict[str, Any]]:
    """Each field's Param arguments (default, JSON schema, section, help). `streams`, `teams` and `clusters` become
    dropdowns (fixed when Airflow parses the DAG file); empty: free text, checked by the first task."""
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
            "description": 'The sink\'s settings, e.g. influx: {"url": ..., "measurement": ...}; kafka: '
            '{"bootstrap_servers": ..., "topic": ...}; postgres: {"dsn": ..., "table": ...}.',
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


def choices(environment: str = "local", state_dir: Path | None = None) -> tuple[list[str], list[str], list[str]]:
    """(streams, teams, clusters) for the form's dropdowns: the catalog file's streams, and the registry's teams
    and ready clusters when it answers (free text otherwise; the first task checks them either way)."""
    from odin.catalog import load

    streams = [s.name for s in load().all_streams()]
    try:
        from odin.endpoints import Endpoints
        from odin.registry import Registry
        from odin.stack import Stack

        registry = Registry.connect(Endpoints(Stack(environment, state_dir).nodes()).registry_url)
        try:
            teams = registry.teams()
            clusters = sorted({c.name for c in registry.clusters(states=("ready",))})
        finally:
            registry.close()
    except Exception as e:  # the form must load even when the registry is down
        log.warning("team and cluster choices unavailable (%s): free text", e)
        teams, clusters = [], []
    return streams, teams, clusters
