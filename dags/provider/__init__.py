"""The platform's Airflow provider: the one package that imports Airflow (besides the DAG files, which stay
declarations). Shaped like Airflow's provider packages: `operators/` (one task, one action), `triggers/` (deferred
waiting), `requests/` (what each DAG's tasks do, through the platform's own clients in jobs/, odin/ and loki/),
`params/` (the trigger forms' fields from the pydantic models), `tasks.py` (what every DAG file shares: the run's
params and user, refusals that fail without retries) and `auth.py` (the auth manager with the platform's rules).
Airflow does not parse this folder for DAGs (dags/.airflowignore)."""
