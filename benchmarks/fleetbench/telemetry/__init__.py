"""Telemetry of a run; the metrics themselves are declared in fleetbench/catalogue.py.

session     one benchmark run's telemetry from start to end: metrics, pushes, .prom files, the record
recorder    metric values of one run and rank in a prometheus-client registry, by catalogue name
push        Pushgateway pushes that never fail or stall a benchmark (retries, then the spool)
spool       pushes the Pushgateway did not take, on disk until `fleetbench metrics flush`
exposition  a Prometheus text exposition read back into a registry, to push or check it
energy      a run's energy (fleetbench.energy) in its record and metrics, or why there is none
"""
