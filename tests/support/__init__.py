"""What the tests share that is not a fixture (fixtures are in tests/conftest.py). No test file imports another.

| module | holds |
|---|---|
| `services.py` | what the service fixtures yield: `Services`, `TeamDb`, `TeamCluster` |
| `kafka.py` | reading topics to their end, a fresh topic |
| `seeds.py` | the seed queries (surge, supply) |
| `events.py` | the seed queries' ground truth: events' S2 cells and windows, `surge_truth` |
| `sinks.py` | what a sink holds: the log sink's rows, the TSDB's series, `sink_reaches` |
| `specs.py` | dagger specs of the surge query: on a topic (`surge_spec`), on the catalog (`catalog_spec`), as a file |
| `catalog.py` | the catalog's streams: a stream of a test's own, producing to and reading back a catalog stream |
| `sql.py` | the SQL tests' table schemas and UDF names |
| `airflow.py` | a running Airflow (`Airflow`), its users, the deploy form's fields |
| `trigger_form.py` | Airflow's trigger form driven in headless Chromium |
| `loki_runs.py` | `loki simulate` at small scale, its report checked against the world |
| `waiting.py` | `wait_for`: a bounded poll on a condition, instead of a blind sleep |
"""
