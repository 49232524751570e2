"""Grafana dashboards as code: declared once here, rendered to JSON for Grafana and to PNG by the report."""
