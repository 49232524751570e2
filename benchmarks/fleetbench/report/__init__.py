"""The offline report: the dashboards' panels rendered to PNG and one self-contained HTML page per run."""
