"""Alerting: vmalert rules kept in the repo (rules/), Alertmanager's routing per team (routing.py), the platform's
webhook receiver that records alerts in the registry (receiver.py), and alerts the platform posts itself
(alertmanager.py). Odin's vmalert and alertmanager roles run them."""
