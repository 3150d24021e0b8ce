"""The platform's reports on one page: every Loki run, the health checks and the benchmarks' figures, gathered into
`<state>/reports/index.json` and a self-contained `index.html` (plots inlined as PNG) that opens offline. The
`reports_gather` DAG writes them daily and at the end of `make demo`.

Gathered, never recomputed: a Loki run's numbers are its report's (loki/report.py), a health check's its JSON
report's (jobs/health/checkup.py), a benchmark's the figures it recorded (`<state>/bench/<name>.json`).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from pydantic import ValidationError

from jobs.health.checkup import HealthReport, Reports
from loki.report import html_table, png, timeline_plot, windows_plot
from loki.store import SimulationStore
from odin.registry import Registry

MAX_RUNS = 50  # the newest Loki runs in the index
MAX_CHECKS = 500  # the newest health checks (a day of minutes is 1,440: the trend needs no more detail)
VERDICTS = ("healthy", "degraded", "failed", "crashlooping")


def reports_dir(state_dir: Path) -> Path:
    return state_dir / "reports"


def _loki_runs(registry: Registry) -> list[dict[str, Any]]:
    """Each finished run's report, newest first (a run without its report.json on this machine is skipped)."""
    runs = []
    for sim in SimulationStore(registry).runs()[:MAX_RUNS]:
        path = Path(sim.report).with_name("report.json") if sim.report else None
        try:
            report = json.loads(path.read_text()) if path else None
        except (OSError, ValueError):
            report = None
        if report is not None:
            runs.append(report | {"report_html": str(path.with_name("report.html")) if path else None})
    return runs


def _run_summary(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": report["run"],
        "playbook": report["playbook"],
        "started_at": report["started_at"],
        "state": report["state"],
        "verdict": report["verdict"],
        "score": report["score"],
        "duration_s": report["duration_s"],
        "max_sustained_rate": report["max_sustained_rate"],
        "acknowledged": report["events"]["acknowledged"],
        "lost": report["events"]["lost"],
        "duplicated": report["events"]["duplicated"],
        "recovery": [
            {
                "case": c["case"],
                "type": c["type"],
                "verdict": c["verdict"],
                "detect_s": c["detect_s"],
                "recover_s": c["recover_s"],
            }
            for c in report["cases"]
        ],
        "report_html": report.get("report_html"),
    }


def _health(state_dir: Path) -> list[dict[str, Any]]:
    """Per check, oldest first: how many daggers and clusters had each verdict, and what the check did."""
    out = []
    for path in sorted((Reports(state_dir).dir / "reports").glob("*.json"))[-MAX_CHECKS:]:
        try:
            check = HealthReport.model_validate_json(path.read_text())
        except (OSError, ValidationError):
            continue  # a report being written, or of an older shape: the next one counts
        out.append(
            {
                "checked_at": check.checked_at.isoformat(),
                "daggers": dict(Counter(d.verdict for d in check.daggers)),
                "clusters": dict(Counter("healthy" if c.ok else "unhealthy" for c in check.clusters)),
                "actions": len(check.actions),
                "alerts": len(check.alerts),
            }
        )
    return out


def _benchmarks(state_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((state_dir / "bench").glob("*.json")):
        try:
            out.append({"bench": path.stem} | json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


def gather(registry: Registry, state_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The index (what index.json holds) and the newest Loki runs' full reports (for the plots)."""
    runs = _loki_runs(registry)
    index = {
        "generated_at": datetime.now(UTC).isoformat(),
        "loki_runs": [_run_summary(r) for r in runs],
        "health_checks": _health(state_dir),
        "benchmarks": _benchmarks(state_dir),
    }
    return index, runs


# -- the page -------------------------------------------------------------------------------------------------------


def _trend_plot(summaries: list[dict[str, Any]]) -> str:
    runs = list(reversed(summaries))  # oldest first
    fig, (score_ax, loss_ax) = plt.subplots(1, 2, figsize=(11, 3))
    labels = [f"{r['playbook']}\n{(r['started_at'] or '')[5:16]}" for r in runs]
    score_ax.bar(
        range(len(runs)),
        [r["score"] for r in runs],
        color=["tab:green" if r["verdict"] == "pass" else "tab:red" for r in runs],
    )
    score_ax.set_ylim(0, 105)
    score_ax.set_title("score per run")
    loss_ax.plot(range(len(runs)), [r["lost"] for r in runs], marker="o", label="lost")
    loss_ax.plot(range(len(runs)), [r["duplicated"] for r in runs], marker="x", label="counted twice")
    loss_ax.set_title("events lost and counted twice per run")
    loss_ax.legend(fontsize=8)
    for ax in (score_ax, loss_ax):
        ax.set_xticks(range(len(runs)), labels, rotation=90, fontsize=7)
    return png(fig)


def _recovery_plot(summaries: list[dict[str, Any]]) -> str:
    cases = [(f"{r['playbook']}: {c['case']}", c) for r in reversed(summaries) for c in r["recovery"]]
    fig, ax = plt.subplots(figsize=(11, 0.6 + 0.3 * max(len(cases), 1)))
    ys = range(len(cases))
    ax.barh(
        list(ys),
        [c["recover_s"] or 0 for _, c in cases],
        color=["tab:green" if c["verdict"] == "pass" else "tab:red" for _, c in cases],
    )
    ax.set_yticks(list(ys), [name for name, _ in cases], fontsize=7)
    ax.set_xlabel("seconds from the fault to recovery")
    ax.set_title("recovery per fault (red: the case failed)")
    return png(fig)


def _health_plot(checks: list[dict[str, Any]]) -> str:
    fig, ax = plt.subplots(figsize=(11, 3))
    xs = [datetime.fromisoformat(c["checked_at"]) for c in checks]
    bottom = [0] * len(checks)
    for verdict, color in zip(VERDICTS, ("tab:green", "tab:orange", "tab:red", "purple"), strict=True):
        counts = [c["daggers"].get(verdict, 0) for c in checks]
        ax.bar(xs, counts, bottom=bottom, width=0.0005, color=color, label=verdict)
        bottom = [b + n for b, n in zip(bottom, counts, strict=True)]
    ax.set_ylabel("daggers")
    ax.set_title("daggers per verdict at each health check")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    return png(fig)


def render(index: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    summaries = index["loki_runs"]
    plots: list[tuple[str, str]] = []
    if summaries:
        plots += [("Loki runs: score, loss and double counts", _trend_plot(summaries))]
        plots += [("Recovery per fault", _recovery_plot(summaries))]
    if runs and runs[0]["timeline"]:
        plots += [(f"Throughput and lag: latest run {runs[0]['run']} ({runs[0]['playbook']})", timeline_plot(runs[0]))]
    if runs:
        plots += [
            (f"Output against the ground truth per window: {name}, run {runs[0]['run']}", windows_plot(name, w))
            for name, w in runs[0]["windows"].items()
            if w
        ]
    if index["health_checks"]:
        plots += [("Health checks", _health_plot(index["health_checks"]))]
    figures = "".join(
        f'<figure><figcaption>{html.escape(title)}</figcaption><img alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{png}"/></figure>'
        for title, png in plots
    )
    runs_rows = [
        {k: v for k, v in s.items() if k not in ("recovery", "report_html")} | {"report": s["report_html"] or ""}
        for s in summaries
    ]
    checks = index["health_checks"]
    latest = checks[-1] if checks else None
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Daggers Platform reports</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:2px 6px;font-size:13px}}figure{{margin:1em 0}}figcaption{{font-weight:bold}}</style></head><body>
<h1>Daggers Platform reports</h1>
<p>generated {html.escape(index["generated_at"])}: {len(summaries)} Loki run(s), {len(checks)} health check(s),
{len(index["benchmarks"])} benchmark(s). The same data: index.json beside this page.</p>
<h2>Plots</h2>{figures or "<p>nothing to plot yet: no Loki run and no health check</p>"}
<h2>Loki runs</h2>{html_table(runs_rows)}
<h2>Latest health check</h2>{html_table([latest] if latest else [])}
<h2>Benchmarks</h2>{html_table(index["benchmarks"])}
</body></html>"""


def write(registry: Registry, state_dir: Path) -> tuple[Path, Path]:
    """Gather and write index.json and index.html under `<state>/reports/`; returns their paths."""
    index, runs = gather(registry, state_dir)
    out = reports_dir(state_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "index.json", out / "index.html"
    for path, body in ((json_path, json.dumps(index, indent=2, default=str)), (html_path, render(index, runs))):
        tmp = path.with_name(f".{path.name}")
        tmp.write_text(body)
        tmp.replace(path)  # a reader never sees half a page
    return json_path, html_path
