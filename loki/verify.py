"""Each consumer's sink against the ground truth: its SQL run as a batch over the events the feeders had
acknowledged (and, when some were indeterminate, over those too, as the upper bound)."""

from __future__ import annotations

from jobs.engine.plan import plan_dagger
from jobs.engine.runner import batch_over
from jobs.engine.session import spark_session
from loki.load.feeder import ACKED, PENDING, Digest
from loki.load.truth import Comparison, compare, read_postgres_sink
from loki.playbook import Playbook
from loki.simulate import RunResult


def against_truth(
    book: Playbook, result: RunResult, digests: list[Digest], gone: set[int] | None = None
) -> dict[str, Comparison]:
    """`gone`: hashes of acknowledged events the broker no longer has; the output is also compared with the truth
    over the rest, so a loss splits exactly into what went with the broker and what the platform lost."""
    counts = {c.name: c.count_column for c in book.load.consumers}
    if not result.consumers or not digests:
        return {}
    indeterminate = any(d.payloads.get(PENDING) for d in digests)
    spark = spark_session("loki-ground-truth")
    try:
        comparisons = {}
        for name, consumer in result.consumers.items():
            plan = plan_dagger(consumer.spec)
            topics = [s.topics for s in consumer.spec.streams]
            acked = [[p for d in digests for p in d.of((ACKED,), t)] for t in topics]
            expected = batch_over(plan, spark, acked).to_pylist()
            upper = None
            if indeterminate:
                both = [[p for d in digests for p in d.of((ACKED, PENDING), t)] for t in topics]
                upper = batch_over(plan, spark, both).to_pylist()
            output = read_postgres_sink(consumer.spec, consumer.env)
            comparisons[name] = compare(expected, output, plan.shape, counts.get(name), upper)
            if gone:
                kept = [[p for p in payloads if hash(p) not in gone] for payloads in acked]
                on_broker = compare(batch_over(plan, spark, kept).to_pylist(), output, plan.shape, counts.get(name))
                comparisons[name].lost_beyond_broker = on_broker.lost
        return comparisons
    finally:
        spark.stop()
