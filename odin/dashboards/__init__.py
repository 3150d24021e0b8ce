"""Grafana dashboards of the platform over VictoriaMetrics, generated from one description.

platform.py (the dashboards: panels and their MetricsQL) → render.py (Grafana's JSON models and provisioning YAML)
→ grafana/ (checked in; `python -m odin.dashboards` writes it, `--check` compares). A deployment copies
grafana/provisioning/ into Grafana's provisioning directory and grafana/dashboards/*.json where the provider file
points (render.DASHBOARDS_PATH).
"""
