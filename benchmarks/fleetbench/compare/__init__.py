"""`fleetbench compare`: two runs side by side, with statistics on their samples and a CI gate.

statistics  the test of one headline figure: Mann-Whitney U and a bootstrap CI of the ratio of
            medians (scipy.stats), or the threshold alone for single values; the verdict
matching    which runs, which records, which figures are like with like; config differences
baselines   named baselines: the records of a run kept as a plain JSON file under the results root
gate        which worse figures fail the comparison (--fail-on-regression, per-metric thresholds)
formats     the comparison as markdown, CSV and JSON
The rich tables a terminal shows are the CLI's: fleetbench/cli/views/compare.py.
"""
