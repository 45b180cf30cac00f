"""The limits seam (``vmi_spark.core.limits``): the sizes that choose a route, changed for
a block by ``overridden`` and read by ``current``; checked, stacked, restored, and seen by
the threads of the in-memory backend."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest

from vmi_spark.core import limits


def test_defaults_are_in_force_outside_any_block():
    assert limits.current() is limits.DEFAULT
    assert limits.current() == limits.Limits()


def test_overridden_changes_only_the_named_limits_and_restores_them():
    before = limits.current()
    with limits.overridden(sample_rows=300, cache_share=1e-9) as inside:
        assert limits.current() is inside
        assert (inside.sample_rows, inside.cache_share) == (300, 1e-9)
        others = [f.name for f in dataclasses.fields(limits.Limits)
                  if f.name not in ("sample_rows", "cache_share")]
        assert all(getattr(inside, n) == getattr(before, n) for n in others)
    assert limits.current() is before


def test_nested_blocks_stack_and_unwind():
    with limits.overridden(split_chunk=3):
        with limits.overridden(chunk_bytes=2000):
            assert (limits.current().split_chunk, limits.current().chunk_bytes) == (3, 2000)
        assert limits.current().split_chunk == 3
        assert limits.current().chunk_bytes == limits.DEFAULT.chunk_bytes
    assert limits.current() == limits.DEFAULT


def test_restored_after_an_exception():
    with pytest.raises(RuntimeError, match="boom"):
        with limits.overridden(probe_cells=1):
            raise RuntimeError("boom")
    assert limits.current() == limits.DEFAULT


def test_an_unknown_name_is_a_type_error_naming_it_and_changes_nothing():
    with pytest.raises(TypeError, match="'SAMPLE_ROWS'"):
        with limits.overridden(sample_rows=5, SAMPLE_ROWS=5):
            pass
    assert limits.current() == limits.DEFAULT


@pytest.mark.parametrize("name, value", [("sample_rows", 0), ("sample_rows", -1),
                                         ("sample_rows", 2.5), ("sample_rows", True),
                                         ("sample_rows", "300"), ("cache_share", 0.0),
                                         ("deadline_seconds", None)])
def test_a_value_that_is_not_a_positive_number_of_its_kind_names_the_limit(name, value):
    with pytest.raises(ValueError, match=f"^limit {name} must be"):
        with limits.overridden(**{name: value}):
            pass
    assert limits.current() == limits.DEFAULT


def test_a_float_limit_takes_an_int():
    with limits.overridden(deadline_seconds=1):
        assert limits.current().deadline_seconds == 1


def test_threads_of_a_pool_see_the_block_s_limits():
    """Module state, not a context variable: a ThreadPoolExecutor's threads (the in-memory
    backend's) read the limits of the block they run in."""
    with ThreadPoolExecutor(2) as pool:
        pool.submit(limits.current).result()  # threads started outside the block
        with limits.overridden(vector_join_rows=128):
            seen = [f.result().vector_join_rows
                    for f in [pool.submit(limits.current) for _ in range(4)]]
        after = pool.submit(limits.current).result()
    assert seen == [128] * 4 and after == limits.DEFAULT


def test_a_limit_measured_by_default_takes_none_and_a_version_takes_a_version():
    with limits.overridden(driver_available_bytes=1 << 20, arrow_reader_min=(999, 0)):
        assert limits.current().driver_available_bytes == 1 << 20
        with limits.overridden(driver_available_bytes=None):
            assert limits.current().driver_available_bytes is None
        assert limits.current().arrow_reader_min == (999, 0)
    for bad in [(14,), (14, -1), (14.0, 0), "14.0", None]:
        with pytest.raises(ValueError, match="^limit arrow_reader_min must be a version"):
            with limits.overridden(arrow_reader_min=bad):
                pass
    with pytest.raises(ValueError, match="^limit driver_available_bytes must be"):
        with limits.overridden(driver_available_bytes=0):
            pass
    assert limits.current() == limits.DEFAULT


def test_the_available_bytes_are_the_override_where_set_else_measured():
    from vmi_spark.core import resources

    assert limits.available_bytes() == resources.available_memory()
    with limits.overridden(driver_available_bytes=4096):
        assert limits.available_bytes() == 4096
    assert limits.available_bytes() == resources.available_memory()


def test_the_readers_take_their_chunk_cells_from_the_limits_when_made():
    from vmi_spark.spark.sources.arrow_source import ParquetReader, ParquetSource

    source = ParquetSource((), (), {})
    with limits.overridden(read_cells=1200):
        small = ParquetReader(None, source, 2)
    assert small.chunk_cells == 1200
    assert ParquetReader(None, source, 2).chunk_cells == limits.DEFAULT.read_cells == 1 << 17
