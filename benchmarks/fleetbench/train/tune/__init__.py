"""`fleetbench tune`: from a run's verdicts to measured knob changes and the best configuration.

candidates  the verdicts of a train run (and of profile and ncu runs) as candidate `train.*` changes
measure     each candidate against the base in rounds of separate processes, judged by compare's statistics
"""
