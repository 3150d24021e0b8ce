"""What a dashboard is, small enough to read in one page: dashboards -> panels -> queries, and the selectors those
queries read. Each query keeps the metric names it reads, so a test can prove they exist once a dagger ran.

VictoriaMetrics stores an InfluxDB line-protocol point's fields as metrics named `<measurement>_<field>`, its tags as
labels: `dagger_metrics,team=a,dagger=a.x lag=3i` is the series `dagger_metrics_lag{team="a",dagger="a.x"}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

PanelKind = Literal["timeseries", "state-timeline"]
# Grafana's own variables: what the test puts in their place when it sends a query to VictoriaMetrics itself.
BUILTINS = {"__interval": "1m", "__rate_interval": "1m", "__range": "1h"}
_REFERENCE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def references(text: str) -> set[str]:
    """The Grafana variables `text` names, as `$name` or `${name}`."""
    return {m.group(1) or m.group(2) for m in _REFERENCE.finditer(text)}


def interpolate(text: str, values: Mapping[str, str]) -> str:
    """`text` with each `$name` / `${name}` replaced as Grafana does before it sends a query (KeyError: unknown)."""
    merged = {**BUILTINS, **values}
    return _REFERENCE.sub(lambda m: merged[m.group(1) or m.group(2)], text)


@dataclass(frozen=True)
class Series:
    """One field of a measurement, as VictoriaMetrics names it. `measurement` may be a Grafana variable
    (`${measurement}`): a team's output measurement is chosen on the dashboard."""

    measurement: str
    field: str

    @property
    def name(self) -> str:
        return f"{self.measurement}_{self.field}"

    def where(self, **regexes: str) -> Selector:
        """The series whose labels match these regexes (`=~`: a multi-value variable is sent as `a|b`)."""
        return Selector(self.name, tuple(sorted(regexes.items())))


@dataclass(frozen=True)
class Selector:
    """A metric selector; `name` None selects by `__name__` among the matchers."""

    name: str | None
    matchers: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        inner = ", ".join(f'{label}=~"{regex}"' for label, regex in self.matchers)
        return f"{self.name or ''}{{{inner}}}" if inner or not self.name else self.name


@dataclass(frozen=True)
class Target:
    """One query of a panel, and the selectors it reads (may hold variables), for the test that they select data."""

    expr: str
    legend: str
    selectors: tuple[Selector, ...]

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(sorted({s.name for s in self.selectors if s.name}))


def query(template: str, legend: str, **selectors: Selector) -> Target:
    """A target from a template whose `{placeholders}` are selectors: the data it reads comes from them, so the
    expression and the list of what it reads cannot drift apart."""
    expr = template.format(**{k: str(s) for k, s in selectors.items()})
    return Target(expr, legend, tuple(selectors.values()))


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    targets: tuple[Target, ...]
    unit: str = "short"
    kind: PanelKind = "timeseries"
    width: int = 12  # of Grafana's 24 columns
    mappings: tuple[tuple[int, str, str], ...] = ()  # value, text, colour: state timelines
    min_interval: str | None = None  # no finer step than the data has (a sink's one-minute windows)


@dataclass(frozen=True)
class Variable:
    """A dashboard variable filled from label values: Grafana asks `/api/v1/label/<label>/values?match[]=<source>`.
    `extract`: a regex whose first group is the value (for `__name__`, to keep a measurement out of its metric)."""

    name: str
    label_text: str
    label: str
    source: Selector
    multi: bool = True
    extract: str | None = None

    @property
    def definition(self) -> str:
        return f"label_values({self.source}, {self.label})"


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    panels: tuple[Panel, ...]
    tags: tuple[str, ...] = field(default=("daggers",))

    @property
    def filename(self) -> str:
        return f"{self.uid}.json"
