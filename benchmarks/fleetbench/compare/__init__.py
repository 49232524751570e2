"""`fleetbench compare`: two runs side by side, with statistics on their samples and a CI gate.

statistics  the test of one headline figure: Mann-Whitney U on the logs of independent samples, the
            Hodges-Lehmann factor and its confidence set (scipy.stats); the verdict, one rule
stability   "unstable": samples that spread too far, or processes that ran on a loaded machine
matching    which runs, which records, which figures are like with like; config differences
baselines   named baselines: the records of a run kept as a plain JSON file under the results root
gate        which worse figures fail the comparison (--fail-on-regression, per-metric thresholds)
formats     the comparison as markdown, CSV and JSON
validity    the figures compare can judge: finite, and not negative where the quantity cannot be
rounds      `compare --rounds N`: base and new in N separate processes each, interleaved (asv continuous)
noise       this machine's run-to-run noise, measured once (`fleetbench noise`), and the change it implies
history     a headline metric over the stored runs and baselines, and the steps in it (change points)
bisect      `fleetbench bisect`: the first bad commit between a good and a bad one (asv find)
publish     the verdicts and history's steps as Prometheus series for the compare dashboard
The rich tables a terminal shows are the CLI's: fleetbench/cli/views/compare.py.
"""
