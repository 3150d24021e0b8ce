"""Each consumer's sink against the ground truth: its SQL run as a batch over the events the feeders had
acknowledged (and, when some were indeterminate, over those too, as the upper bound)."""

from __future__ import annotations

from jobs.engine import batch_over
from jobs.plan import plan_dagger
from jobs.session import spark_session
from loki.feeder import ACKED, PENDING, Feed
from loki.playbook import Playbook
from loki.simulate import RunResult
from loki.truth import Comparison, compare, read_postgres_sink


def _payloads(feeds: list[Feed], topics: list[str], fates: tuple[int, ...]) -> list[bytes]:
    out: list[bytes] = []
    for feed in feeds:
        if set(feed.topics) & set(topics):
            for topic, values in feed.payloads(fates).items():
                if topic in topics:
                    out.extend(values)
    return out


def against_truth(book: Playbook, result: RunResult) -> dict[str, Comparison]:
    counts = {c.name: c.count_column for c in book.load.consumers}
    if not result.consumers or not result.feeds:
        return {}
    spark = spark_session("loki-ground-truth")
    try:
        comparisons = {}
        for name, consumer in result.consumers.items():
            plan = plan_dagger(consumer.spec)
            topics = [s.topics for s in consumer.spec.streams]
            acked = [_payloads(result.feeds, t, (ACKED,)) for t in topics]
            expected = batch_over(plan, spark, acked).to_pylist()
            upper = None
            if any(int((f.fates[: f.sent] == PENDING).sum()) for f in result.feeds):
                both = [_payloads(result.feeds, t, (ACKED, PENDING)) for t in topics]
                upper = batch_over(plan, spark, both).to_pylist()
            output = read_postgres_sink(consumer.spec)
            comparisons[name] = compare(expected, output, plan.shape, counts.get(name), upper)
        return comparisons
    finally:
        spark.stop()
