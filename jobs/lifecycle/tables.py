"""The lifecycle's tables, for people: `dagger list` and the dagger_list DAG's log show the same one."""

from __future__ import annotations

from rich.table import Table

from jobs.lifecycle.daggers import DaggerRow


def daggers_table(rows: list[DaggerRow]) -> Table:
    table = Table(title=f"{len(rows)} dagger(s)", title_justify="left")
    for col in ("team", "name", "cluster", "state", "since", "input/s", "lag", "schema versions"):
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
        )
    return table
