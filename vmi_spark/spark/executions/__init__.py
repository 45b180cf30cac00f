"""Executions: where the greedy steps run over the kept blocks (in the driver,
in resident tasks, one Spark job per pass) and the resident tasks' protocol."""
