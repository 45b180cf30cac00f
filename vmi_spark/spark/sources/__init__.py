"""Row sources: how the input's rows are read (Spark's reader, pyarrow in the
workers, a vector column, a wide sparse vector's non-zeros)."""
