"""The services a run reports to: the local Prometheus and Pushgateway, and a client of Prometheus' API."""
