"""Telemetry of a run: the metric catalogue, the recorder, Pushgateway pushes and their spool, the run session."""
