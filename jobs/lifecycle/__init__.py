"""A dagger on its team's cluster: the request, placement, submission, deploy/update/stop/list, relocation."""

START_TIMEOUT_S = 240.0  # how long a deployment may take to its first progress (here: Airflow's DAG files read it)
