"""Executions: where the greedy steps run over the kept chunks (in the driver,
in resident tasks, one Spark job per pass) and the resident tasks' protocol."""
