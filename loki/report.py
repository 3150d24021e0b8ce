"""A run's report: JSON and a self-contained HTML page (plots inlined as PNG).

Timeline of the feeders' rate, the consumers' processed rate and lag, with the faults shaded; per window, the
output against the ground truth; per fault, the time to detect and to recover; events lost, counted twice and
indeterminate; a verdict per case and a score; and a recovery playbook generated from what the platform did
(the registry's history) while the steady state was broken.
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt

from loki.broker_check import BrokerCheck
from loki.load.truth import Comparison
from loki.playbook import Playbook
from loki.probes import WINDOW_S
from loki.simulate import RunResult
from odin.registry import Registry

RECOVERY_TARGET_S = 60.0


@dataclass
class CaseVerdict:
    case: str
    type: str
    verdict: str  # pass, fail, not run
    reasons: list[str] = field(default_factory=list)
    detect_s: float | None = None
    recover_s: float | None = None


def _rates(result: RunResult) -> list[tuple[float, float, dict[str, float]]]:
    """(t, feeders' events/s, consumers' processed events/s) per sample."""
    out = []
    for prev, cur in zip(result.samples, result.samples[1:], strict=False):
        dt = max(cur.t - prev.t, 1e-6)
        processed = {name: (c.processed_30s or 0) / WINDOW_S for name, c in cur.consumers.items()}
        out.append((cur.t, (cur.sent - prev.sent) / dt, processed))
    return out


def max_sustained_rate(result: RunResult) -> float | None:
    """The highest feeder rate seen before a lag probe first broke (a max-rate experiment's answer)."""
    best = None
    rates = {round(t, 3): r for t, r, _ in _rates(result)}
    for s in result.samples:
        lag_ok = all(v for k, v in s.probes.items() if k.startswith("lag:"))
        if not lag_ok:
            break
        r = rates.get(round(s.t, 3))
        if r is not None:
            best = r if best is None else max(best, r)
    return best


def verdicts(
    book: Playbook, result: RunResult, comparisons: dict[str, Comparison], broker: BrokerCheck | None = None
) -> list[CaseVerdict]:
    """A case passes when nothing was lost or counted twice; a broker_loss case, when the sink lost nothing the
    broker still had (what it lost, a dagger cannot count) and counted nothing twice."""
    lost = sum(c.lost for c in comparisons.values())
    beyond = sum(c.beyond_broker for c in comparisons.values())
    duplicated = sum(c.duplicated for c in comparisons.values())
    gone = broker.gone if broker is not None else 0
    out = []
    for case in book.cases:
        runs = [f for f in result.faults if f.case == case.name]
        v = CaseVerdict(case.name, case.type, "pass")
        if not runs:
            v.verdict, v.reasons = "not run", ["the run ended before its start"]
            out.append(v)
            continue
        errors = [f"{f.resource}: {f.error}" for f in runs if f.error]
        detected = [f.detected_t - f.start_t for f in runs if f.detected_t is not None]
        recovered = [f.recovered_t - f.start_t for f in runs if f.recovered_t is not None]
        v.detect_s = round(min(detected), 1) if detected else None
        v.recover_s = round(max(recovered), 1) if recovered else None
        if errors:
            v.reasons += errors
        if detected and len(recovered) < len(detected):
            v.reasons.append("the steady state did not come back before the run ended")
        if case.type == "broker_loss":
            if beyond:
                v.reasons.append(f"{beyond} event(s) lost that the broker still had")
        else:
            if lost:
                v.reasons.append(f"{lost} event(s) lost")
            if gone:
                v.reasons.append(f"{gone} acknowledged event(s) gone from the broker")
        if duplicated:
            v.reasons.append(f"{duplicated} event(s) counted twice")
        v.verdict = "fail" if v.reasons else "pass"
        out.append(v)
    return out


def recovery_playbook(registry: Registry, result: RunResult) -> list[dict[str, Any]]:
    """For each fault that broke the steady state: the symptoms seen, and what the platform did (the registry's
    history, by anyone but Loki) between the fault and the recovery: the steps that restored service."""
    if not result.started_at:
        return []
    subjects = {f"dagger:{c.spec.team}/{c.spec.name}" for c in result.consumers.values()}
    subjects |= {f"cluster:{c.cluster}" for c in result.consumers.values() if c.cluster}
    out = []
    for f in result.faults:
        if f.detected_t is None:
            continue
        since = datetime.fromtimestamp(result.started_at + f.start_t, UTC)
        until_t = f.recovered_t if f.recovered_t is not None else (result.ended_at - result.started_at)
        until = datetime.fromtimestamp(result.started_at + until_t + 1, UTC)
        symptoms = sorted(
            {p for s in result.samples if f.start_t <= s.t <= until_t for p, ok in s.probes.items() if not ok}
        )
        actions = [
            {"at": e.at.isoformat(), "actor": e.actor, "action": e.action, "subject": e.subject, "message": e.message}
            for subject in sorted(subjects)
            for e in registry.history(subject)
            if e.at is not None and since <= e.at <= until and e.outcome == "ok"
        ]
        alerts = [
            a.alertname
            for a in registry.alerts(firing=False)
            if a.starts_at is not None and since <= a.starts_at <= until
        ]
        out.append(
            {
                "fault": f"{f.case}: {f.type} {f.resource}",
                "symptoms": [f"probe {s} broken" for s in symptoms] + [f"alert {a}" for a in sorted(set(alerts))],
                "actions": sorted(actions, key=lambda a: a["at"]),
                "recovered_after_s": None if f.recovered_t is None else round(f.recovered_t - f.start_t, 1),
            }
        )
    return out


def build(
    book: Playbook,
    result: RunResult,
    comparisons: dict[str, Comparison],
    registry: Registry,
    broker: BrokerCheck | None = None,
) -> dict[str, Any]:
    cases = verdicts(book, result, comparisons, broker)
    scored = [c for c in cases if c.verdict != "not run"]
    exact = all(c.exact for c in comparisons.values())
    score = 100.0 * sum(c.verdict == "pass" for c in scored) / len(scored) if scored else (100.0 if exact else 0.0)
    score = 0.0 if result.state == "failed" else score  # a run that failed proved nothing
    feeds = [f.counts() for f in result.feeds]
    report: dict[str, Any] = {
        "run": result.run_id,
        "playbook": book.name,
        "description": book.description,
        "target": book.target.model_dump(),
        "state": result.state,
        "reason": result.reason,
        "started_at": datetime.fromtimestamp(result.started_at, UTC).isoformat() if result.started_at else None,
        "duration_s": round(result.ended_at - result.started_at, 1) if result.started_at else None,
        "feeders": [f | {"errors": dict(fd.errors)} for f, fd in zip(feeds, result.feeds, strict=True)],
        "events": {
            "acknowledged": sum(f["acknowledged"] for f in feeds),
            "failed": sum(f["failed"] for f in feeds),
            "indeterminate": sum(f["indeterminate"] for f in feeds),
            "malformed": sum(f["malformed"] for f in feeds),
            "lost": sum(c.lost for c in comparisons.values()),
            "lost_with_the_broker": sum(c.lost - c.beyond_broker for c in comparisons.values()),
            "duplicated": sum(c.duplicated for c in comparisons.values()),
            "indeterminate_counted": sum(c.indeterminate_counted for c in comparisons.values()),
            "gone_from_broker": broker.gone if broker is not None else None,
            "duplicated_on_broker": broker.duplicated if broker is not None else None,
            "failed_but_stored": broker.failed_but_stored if broker is not None else None,
        },
        "broker": broker.to_dict() if broker is not None else None,
        "ground_truth": "ground_truth.csv",  # beside this report: events per window and key, by fate
        "consumers": {name: c.totals() for name, c in comparisons.items()},
        # each cluster consumer's last driver, start -> first progress: after a driver or worker loss, the relaunch's
        "driver_start_up_s": {
            name: round(c.start_up_s, 1) for name, c in result.consumers.items() if c.start_up_s is not None
        },
        "windows": {name: [vars(w) for w in c.windows] for name, c in comparisons.items()},
        "faults": [f.to_dict() for f in result.faults],
        "cases": [vars(c) for c in cases],
        "recovery_target_s": RECOVERY_TARGET_S,
        "recovered_within_target": all(c.recover_s is None or c.recover_s <= RECOVERY_TARGET_S for c in cases),
        "score": round(score, 1),
        "verdict": "pass"
        if result.state != "failed"
        and ((scored and all(c.verdict == "pass" for c in scored)) or (not scored and exact and comparisons))
        else "fail",
        "max_sustained_rate": round(r, 1) if (r := max_sustained_rate(result)) is not None else None,
        "recovery_playbook": recovery_playbook(registry, result),
        "errors": result.errors,
        "timeline": [s.to_dict() for s in result.samples],
    }
    return report


# -- files -----------------------------------------------------------------------------------------------------------


def png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def timeline_plot(report: dict[str, Any]) -> str:
    samples = report["timeline"]
    fig, rate_ax = plt.subplots(figsize=(11, 4))
    lag_ax = rate_ax.twinx()
    ts = [s["t"] for s in samples]
    fed = [0.0] + [(b["sent"] - a["sent"]) / max(b["t"] - a["t"], 1e-6) for a, b in itertools.pairwise(samples)]
    rate_ax.plot(ts, fed, label="fed (events/s)", color="tab:blue")
    for name in sorted({n for s in samples for n in s["consumers"]}):
        processed = [(s["consumers"].get(name, {}).get("processed_30s") or 0) / WINDOW_S for s in samples]
        lag = [s["consumers"].get(name, {}).get("lag") or 0 for s in samples]
        rate_ax.plot(ts, processed, label=f"{name} processed (events/s, {WINDOW_S} s avg)", color="tab:green")
        lag_ax.plot(ts, lag, label=f"{name} lag (events)", color="tab:red", linestyle="--")
    for f in report["faults"]:
        end = f["end_t"] if f["end_t"] is not None else (ts[-1] if ts else f["start_t"])
        rate_ax.axvspan(f["start_t"], end, color="orange", alpha=0.2)
        rate_ax.annotate(f["case"], (f["start_t"], 0), rotation=90, fontsize=8, va="bottom")
        for key, marker in (("detected_t", "v"), ("recovered_t", "^")):
            if f[key] is not None:
                rate_ax.plot([f[key]], [0], marker=marker, color="black")
    rate_ax.set_xlabel("seconds since the load started")
    rate_ax.set_ylabel("events/s")
    lag_ax.set_ylabel("lag (events)")
    handles = rate_ax.get_legend_handles_labels()[0] + lag_ax.get_legend_handles_labels()[0]
    rate_ax.legend(handles=handles, loc="upper left", fontsize=8)
    rate_ax.set_title("timeline (faults shaded; v detected, ^ recovered)")
    return png(fig)


def windows_plot(name: str, windows: list[dict[str, Any]]) -> str:
    fig, ax = plt.subplots(figsize=(11, 3))
    xs = list(range(len(windows)))
    ax.bar([x - 0.2 for x in xs], [w["expected_events"] for w in windows], width=0.4, label="ground truth")
    ax.bar([x + 0.2 for x in xs], [w["output_events"] for w in windows], width=0.4, label="output")
    for x, w in zip(xs, windows, strict=True):
        if w["lost"] or w["duplicated"]:
            ax.annotate(f"-{w['lost']}/+{w['duplicated']}", (x, w["expected_events"]), color="red", fontsize=7)
    ax.set_xticks(xs, [w["window"][11:19] for w in windows], rotation=90, fontsize=7)
    ax.set_ylabel("events")
    ax.set_title(f"{name}: events per window, output against the ground truth")
    ax.legend(fontsize=8)
    return png(fig)


def html_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def write(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out_dir / "report.json", out_dir / "report.html"
    json_path.write_text(json.dumps(report, indent=2, default=str))
    plots = [timeline_plot(report)] if report["timeline"] else []
    plots += [windows_plot(n, w) for n, w in report["windows"].items() if w]
    images = "".join(f'<img src="data:image/png;base64,{p}"/>' for p in plots)

    def step(s: dict[str, Any]) -> str:
        actions = "; ".join(f"{a['actor']} {a['action']} {a['subject']}" for a in s["actions"]) or "none recorded"
        return (
            f"<li><b>{html.escape(s['fault'])}</b>: symptoms {html.escape(', '.join(s['symptoms']) or 'none')}; "
            f"actions: {html.escape(actions)}; recovered after {s['recovered_after_s']} s</li>"
        )

    steps = "".join(step(s) for s in report["recovery_playbook"])
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Loki {html.escape(report["playbook"])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:2px 6px;font-size:13px}}.pass{{color:green}}.fail{{color:red}}</style></head><body>
<h1>Loki run {html.escape(report["run"])}: {html.escape(report["playbook"])}
<span class="{report["verdict"]}">{report["verdict"]}</span> (score {report["score"]})</h1>
<p>{html.escape(report["description"])}</p>
<p>state {html.escape(report["state"])} {html.escape(report["reason"])}; target {html.escape(str(report["target"]))};
duration {report["duration_s"]} s; max sustained rate {report["max_sustained_rate"]} events/s</p>
<h2>Events</h2>{html_table([report["events"]])}
<h2>Cases</h2>{html_table(report["cases"])}
<h2>Faults</h2>{html_table(report["faults"])}
<h2>Consumers against the ground truth</h2>{html_table([{"consumer": k, **v} for k, v in report["consumers"].items()])}
<h2>Plots</h2>{images}
<h2>Recovery playbook</h2><ol>{steps or "<li>no fault broke the steady state</li>"}</ol>
<h2>Errors</h2>{html_table([{"error": e} for e in report["errors"]])}
</body></html>"""
    html_path.write_text(page)
    return json_path, html_path
