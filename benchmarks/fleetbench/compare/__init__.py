"""`fleetbench compare`: two runs side by side, with statistics on their samples and a CI gate.

statistics  the test of one headline figure: Mann-Whitney U and a bootstrap CI of the ratio of
            medians (scipy.stats), or the threshold alone for single values; the verdict
matching    which runs, which records, which figures are like with like; config differences
baselines   named baselines: the records of a run kept as a plain JSON file under the results root
gate        which worse figures fail the comparison (--fail-on-regression, per-metric thresholds)
formats     the comparison as markdown, CSV and JSON
validity    the figures compare can judge: finite, and not negative where the quantity cannot be
rounds      `compare --rounds N`: base and new in N separate processes each, interleaved (asv continuous)
noise       this machine's run-to-run noise, measured once (`fleetbench noise`), and the change it implies
history     a headline metric over the stored runs and baselines, and the steps in it (change points)
publish     the verdicts and history's steps as Prometheus series for the compare dashboard
The rich tables a terminal shows are the CLI's: fleetbench/cli/views/compare.py.
"""
