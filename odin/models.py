"""The model kit every spec of the platform is built from (dagger, stream catalog, cluster, stack, playbook):
slugs and names, durations as people write them ('60s', '5m'), a strict frozen pydantic base, validation errors
as one line per field, and reading a YAML or JSON file of fields with a size bound. The lowest layer: it imports
nothing of the platform's.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, TypeAdapter, ValidationError

from odin.names import ENV_VAR as ENV_VAR
from odin.names import IDENTIFIER as IDENTIFIER
from odin.names import SLUG as SLUG

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(value: Any) -> Any:
    """'60s', '500ms', '5m', '1h' or a number of seconds."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h)\s*", value)
        if not m:
            raise ValueError(f"{value!r} is not a duration; write e.g. '60s', '500ms', '5m' or '1h'")
        return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    return value


DURATION_PATTERN = r"^\s*\d+(\.\d+)?\s*(ms|s|min|m|h)\s*$"


def _duration_schema(schema: dict[str, Any]) -> None:
    """What parse_duration takes, not pydantic's ISO 8601 `format: duration` (forms and API clients check it)."""
    schema.pop("format", None)
    if isinstance(schema.get("default"), str):  # pydantic writes a timedelta default in ISO 8601 (PT1M)
        schema["default"] = _format_duration(TypeAdapter(timedelta).validate_python(schema["default"]))
    schema.update(type="string", pattern=DURATION_PATTERN, examples=["60s", "500ms", "5m"])


def _format_duration(value: timedelta) -> str:
    ms = round(value.total_seconds() * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(_format_duration, return_type=str),
    Field(json_schema_extra=_duration_schema),
]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def format_errors(e: ValidationError) -> str:
    lines = []
    for err in e.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(spec)"
        lines.append(f"{where}: {err['msg']}")
    return "\n".join(lines)


MAX_SPEC_BYTES = 256 * 1024  # a spec is a page of YAML and a query; far past that is a mistake or an attack


def read_mapping(path: Path, error: type[ValueError], what: str = "spec") -> dict[str, Any]:
    """A YAML or JSON file holding a mapping; `error` says what is wrong with it (missing, too big, not YAML, no
    mapping)."""
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise error(f"{path}: {path.stat().st_size:,} bytes; a {what} may have at most {MAX_SPEC_BYTES:,}")
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML/JSON: {e}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping of {what} fields, got {type(data).__name__}")
    return data
