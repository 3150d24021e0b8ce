"""The deploy form's params become one Request: the flat fields people fill, or a whole `spec` from an API user."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.lifecycle.request import request_from_params
from jobs.spec import SpecError

EXAMPLE = Path(__file__).parents[1] / "docs" / "examples" / "surge-demand.yaml"


def test_a_whole_spec_and_a_cluster_make_the_request() -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())
    request = request_from_params({"spec": spec, "cluster": "main", "team": None, "name": None})
    assert (request.spec.team, request.spec.name, request.cluster) == ("pricing", "surge-demand", "main")
    assert request.spec.sql.strip() == spec["sql"].strip()


def test_a_spec_that_contradicts_the_form_fields_is_refused_naming_the_field() -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())
    with pytest.raises(SpecError, match=r"spec\.team: 'pricing' differs from the team field 'supply'"):
        request_from_params({"spec": spec, "cluster": "main", "team": "supply"})


def test_every_bad_field_is_named_at_once_by_its_form_name() -> None:
    params = {"team": "pricing", "name": "Surge Form", "stream": "booking-log", "sql": "SELECT 1", "parallelism": 0}
    with pytest.raises(SpecError) as refused:
        request_from_params(params)
    fields = {line.partition(":")[0] for line in str(refused.value).splitlines()}
    assert {"cluster", "name", "parallelism"} <= fields, str(refused.value)
