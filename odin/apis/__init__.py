"""Clients of the HTTP APIs the platform's services offer: one shared HTTP client, VictoriaMetrics, Airflow."""
