"""A benchmark's figures: printed as one `name=value ...` line (what RESULTS.md records) and kept as
`<state>/bench/<bench>.json`, which the platform's reports index shows (loki/reports_index.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from odin.paths import default_state_dir


def _value(raw: str) -> float | str:
    try:
        return float(raw)
    except ValueError:
        return raw  # a verdict, or "nan"


def record(bench: str, line: str) -> None:
    """Print `line` (figures as `name=value`, space separated; a leading word without `=` labels them) and keep them."""
    print(line)
    words = line.split()
    label = "" if "=" in words[0] else words.pop(0)
    figures = {k: _value(v) for k, _, v in (w.partition("=") for w in words)}
    out = default_state_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    name = f"{bench}.{label}" if label else bench
    body = {"measured_at": datetime.now(UTC).isoformat(), "figures": figures}
    (out / f"{name}.json").write_text(json.dumps(body, indent=2) + "\n")
