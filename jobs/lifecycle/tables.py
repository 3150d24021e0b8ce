"""The lifecycle's tables, for people: `dagger list` and the dagger_list DAG's log show the same one."""

from __future__ import annotations

from rich.table import Table

from jobs.lifecycle.daggers import DaggerRow


def daggers_table(rows: list[DaggerRow]) -> Table:
    table = Table(title=f"{len(rows)} dagger(s)", title_justify="left")
    for col in ("team", "name", "cluster", "state", "since", "input/s", "lag", "schema versions", "driver"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.team,
            r.name,
            r.cluster or "-",
            r.state,
            f"{r.since:%Y-%m-%d %H:%M:%S}" if r.since else "-",
            f"{r.input_rate:,.0f}" if r.input_rate is not None else "-",
            f"{r.lag:,}" if r.lag is not None else "-",
            ", ".join(f"{k} v{v}" for k, v in r.schema_versions.items()) or "-",
            r.submission_id or "-",
        )
    return table


def links_line(
    qualified_name: str, driver_id: str, master_ui: str | None, app_ui: str | None, driver_log_ui: str | None
) -> str:
    """A dagger's line under its table: where Spark shows its driver. URLs stay whole on one line (a table cell
    would fold them), so they can be copied."""
    parts = [f"master UI {master_ui or '-'}"]
    if app_ui:
        parts.append(f"application {app_ui}")
    parts.append(f"driver log {driver_log_ui or '- (no worker known to run it)'}")
    return f"{qualified_name} driver {driver_id}: {'; '.join(parts)}"


def daggers_links(rows: list[DaggerRow]) -> list[str]:
    return [
        links_line(f"{r.team}/{r.name}", r.links.driver_id, r.links.master_ui, r.links.app_ui, r.links.log_page())
        for r in rows
        if r.links is not None and r.links.driver_id is not None
    ]
