"""Prometheus exporter: the session's live figures in the exposition format.

Another view of a session, like the dashboard and the headless lines (nvitop-exporter is
built on nvitop's api the same way): `python -m neurotui.exporter SESSION_DIR --port P`
serves prometheus_client's HTTP endpoint, and each scrape refreshes the dashboard's live
model (live/model.py) over the session reader and turns its frozen state into metric
families (collector.py). Nothing is computed between scrapes, and no figure is defined here.

The supervisor starts it beside the job when `neurotui run --metrics-port` asks
(supervisor/exporting.py); it may import the live model, the reader and the metrics, never
ui/ or the supervisor.
"""
