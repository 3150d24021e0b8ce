"""Airflow trigger-form params from the platform's pydantic models: the form, the REST API and the CLIs take the
same fields with the same limits. Airflow checks a run's params against these JSON schemas when it is triggered
(a 400 naming the field); the first task validates them again through the model, which also knows what a schema
cannot (teams, clusters, streams, the SQL)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# JSON-schema keys a Param carries to the form and the server's check; pydantic's others (title, anyOf...) stay out.
_SCHEMA_KEYS = ("type", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "examples")


def param_schemas(model: type[BaseModel], fields: list[str]) -> dict[str, dict[str, Any]]:
    """Each field's Param arguments: default, description, and its JSON schema rules."""
    properties = model.model_json_schema()["properties"]
    out = {}
    for field in fields:
        schema = properties[field]
        kwargs: dict[str, Any] = {k: schema[k] for k in _SCHEMA_KEYS if k in schema}
        if "default" in schema:
            kwargs["default"] = schema["default"]
        kwargs["description"] = schema.get("description", "")
        out[field] = kwargs
    return out
