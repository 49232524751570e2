"""Result records: their schema (`record`), the run folders that hold them (`store`), and the machine a
run ran on (`fingerprint`: what must be equal for two runs' figures to compare) and what it was doing
meanwhile (`load`: the load average and stolen CPU time during a process)."""
