"""A dagger request as the trigger form (the seeds' Datlantis) and the REST API send it: the spec it makes.

Fields are flat for people (select a stream, write the SQL, select a sink); API users may send a whole `spec`
instead. Both go through DaggerSpec, and its errors are given back in the form's own field names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from jobs.spec import DaggerSpec, Sink, SpecError, check_size, parse_spec

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
