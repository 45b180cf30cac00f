"""Spark data layer: plan the encoding, encode into cached blocks, run passes."""
