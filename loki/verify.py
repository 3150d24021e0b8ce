"""Each consumer's sink against the ground truth: its SQL run as a batch over the events the feeders had
acknowledged (and, when some were indeterminate, over those too, as the upper bound)."""

from __future__ import annotations

from jobs.engine.plan import plan_dagger
from jobs.engine.runner import batch_over
from jobs.engine.session import spark_session
from loki.broker_check import BrokerCheck
from loki.load.feeder import ACKED, FAILED, PENDING, Digest
from loki.load.truth import Comparison, compare, read_postgres_sink
from loki.playbook import Playbook
from loki.simulate import RunResult


def against_truth(
    book: Playbook, result: RunResult, digests: list[Digest], broker: BrokerCheck | None = None
) -> dict[str, Comparison]:
    """`broker`: what the broker holds. Events the producer said failed but the broker stored are in the truth; when
    acknowledged events are gone from the broker, the output is also compared with the truth over the rest, so a loss
    splits exactly into what went with the broker and what the platform lost."""
    counts = {c.name: c.count_column for c in book.load.consumers}
    if not result.consumers or not digests:
        return {}
    indeterminate = any(d.payloads.get(PENDING) for d in digests)
    written, gone = (broker.stored_hashes, broker.gone_hashes) if broker is not None else (set(), set())

    def truth_input(fates: tuple[int, ...], topics: list[str]) -> list[bytes]:
        """The events of these fates on these topics, and those said failed that the broker stored all the same."""
        stored = [p for d in digests for p in d.of((FAILED,), topics) if hash(p) in written] if written else []
        return [p for d in digests for p in d.of(fates, topics)] + stored

    spark = spark_session("loki-ground-truth")
    try:
        comparisons = {}
        for name, consumer in result.consumers.items():
            plan = plan_dagger(consumer.spec)
            topics = [s.topics for s in consumer.spec.streams]
            acked = [truth_input((ACKED,), t) for t in topics]
            expected = batch_over(plan, spark, acked).to_pylist()
            upper = None
            if indeterminate:
                upper = batch_over(plan, spark, [truth_input((ACKED, PENDING), t) for t in topics]).to_pylist()
            output = read_postgres_sink(consumer.spec, consumer.env)
            comparisons[name] = compare(expected, output, plan.shape, counts.get(name), upper)
            if gone:
                kept = [[p for p in payloads if hash(p) not in gone] for payloads in acked]
                on_broker = compare(batch_over(plan, spark, kept).to_pylist(), output, plan.shape, counts.get(name))
                comparisons[name].lost_beyond_broker = on_broker.lost
        return comparisons
    finally:
        spark.stop()
