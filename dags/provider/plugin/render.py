"""The Daggers page as HTML: self-contained (inline CSS, inline SVG charts, no fetches of its own), every value escaped
(Jinja2's autoescape; SVG coordinates are numbers the page computes). Airflow's UI shows it in an iframe."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from jinja2 import DictLoader, Environment, select_autoescape
from markupsafe import Markup

from dags.provider.plugin.data import RATE_WINDOW_S, Detail, Overview, Series

COLOURS = ("#017cee", "#e4572e", "#29a745", "#9b59b6", "#f39c12", "#17a2b8", "#6c757d", "#c0392b")
STATE_COLOURS = {
    "running": "#29a745",
    "healthy": "#29a745",
    "deploying": "#17a2b8",
    "stopping": "#f39c12",
    "degraded": "#f39c12",
    "stopped": "#6c757d",
    "failed": "#c0392b",
    "crashlooping": "#9b59b6",
}


def _num(v: float) -> str:
    return f"{v:.1f}"


def sparkline(series: Series, width: int = 140, height: int = 28, label: str = "input rate") -> Markup:
    """A small line of the series (its y from 0 to its max), or a flat dashed line when it has no points."""
    if not series:
        return Markup(
            f'<svg class="sparkline empty" width="{width}" height="{height}" role="img" aria-label="no {label} data">'
            f'<line x1="0" y1="{height - 2}" x2="{width}" y2="{height - 2}" stroke="#bbb" stroke-dasharray="3 3"/>'
            "</svg>"
        )
    end = max(t for t, _ in series)
    start = min(min(t for t, _ in series), end - RATE_WINDOW_S)
    top = max(v for _, v in series) or 1.0
    span = max(end - start, 1.0)
    xy = [(_num((t - start) / span * (width - 3) + 1), _num(height - 2 - v / top * (height - 4))) for t, v in series]
    points = " ".join(f"{x},{y}" for x, y in xy)
    last_x, last_y = xy[-1]
    return Markup(
        f'<svg class="sparkline" width="{width}" height="{height}" role="img" '
        f'aria-label="{label}, last {RATE_WINDOW_S // 60} min, up to {top:,.1f}/s">'
        f'<polyline fill="none" stroke="#017cee" stroke-width="1.5" points="{points}"/>'
        f'<circle cx="{last_x}" cy="{last_y}" r="2" fill="#017cee"/></svg>'
    )


def chart(lines: dict[str, Series], width: int = 760, height: int = 240, label: str = "output") -> Markup:
    """A line per field over time, with its value range, time range and a legend."""
    pad_l, pad_r, pad_t, pad_b = 56, 12, 10, 38
    every = [p for s in lines.values() for p in s]
    if not every:
        return Markup("")
    t0, t1 = min(t for t, _ in every), max(t for t, _ in every)
    lo, hi = min(0.0, min(v for _, v in every)), max(v for _, v in every)
    hi = hi if hi > lo else lo + 1.0
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    tspan = max(t1 - t0, 1.0)

    def x(t: float) -> str:
        return _num(pad_l + (t - t0) / tspan * w)

    def y(v: float) -> str:
        return _num(pad_t + h - (v - lo) / (hi - lo) * h)

    parts = [
        f'<svg class="chart" width="{width}" height="{height}" role="img" aria-label="{label}">',
        f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#fafbfc" stroke="#ddd"/>',
        f'<text x="{pad_l - 4}" y="{pad_t + 10}" text-anchor="end">{hi:,.4g}</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + h}" text-anchor="end">{lo:,.4g}</text>',
        f'<text x="{pad_l}" y="{pad_t + h + 14}">{_time(t0)}</text>',
        f'<text x="{pad_l + w}" y="{pad_t + h + 14}" text-anchor="end">{_time(t1)} UTC</text>',
    ]
    legend_x = pad_l
    for i, (name, series) in enumerate(lines.items()):
        colour = COLOURS[i % len(COLOURS)]
        if len(series) == 1:
            (t, v) = series[0]
            parts.append(f'<circle cx="{x(t)}" cy="{y(v)}" r="3" fill="{colour}"/>')
        else:
            points = " ".join(f"{x(t)},{y(v)}" for t, v in series)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        text = Markup.escape(name)
        parts.append(
            f'<rect x="{legend_x}" y="{height - 12}" width="10" height="10" fill="{colour}"/>'
            f'<text class="legend" x="{legend_x + 14}" y="{height - 3}">{text}</text>'
        )
        legend_x += 24 + 7 * len(name)
    parts.append("</svg>")
    return Markup("".join(parts))


def _time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M")


def _when(value: datetime | None) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if value else "-"


def _rate(value: float | None) -> str:
    return f"{value:,.1f}" if value is not None else "-"


def _count(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)


def _field(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _badge(state: str | None) -> Markup:
    if not state:
        return Markup('<span class="badge none">-</span>')
    colour = STATE_COLOURS.get(state, "#6c757d")
    return Markup('<span class="badge" style="background:{}">{}</span>').format(colour, state)


_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 16px 24px; color: #1d2733; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 22px 0 8px; }
.who { color: #5c6b7a; margin-bottom: 12px; }
table { border-collapse: collapse; width: 100%; margin-bottom: 8px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #e3e7eb; vertical-align: middle; }
th { font-weight: 600; color: #44515f; background: #f5f7f9; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { color: #fff; border-radius: 9px; padding: 1px 8px; font-size: 12px; }
.badge.none { color: #5c6b7a; background: #eef0f2; }
.problems { background: #fff4e5; border: 1px solid #f0c36d; padding: 8px 12px; border-radius: 4px; }
.problems li { margin: 2px 0; }
.note { color: #5c6b7a; font-style: italic; }
pre { background: #0f1720; color: #dde3ea; padding: 10px; border-radius: 4px; overflow-x: auto; font-size: 12px; }
pre.conf { background: #f5f7f9; color: #1d2733; }
svg text { font-size: 11px; fill: #5c6b7a; } svg text.legend { fill: #1d2733; }
a { color: #017cee; text-decoration: none; } a:hover { text-decoration: underline; }
.facts td:first-child { width: 180px; color: #5c6b7a; }
.forms > div { margin-bottom: 14px; }
.error { font-size: 16px; padding: 12px; border-left: 4px solid #c0392b; background: #fdf0ef; }
"""

# Airflow's UI shows the page in a sandboxed iframe that may not navigate the top window: links into Airflow's own
# pages ask its router instead (same origin), and open in the frame where that fails.
_SCRIPT = """
document.addEventListener("click", function (e) {
  var a = e.target.closest("a[data-airflow]");
  if (!a || window.top === window) return;
  try {
    window.top.history.pushState(null, "", a.getAttribute("href"));
    window.top.dispatchEvent(new PopStateEvent("popstate"));
    e.preventDefault();
  } catch (err) { /* not allowed: the link opens inside the frame */ }
});
"""

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{% block title %}Daggers{% endblock %}</title>
<style>{{ css }}</style></head>
<body>{% block body %}{% endblock %}<script>{{ script }}</script></body></html>"""

_PROBLEMS = """{% if problems %}<div class="problems" id="problems"><b>Not everything could be read:</b><ul>
{% for p in problems %}<li>{{ p }}</li>{% endfor %}</ul></div>{% endif %}"""

_OVERVIEW = """{% extends "base" %}
{% block body %}
<h1>Daggers</h1>
<div class="who">{{ page.user }} ·
{% if page.teams is none %}every team (platform engineer){% elif page.teams %}team{{ 's' if page.teams|length > 1 }}
{% for t in page.teams %}<a href="{{ base }}/team/{{ t|urlpart }}">{{ t }}</a>{{ ', ' if not loop.last }}{% endfor %}
{% else %}no team: a platform engineer adds you to yours (`odin team add TEAM --member {{ page.user }}`){% endif %}
{% if team %} · <a href="{{ base }}/">all of yours</a>{% endif %}</div>
{% include "problems" %}
<h2>Daggers ({{ page.daggers|length }})</h2>
{% if page.daggers %}
<table id="daggers"><tr><th>team</th><th>dagger</th><th>cluster</th><th>state</th><th>health</th><th>since</th>
<th>input/s</th><th>lag</th><th>input rate, last {{ window }} min</th></tr>
{% for d in page.daggers %}{% set r = d.row %}<tr class="dagger" data-team="{{ r.team }}" data-name="{{ r.name }}">
<td>{{ r.team }}</td><td><a href="{{ base }}/dagger/{{ r.team|urlpart }}/{{ r.name|urlpart }}">{{ r.name }}</a></td>
<td>{{ r.cluster or '-' }}</td><td class="state">{{ r.state|badge }}</td><td>{{ d.verdict|badge }}</td>
<td>{{ r.since|when }}</td><td class="num">{{ r.input_rate|rate }}</td><td class="num">{{ r.lag|count }}</td>
<td>{{ d.rates|sparkline }}</td></tr>
{% endfor %}</table>
{% else %}<p class="note">No daggers{{ ' of your teams' if page.teams }} yet: deploy one with the
<a data-airflow href="{{ airflow }}/dags/dagger_deploy">dagger_deploy</a> form.</p>{% endif %}
<h2>Clusters ({{ page.clusters|length }})</h2>
<p class="note">Health as of the latest check: {{ page.health_checked_at|when }}.</p>
{% if page.clusters %}
<table id="clusters"><tr><th>team</th><th>cluster</th><th>state</th><th>masters</th><th>workers (alive)</th>
<th>health</th><th>problems</th></tr>
{% for c in page.clusters %}<tr class="cluster"><td>{{ c.team }}</td><td>{{ c.name }}</td><td>{{ c.state|badge }}</td>
<td class="num">{{ c.masters }}</td>
<td class="num">{{ c.workers }} ({{ c.alive_workers if c.alive_workers is not none else '?' }})</td>
<td>{% if c.ok is none %}{{ none|badge }}{% else %}{{ ('healthy' if c.ok else 'failed')|badge }}{% endif %}</td>
<td>{{ c.problems|join('; ') or '-' }}</td></tr>
{% endfor %}</table>
{% else %}<p class="note">No clusters{{ ' of your teams' if page.teams }}.</p>{% endif %}
<h2>Loki runs ({{ page.runs|length }})</h2>
{% if page.runs %}
<table id="loki"><tr><th>run</th><th>playbook</th><th>team/cluster</th><th>by</th><th>state</th><th>verdict</th>
<th>score</th><th>started</th><th>ended</th></tr>
{% for r in page.runs %}<tr><td>{{ r.id }}</td><td>{{ r.playbook }}</td>
<td>{{ r.team or '-' }}/{{ r.cluster or '-' }}</td>
<td>{{ r.actor }}</td><td>{{ r.state }}</td><td>{{ r.verdict or '-' }}</td>
<td class="num">{{ '%.2f'|format(r.score) if r.score is not none else '-' }}</td><td>{{ r.started_at|when }}</td>
<td>{{ r.ended_at|when }}</td></tr>
{% endfor %}</table>
{% else %}<p class="note">No Loki runs{{ ' of your teams' if page.teams }}.</p>{% endif %}
{% endblock %}"""

_DETAIL = """{% extends "base" %}
{% block title %}{{ page.team }}/{{ page.name }} · Daggers{% endblock %}
{% block body %}
<div class="who"><a href="{{ base }}/">Daggers</a> &rsaquo;
<a href="{{ base }}/team/{{ page.team|urlpart }}">{{ page.team }}</a>
 &rsaquo; {{ page.name }} · {{ page.user }}</div>
<h1 id="title">{{ page.team }}/{{ page.name }} {{ page.state|badge }}</h1>
{% include "problems" %}
<table class="facts" id="facts">
<tr><td>state</td><td class="state">{{ page.state }}</td></tr>
<tr><td>cluster</td><td>{{ page.cluster or '-' }}</td></tr>
<tr><td>since</td><td>{{ page.since|when }}</td></tr>
<tr><td>spec version</td><td id="spec-version">v{{ page.spec_version }}</td></tr>
<tr><td>schema versions</td><td>
{% for s, v in page.schema_versions.items() %}{{ s }} v{{ v }}{{ ', ' if not loop.last }}
{% else %}-{% endfor %}</td></tr>
<tr><td>driver</td><td>{{ page.submission_id or '-' }}</td></tr>
{% if page.status %}<tr><td>driver status</td><td>{{ page.status.phase }} (run {{ page.status.run }}, updated
{{ page.status.updated_at|when }}): {{ page.status.batches|count }} batches, {{ page.status.events|count }} events,
input {{ page.status.input_rate|rate }}/s, lag {{ page.status.lag|count }}, malformed {{ page.status.malformed|count }},
late {{ page.status.late|count }}, lost {{ page.status.lost|count }}{% if page.status.error %}; error:
{{ page.status.error }}{% endif %}</td></tr>{% endif %}
{% if page.health %}<tr><td>health ({{ page.health.checked_at|when }})</td><td>{{ page.health.verdict|badge }}
{{ page.health.reasons|join('; ') }}</td></tr>{% endif %}
<tr><td>input rate, last {{ window }} min</td><td>{{ page.rates|sparkline }}</td></tr>
</table>

<h2>Output</h2>
<div id="output">
{% if page.output %}<p>{{ page.measurement }} (sink {{ page.sink_type }}), summed over its tags, per window:</p>
{{ page.output|chart }}{% endif %}
{% if page.output_note %}<p class="note">{{ page.output_note }}</p>{% endif %}
</div>

<h2>Driver log</h2>
<div id="log">
{% if page.log_lines %}<p class="note">The last {{ page.log_lines|length }} lines, from {{ page.log_where }}:</p>
<pre>{{ page.log_lines|join('\\n') }}</pre>{% endif %}
{% if page.log_note %}<p class="note">{{ page.log_note }}</p>{% endif %}
</div>

<h2>Change it</h2>
<div class="forms" id="forms">
<p class="note">Airflow {{ airflow_version }}'s trigger form cannot be filled from a link: open the form (its Trigger
button) and fill these fields, or paste the JSON into its Advanced options &rsaquo; Configuration JSON.
{% if page.airflow_runs %}On a run's page, Trigger &rsaquo; "Trigger again with this config" fills the form
with that run's fields.{% endif %}</p>
{% if page.form_note %}<p class="note">{{ page.form_note }}</p>{% endif %}
{% for dag, fields in page.forms.items() %}<div class="form" data-dag="{{ dag }}">
<b><a data-airflow class="form-link" href="{{ airflow }}/dags/{{ dag }}">{{ dag }}</a></b>
{% if dag in page.airflow_runs %} · its latest run for this dagger:
<a data-airflow class="run-link" href="{{ airflow }}/dags/{{ dag }}/runs/{{ page.airflow_runs[dag]|urlpart }}">
{{ page.airflow_runs[dag] }}</a>{% endif %}
<table class="fields">{% for k, v in fields.items() %}<tr><td>{{ k }}</td><td>
{% if v is mapping %}<i>an object: see the JSON below</i>{% else %}<code>{{ v|field }}</code>{% endif %}</td></tr>
{% endfor %}</table>
<pre class="conf">{{ fields|tojson_pretty }}</pre></div>
{% endfor %}
</div>

<h2>History (spec v{{ page.spec_version }} now)</h2>
<table id="history"><tr><th>at</th><th>who</th><th>action</th><th>spec</th><th>outcome</th><th>message</th></tr>
{% for e in page.history %}<tr><td>{{ e.at|when }}</td><td>{{ e.actor }}</td><td>{{ e.action }}</td>
<td>{{ 'v%s' % e.detail.spec_version if e.detail and e.detail.spec_version else '' }}</td>
<td>{{ e.outcome }}</td><td>{{ e.message or '' }}</td></tr>
{% else %}<tr><td colspan="6" class="note">nothing recorded</td></tr>{% endfor %}</table>
{% endblock %}"""

_ERROR = """{% extends "base" %}
{% block title %}{{ status }} · Daggers{% endblock %}
{% block body %}<div class="who"><a href="{{ base }}/">Daggers</a></div>
<h1>{{ title }}</h1><p class="error" id="error">{{ message }}</p>{% endblock %}"""

_env = Environment(
    loader=DictLoader(
        {"base": _BASE, "problems": _PROBLEMS, "overview": _OVERVIEW, "detail": _DETAIL, "error": _ERROR}
    ),
    autoescape=select_autoescape(default=True, default_for_string=True),
)
_env.filters.update(
    sparkline=sparkline,
    chart=chart,
    when=_when,
    rate=_rate,
    count=_count,
    badge=_badge,
    field=_field,
    tojson_pretty=_json,
    urlpart=lambda v: quote(str(v), safe=""),
)


def _airflow_version() -> str:
    try:
        from importlib.metadata import version

        return version("apache-airflow")
    except Exception:
        return "3"


def _render(template: str, base: str, airflow: str, **values: Any) -> str:
    common = {"css": Markup(_CSS), "script": Markup(_SCRIPT), "base": base, "airflow": airflow}
    return _env.get_template(template).render(
        **common, window=RATE_WINDOW_S // 60, airflow_version=_airflow_version(), **values
    )


def overview_page(page: Overview, base: str, airflow: str, team: str | None = None) -> str:
    return _render("overview", base, airflow, page=page, team=team, problems=page.problems)


def detail_page(page: Detail, base: str, airflow: str) -> str:
    return _render("detail", base, airflow, page=page, problems=page.problems)


def error_page(status: int, title: str, message: str, base: str, airflow: str) -> str:
    return _render("error", base, airflow, status=status, title=title, message=message)
