"""The platform's dashboards: the one source the Grafana files are generated from (`python -m odin.dashboards`).

Odin does not import the jobs that write these metrics (the layering), so their names are spelled here; the
dashboard tests run a dagger and a health check into a real VictoriaMetrics and prove each name exists:
- `dagger_metrics`: each dagger's driver, per micro-batch (jobs/engine/telemetry.py); tags team, dagger
  (`<team>.<name>`), and topic + partition on the lag points;
- `dagger_health` / `cluster_health`: each health check (jobs/health/checkup.py); tags team, dagger (`<name>`, no
  team prefix), cluster (`-` when none);
- a team's outputs: the seed's surge query (docs/examples/surge-demand.yaml) through an influx sink, measurement
  `<team>_<something>` when deployed (tag `team`), fields and `tag_*` columns as the query names them.
"""

from __future__ import annotations

from odin.dashboards.model import Dashboard, Panel, Selector, Series, Target, Variable, query

# Grafana sends an "All" of a multi-value variable as `.*`, which also matches a series without the label.
TEAM, DAGGER, CLUSTER = "$team", "$dagger", "$cluster"
SIGNALS = ("stalled", "lag_growing", "throughput_collapsed", "malformed_spike", "late_spike", "lost", "sink_errors")
LEVELS = ((0, "healthy", "green"), (1, "degraded", "yellow"), (2, "failed", "red"), (3, "crashlooping", "purple"))
EVENTS_PER_S = "suffix: events/s"


def _metrics(field: str) -> Selector:
    return Series("dagger_metrics", field).where(team=TEAM, dagger=DAGGER)


def _per_interval(field: str, legend: str) -> Target:
    """A per-batch count summed over each step: batches come every trigger, the step is wider."""
    return query("sum by (dagger) (sum_over_time({s}[$__interval]))", legend, s=_metrics(field))


DAGGER_METRICS = Dashboard(
    uid="daggers-metrics",
    title="Daggers: streaming metrics",
    description="What each dagger's driver reports per micro-batch (dagger_metrics, jobs/engine/telemetry.py).",
    variables=(
        Variable("team", "Team", "team", Series("dagger_metrics", "input_rows").where()),
        Variable("dagger", "Dagger", "dagger", Series("dagger_metrics", "input_rows").where(team=TEAM)),
    ),
    panels=(
        Panel(
            "Events per second",
            "Events read and processed per second: Spark's rates, of events only (no end-of-input sentinels).",
            (
                query("sum by (dagger) ({s})", "{{dagger}} in", s=_metrics("input_rate")),
                query("sum by (dagger) ({s})", "{{dagger}} processed", s=_metrics("processed_rate")),
            ),
            unit=EVENTS_PER_S,
        ),
        Panel(
            "Events read",
            "Events read per step: those the reader's WHERE dropped count, malformed ones do not.",
            (_per_interval("input_rows", "{{dagger}}"),),
        ),
        Panel(
            "Consumer lag per partition",
            "Events each Kafka partition had beyond the batch's end when the batch was planned.",
            (
                query(
                    "max by (dagger, topic, partition) ({s})",
                    "{{dagger}} {{topic}}[{{partition}}]",
                    s=_metrics("lag"),
                ),
            ),
        ),
        Panel(
            "Batch duration",
            "The slowest micro-batch of each step, trigger to commit.",
            (
                query(
                    "max by (dagger) (max_over_time({s}[$__interval]))", "{{dagger}}", s=_metrics("batch_duration_ms")
                ),
            ),
            unit="ms",
        ),
        Panel(
            "Watermark delay",
            "How far the event-time watermark trails the wall clock: windows close this late, plus the window.",
            (query("time() - max by (dagger) ({s}) / 1000", "{{dagger}}", s=_metrics("watermark_ms")),),
            unit="s",
        ),
        Panel(
            "Malformed, late and lost events",
            "Malformed and late events go to the dead-letter topic; lost ones a gap in the offsets skipped; dropped: "
            "groups of late rows Spark's stateful operators dropped.",
            (
                _per_interval("malformed", "{{dagger}} malformed"),
                _per_interval("late_events", "{{dagger}} late"),
                _per_interval("dropped_by_watermark", "{{dagger}} dropped groups"),
                _per_interval("lost_events", "{{dagger}} lost"),
            ),
        ),
        Panel(
            "Sink errors",
            "Failed sink write attempts (retried): the driver counts them since it started.",
            (query("sum by (dagger) (increase({s}[$__rate_interval]))", "{{dagger}}", s=_metrics("sink_errors")),),
        ),
    ),
)


def _health(field: str) -> Selector:
    return Series("dagger_health", field).where(team=TEAM, dagger=DAGGER)


DAGGER_HEALTH = Dashboard(
    uid="daggers-health",
    title="Daggers: health",
    description="What each health check judged of each dagger (dagger_health, jobs/health/checkup.py).",
    variables=(
        Variable("team", "Team", "team", Series("dagger_health", "level").where()),
        Variable("dagger", "Dagger", "dagger", Series("dagger_health", "level").where(team=TEAM)),
    ),
    panels=(
        Panel(
            "Verdict",
            "Each check's verdict; failed and crashlooping daggers are restarted or paged by the check itself.",
            (query("max by (team, dagger) ({s})", "{{team}}/{{dagger}}", s=_health("level")),),
            kind="state-timeline",
            width=24,
            mappings=LEVELS,
        ),
        Panel(
            "Signals",
            "What a check found (1), the alert rules' inputs (odin/alerting/rules/daggers.yml).",
            tuple(query("max by (dagger) ({s})", f"{{{{dagger}}}} {s}", s=_health(s)) for s in SIGNALS),
        ),
        Panel(
            "Daggers not healthy",
            "Daggers of each team whose last verdict was not healthy.",
            (query("sum by (team) (1 - {s})", "{{team}}", s=_health("healthy")),),
        ),
        Panel(
            "Lag at the check",
            "The consumer lag the dagger last reported when the check ran.",
            (query("max by (dagger) ({s})", "{{dagger}}", s=_health("lag")),),
        ),
        Panel(
            "Rates at the check",
            "Events per second read and processed, as last reported when the check ran.",
            (
                query("sum by (dagger) ({s})", "{{dagger}} in", s=_health("input_rate")),
                query("sum by (dagger) ({s})", "{{dagger}} processed", s=_health("processed_rate")),
            ),
            unit=EVENTS_PER_S,
        ),
        Panel(
            "Restarts",
            "Restarts by the health check within the restart budget's window; past the budget: crashlooping.",
            (query("max by (dagger) ({s})", "{{dagger}}", s=_health("restarts")),),
        ),
        Panel(
            "Progress age",
            "Seconds since the query last reported progress (-1: none yet); stalled past the policy's limit.",
            (query("max by (dagger) ({s})", "{{dagger}}", s=_health("progress_age_s")),),
            unit="s",
        ),
    ),
)


def _cluster(field: str) -> Selector:
    return Series("cluster_health", field).where(team=TEAM, cluster=CLUSTER)


CLUSTERS = Dashboard(
    uid="daggers-clusters",
    title="Daggers: team clusters",
    description="Each team's Spark clusters at each health check (cluster_health, jobs/health/checkup.py).",
    variables=(
        Variable("team", "Team", "team", Series("cluster_health", "ok").where()),
        Variable("cluster", "Cluster", "cluster", Series("cluster_health", "ok").where(team=TEAM)),
    ),
    panels=(
        Panel(
            "Cluster status",
            "Down: no active master, or a worker not alive; the check converges it with Odin.",
            (query("min by (team, cluster) ({s})", "{{team}}/{{cluster}}", s=_cluster("ok")),),
            kind="state-timeline",
            width=24,
            mappings=((1, "ok", "green"), (0, "down", "red")),
        ),
        Panel(
            "Workers",
            "Workers alive against those the cluster's spec asks for.",
            (
                query("min by (team, cluster) ({s})", "{{team}}/{{cluster}} alive", s=_cluster("alive_workers")),
                query("max by (team, cluster) ({s})", "{{team}}/{{cluster}} wanted", s=_cluster("workers")),
            ),
        ),
        Panel(
            "Checks down in a row",
            "Checks in a row the cluster could run no dagger; past the policy's limit its daggers fail over to "
            "another cluster of the team, if the team allows it.",
            (query("max by (team, cluster) ({s})", "{{team}}/{{cluster}}", s=_cluster("down_checks")),),
        ),
        Panel(
            "Daggers per cluster",
            "Daggers the health check watched on each cluster, and those whose verdict was not healthy.",
            (
                query(
                    "count by (team, cluster) ({s})",
                    "{{team}}/{{cluster}} daggers",
                    s=Series("dagger_health", "level").where(team=TEAM, cluster=CLUSTER),
                ),
                query(
                    "sum by (team, cluster) (1 - {s})",
                    "{{team}}/{{cluster}} not healthy",
                    s=Series("dagger_health", "healthy").where(team=TEAM, cluster=CLUSTER),
                ),
            ),
        ),
    ),
)

# The surge query's output, chosen by its measurement: a metric name cannot be a regex in a panel, so one at a time.
BOOKINGS = Series("${measurement}", "num_of_bookings")
_ANY_BOOKINGS = Selector(None, (("__name__", ".+_num_of_bookings"),))


def _bookings(by: str, legend: str) -> Target:
    """Completed bookings per step: the sink writes one point per one-minute window."""
    grouping = f" by ({by}) " if by else ""
    return query(f"sum{grouping}(sum_over_time({{s}}[$__interval]))", legend, s=BOOKINGS.where(team=TEAM))


SURGE = Dashboard(
    uid="daggers-surge-demand",
    title="Daggers: surge demand",
    description="Completed bookings per window of a surge dagger's output (the seed's surge query, "
    "docs/examples/surge-demand.yaml), by vehicle type, city and S2 cell.",
    variables=(
        Variable("team", "Team", "team", _ANY_BOOKINGS),
        Variable(
            "measurement",
            "Measurement",
            "__name__",
            Selector(None, (*_ANY_BOOKINGS.matchers, ("team", TEAM))),
            multi=False,
            extract="^(.+)_num_of_bookings$",
        ),
    ),
    panels=tuple(
        Panel(title, description, (target,), min_interval="1m")
        for title, description, target in (
            ("Completed bookings", "Completed bookings per step, all cells.", _bookings("", "bookings")),
            (
                "By vehicle type",
                "Completed bookings per step by vehicle type.",
                _bookings("tag_vehicle_type", "{{tag_vehicle_type}}"),
            ),
            (
                "By city",
                "Completed bookings per step by city.",
                _bookings("tag_city_id", "city {{tag_city_id}}"),
            ),
            (
                "Busiest S2 cells",
                "The ten S2 cells (level 13) with the most completed bookings at each step.",
                query(
                    "topk(10, sum by (tag_s2id) (sum_over_time({s}[$__interval])))",
                    "{{tag_s2id}}",
                    s=BOOKINGS.where(team=TEAM),
                ),
            ),
        )
    ),
)

DASHBOARDS: tuple[Dashboard, ...] = (DAGGER_METRICS, DAGGER_HEALTH, CLUSTERS, SURGE)
