"""Health in tables and lines, for people: `dagger status`, `dagger failover` and the health DAGs' logs show the
same ones."""

from __future__ import annotations

from rich.table import Table

from jobs.health.checkup import HealthReport
from jobs.health.cluster_failover import FailoverReport
from jobs.health.judge import LEVEL
from jobs.lifecycle.tables import links_line

VERDICT_STYLE = {"healthy": "green", "degraded": "yellow", "failed": "red", "crashlooping": "bold red"}


def health_tables(report: HealthReport) -> list[Table]:
    """A check's clusters and daggers, worst first, with the reasons and what the check did."""
    clusters = Table(title=f"{len(report.clusters)} cluster(s)", title_justify="left")
    for col in ("team", "cluster", "ok", "active master", "workers alive", "problems", "healed"):
        clusters.add_column(col)
    clusters.add_column("master UI", overflow="fold")
    for c in report.clusters:
        healed = "-" if c.healed is None else ("yes" if c.healed else "no")
        problems = "; ".join(c.problems) or "-"
        ok = "[green]yes[/]" if c.ok else "[red]no[/]"
        workers = f"{c.alive_workers}/{c.workers}"
        clusters.add_row(c.team, c.name, ok, c.active_master or "-", workers, problems, healed, c.master_ui or "-")
    title = f"{len(report.daggers)} dagger(s), checked {report.checked_at:%H:%M:%S}"
    daggers = Table(title=title, title_justify="left")
    for col in ("team", "name", "cluster", "verdict", "driver", "driver id", "progress age", "lag", "in/s", "out/s"):
        daggers.add_column(col)
    daggers.add_column("restarts")
    daggers.add_column("reasons", overflow="fold")
    for d in sorted(report.daggers, key=lambda d: (-LEVEL[d.verdict], d.team, d.name)):
        daggers.add_row(
            d.team,
            d.name,
            d.cluster or "-",
            f"[{VERDICT_STYLE[d.verdict]}]{d.verdict}[/]",
            d.driver_state or "-",
            d.driver_id or "-",
            f"{d.progress_age_s:.0f} s" if d.progress_age_s is not None else "-",
            f"{d.lag:,}",
            f"{d.input_rate:,.0f}",
            f"{d.processed_rate:,.0f}",
            str(d.restarts),
            "; ".join(d.reasons) or "-",
        )
    tables = [clusters, daggers]
    if report.streams:
        streams = Table(title=f"{len(report.streams)} stream(s) with a failover cluster", title_justify="left")
        for col in ("stream", "serving", "bootstrap servers", "reachable", "down checks", "switched to"):
            streams.add_column(col)
        for s in report.streams:
            up = "[green]yes[/]" if s.reachable else "[red]no[/]"
            streams.add_row(s.name, s.serving, s.bootstrap_servers, up, str(s.down_checks), s.switched_to or "-")
        tables.append(streams)
    if report.alerts:
        alerts = Table(title=f"{len(report.alerts)} alert(s) firing", title_justify="left")
        for col in ("since", "alert", "severity", "subject", "receiver"):
            alerts.add_column(col)
        alerts.add_column("summary", overflow="fold")
        for a in report.alerts:
            since = f"{a.starts_at:%Y-%m-%d %H:%M:%S}" if a.starts_at else "-"
            severity = a.labels.get("severity", "-")
            alerts.add_row(since, a.alertname, severity, a.subject or "-", a.receiver, a.annotations.get("summary", ""))
        tables.append(alerts)
    return tables


def health_links(report: HealthReport) -> list[str]:
    """Where Spark shows each checked dagger's driver, a line each, in the daggers table's order."""
    masters = {(c.team, c.name): c.master_ui for c in report.clusters}
    return [
        links_line(d.qualified_name, d.driver_id, masters.get((d.team, d.cluster or "")), d.app_ui, d.driver_log_ui)
        for d in sorted(report.daggers, key=lambda d: (-LEVEL[d.verdict], d.team, d.name))
        if d.driver_id is not None
    ]


def failover_summary(report: FailoverReport) -> str:
    moved = ", ".join(report.moved) or "none"
    text = f"{report.team}/{report.cluster} failed over to {report.target}: moved {moved}"
    return text + "".join(f"\n{name}: did not move: {why}" for name, why in report.failed.items())
