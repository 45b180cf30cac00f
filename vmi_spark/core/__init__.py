"""Spark-free numpy core: the encoding plan, probability tables, the variational bound,
the greedy loop.

Nothing in this package imports pyspark; the Spark layer calls these functions once
per chunk of rows, and the in-memory selector calls them on the whole table.
"""
