"""docs/reference/ is generated from the models and CLIs (docs/reference/generate.py): the committed pages must be
what the generator writes now, so a field or option added without `make reference` fails here. No services."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"


@pytest.fixture(scope="module")
def generator() -> dict[str, Any]:
    return runpy.run_path(str(REFERENCE / "generate.py"), run_name="reference_docs")


def test_reference_pages_are_current(generator: dict[str, Any]) -> None:
    stale = generator["stale"](REFERENCE)
    assert stale == [], f"docs/reference is stale ({', '.join(stale)}): run `make reference` and commit the pages"


def test_check_names_a_stale_page(generator: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for page in REFERENCE.glob("*.md"):
        (tmp_path / page.name).write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    assert generator["main"](["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "dagger-spec.md").write_text("# hand-edited\n", encoding="utf-8")
    (tmp_path / "cli-odin.md").unlink()
    assert generator["main"](["--check", "--out", str(tmp_path)]) == 1
    assert "cli-odin.md, dagger-spec.md" in capsys.readouterr().err
