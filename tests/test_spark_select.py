"""The Spark path against the numpy core, the lung numbers, inputs and the ML API."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import VectorAssembler

from helpers import codes_of, lung_frame, random_discrete
from vmi_spark import VMISelector, VMISelectorModel
from vmi_spark.core.encoding import equal_frequency_splits
from vmi_spark.core.greedy import select_vmi
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.params import Settings
from vmi_spark.spark.select import run_selection

LUNG_BLOCK = [22, 125, 243, 163, 93, 108, 33]
LUNG_BOUNDS = [0.536068, 0.929746, 1.29322, 1.56056, 1.68928, 1.74789, 1.77936]


@pytest.mark.parametrize("execution", ["resident", "passes"])
@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise"])
@pytest.mark.parametrize("seed", [1, 2])
def test_spark_matches_numpy_core_for_any_partitioning(spark, method, seed, execution):
    pdf = random_discrete(seed)
    x = pdf.drop(columns="y").to_numpy()
    expected = select_vmi(InMemoryBackend(codes_of(x), pdf["y"].to_numpy()), method, 6, 0.0)
    df = spark.createDataFrame(pdf)
    for parts in (1, 3, 7):
        run = run_selection(df.repartition(parts), "y", bias_correction="none", method=method, num_features=6,
                            execution=execution)
        assert run.execution == execution
        sel = run.selection
        assert sel.selected == expected.selected
        assert sel.blocks == expected.blocks
        assert np.allclose(sel.scores, expected.scores, rtol=0, atol=1e-9)
        # fixed-point sums make scores identical, not just close, across partitionings
        assert sel.scores == expected.scores


def test_lung_first_block_through_the_estimator(spark):
    df = spark.createDataFrame(lung_frame()).repartition(3)
    model = VMISelector(biasCorrection="none", inputCols=[f"f{i}" for i in range(325)], labelCol="label",
                        numTopFeatures=9, restartTolerance=0.01).fit(df)
    first = [i for i, b in zip(model.selectedFeatures, model.blocks) if b == 0]
    assert first == LUNG_BLOCK
    scores = model.scores[:len(LUNG_BLOCK)]
    assert np.allclose(scores, LUNG_BOUNDS, rtol=0, atol=6e-6)
    assert model.blocks[len(LUNG_BLOCK)] == 1  # the 8th feature starts a new block
    assert model.selectedFeatureNames[:2] == ["f22", "f125"]


def test_vector_column_with_assembler_names(spark):
    pdf = random_discrete(3)
    df = spark.createDataFrame(pdf)
    cols = [c for c in pdf.columns if c != "y"]
    vec = VectorAssembler(inputCols=cols, outputCol="features").transform(df)
    model = VMISelector(labelCol="y", numTopFeatures=3, outputCol="sel").fit(vec)
    by_cols = VMISelector(inputCols=cols, labelCol="y", numTopFeatures=3).fit(df)
    assert model.selectedFeatures == by_cols.selectedFeatures
    assert model.selectedFeatureNames == [cols[i] for i in model.selectedFeatures]
    out = model.transform(vec).select("features", "sel").collect()
    for row in out[:5]:
        full, picked = row["features"].toArray(), row["sel"].toArray()
        assert list(picked) == [full[i] for i in model.selectedFeatures]


def test_input_cols_transform_keeps_only_selected(spark):
    pdf = random_discrete(4)
    df = spark.createDataFrame(pdf)
    cols = [c for c in pdf.columns if c != "y"]
    model = VMISelector(inputCols=cols, labelCol="y", numTopFeatures=2).fit(df)
    out = model.transform(df)
    assert set(out.columns) == {"y", *model.selectedFeatureNames}


def test_pipeline_save_load_round_trip(spark, tmp_path):
    pdf = random_discrete(5)
    df = spark.createDataFrame(pdf)
    cols = [c for c in pdf.columns if c != "y"]
    pipe = Pipeline(stages=[VectorAssembler(inputCols=cols, outputCol="features"),
                            VMISelector(labelCol="y", numTopFeatures=3, method="vmi_pairwise",
                                        outputCol="sel")])
    fitted = pipe.fit(df)
    fitted.write().overwrite().save(str(tmp_path / "pm"))
    loaded = PipelineModel.load(str(tmp_path / "pm"))
    a, b = fitted.stages[1], loaded.stages[1]
    assert isinstance(b, VMISelectorModel)
    assert b.uid == a.uid
    assert b.selectedFeatures == a.selectedFeatures and b.scores == a.scores
    assert b.getMethod() == "vmi_pairwise"
    assert loaded.transform(df).select("sel").collect() == fitted.transform(df).select("sel").collect()
    a.write().overwrite().save(str(tmp_path / "m"))
    assert VMISelectorModel.load(str(tmp_path / "m")).selectedFeatureNames == a.selectedFeatureNames


def test_estimator_params_and_copy():
    sel = VMISelector(numTopFeatures=5)
    assert sel.getNumTopFeatures() == 5 and sel.getMethod() == "vmi_naive"
    assert sel.setMethod("vmi_pairwise") is sel and sel.getMethod() == "vmi_pairwise"
    assert sel.getRestartTolerance() == 0.0 and sel.getNumBins() == 10
    with pytest.raises(ValueError, match="unknown method"):
        sel.setMethod("nope")
    c = sel.copy({sel.numBins: 7})
    assert c.getNumBins() == 7 and sel.getNumBins() == 10


def test_continuous_columns_are_binned_by_exact_quantiles(spark):
    rng = np.random.default_rng(0)
    n = 1000
    y = rng.integers(0, 2, n)
    x = rng.normal(y, 1.0)
    import pandas as pd

    pdf = pd.DataFrame({"x": x, "noise": rng.normal(size=n), "y": y})
    run = run_selection(spark.createDataFrame(pdf).repartition(4), "y", num_features=2, num_bins=4)
    col = run.plan.columns[0]
    assert col.kind == "bins"
    # independent computation of the equal-frequency split points
    s = np.sort(x)
    assert col.splits == [float(s[250]), float(s[500]), float(s[750])]
    assert equal_frequency_splits(np.array([1.0, 1.0, 1.0, 2.0]), 4) == [2.0]
    # the bound of the first feature equals the plug-in MI of the binned column
    codes = np.searchsorted(col.splits, x, side="right")
    joint = np.zeros((4, 2))
    np.add.at(joint, (codes, y), 1)
    p = joint / n
    mi = np.nansum(p * np.log(p / p.sum(1, keepdims=True) / p.sum(0, keepdims=True)))
    assert run.selection.selected[0] == 0
    assert run.selection.scores[0] == pytest.approx(mi, abs=1e-12)


def test_missing_values_keep_skip_error(spark):
    import pandas as pd

    from vmi_spark.errors import InputError

    pdf = pd.DataFrame({"a": [1.0, float("nan"), 2.0, 1.0, 2.0, 2.0] * 5,
                        "b": ["u", "v", "v", "u", None, "u"] * 5,
                        "y": [0, 1, 1, 0, 1, None] * 5})
    df = spark.createDataFrame(pdf.astype({"y": "Int64"}))
    keep = run_selection(df, "y", num_features=2, handle_invalid="keep")
    assert keep.plan.rows_dropped == 5 and keep.plan.num_rows == 25
    assert [c.missing for c in keep.plan.columns] == [True, True]
    assert [c.num_states for c in keep.plan.columns] == [3, 3]
    skip = run_selection(df, "y", num_features=2, handle_invalid="skip")
    assert skip.plan.rows_skipped == 10 and skip.plan.num_rows == 15
    assert [c.missing for c in skip.plan.columns] == [False, False]
    with pytest.raises(InputError, match="'a' has 5 missing values"):
        run_selection(df, "y", num_features=2, handle_invalid="error")


def test_partition_independence_of_continuous_plan(spark):
    rng = np.random.default_rng(7)
    import pandas as pd

    n = 3000
    y = rng.integers(0, 3, n)
    pdf = pd.DataFrame({f"x{j}": rng.normal(y * (j % 3) / 2, 1) for j in range(6)})
    pdf["y"] = y
    df = spark.createDataFrame(pdf)
    runs = [run_selection(df.repartition(p), "y", method="vmi_pairwise", num_features=4)
            for p in (1, 5)]
    assert runs[0].plan.to_json() == runs[1].plan.to_json()
    assert runs[0].selection.selected == runs[1].selection.selected
    assert runs[0].selection.scores == runs[1].selection.scores


@pytest.mark.parametrize("execution", ["resident", "passes"])
@pytest.mark.parametrize("method", ["mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi"])
def test_classic_criteria_on_spark_match_the_core(spark, method, execution):
    from vmi_spark.core.greedy import select_classic

    pdf = random_discrete(8, n=180, d=7)
    x = pdf.drop(columns="y").to_numpy()
    expected = select_classic(InMemoryBackend(codes_of(x), pdf["y"].to_numpy()), method, 5)
    df = spark.createDataFrame(pdf)
    for parts in (1, 4):
        sel = run_selection(df.repartition(parts), "y", method=method, num_features=5,
                            execution=execution).selection
        assert sel.selected == expected.selected
        assert sel.scores == expected.scores
        assert sel.blocks == [0] * len(sel.selected)


def test_lung_mrmr_matches_the_spark_framework_reference(spark):
    # the expected output of Ramirez-Gallego et al.'s Spark framework test suite
    df = spark.createDataFrame(lung_frame()).repartition(2)
    model = VMISelector(inputCols=[f"f{i}" for i in range(325)], labelCol="label",
                        numTopFeatures=10, method="mrmr").fit(df)
    assert model.selectedFeatures == [22, 125, 243, 132, 242, 29, 150, 166, 18, 269]


def test_every_step_pass_carries_a_job_description(spark, monkeypatch):
    from vmi_spark.spark import session

    seen = []
    original = session.describe_jobs

    def record(sp, text):
        seen.append((text, None))
        original(sp, text)
        if text:  # what the Spark UI shows for the jobs that follow
            seen[-1] = (text, sp.sparkContext.getLocalProperty("spark.job.description"))

    monkeypatch.setattr(session, "describe_jobs", record)
    run_selection(spark.createDataFrame(random_discrete(3)), "y", num_features=4,
                  execution="passes")
    labelled = [s for s in seen if s[0]]
    # one pass per step after the first (a step that starts a new block ran the pass that
    # found the restart); the first step of the selection needs only the counts
    assert [t for t, _ in labelled] == [f"vmi_naive step {k}/4" for k in (2, 3, 4)]
    assert labelled and all(t == shown for t, shown in labelled)
    assert seen[-1][0] is None  # cleared after the selection
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def _encoded_chunks(spark, pdf, chunk_rows: int):
    """(persisted encoded chunks, plan) of a pandas frame with label ``y``, in 3 partitions."""
    features = [c for c in pdf.columns if c != "y"]
    return _chunks_of(spark.createDataFrame(pdf).repartition(3), "y", features, chunk_rows)


def _chunks_of(df, label, features, chunk_rows: int):
    """(persisted encoded chunks, plan) of ``df`` as the Spark reader encodes them."""
    from vmi_spark.spark.plan import plan_from_schema
    from vmi_spark.spark.sources.spark_source import SparkSource, prepare_frame

    typed = prepare_frame(df, label, features)
    source = SparkSource(typed)
    # the raw codes (no state budget): the core's reference runs on them
    planned = plan_from_schema(typed, label, features, Settings.of({"bias_correction": "none"}),
                         source)
    plan, skip_cols = planned.plan, planned.skip_cols
    return source.encode_chunks(plan, chunk_rows, skip_cols).persist(), plan


def test_worker_chunk_cache_saves_transfers_and_changes_nothing(spark):
    """Naive passes score the chunks Python workers already hold; misses fall back. Every
    pass equals the in-memory core over the same codes."""
    from vmi_spark.core.bound import StepOps
    from vmi_spark.core.tables import conditional
    from vmi_spark.spark.executions.passes import SparkBackend

    chunks, plan = _encoded_chunks(spark, random_discrete(4, n=3000, d=9), 500)
    try:
        rows = chunks.collect()
        codes = np.concatenate([np.frombuffer(r["codes"], np.uint8).reshape(9, r["n"])
                                for r in rows], axis=1)
        y = np.concatenate([np.frombuffer(r["y"], np.uint16) for r in rows]).astype(np.int64)
        plain = InMemoryBackend(codes, y, arity=plan.arity, num_classes=3)
        cached = SparkBackend(chunks, 9, plan.arity, 3)
        counts = plain.feature_counts()
        assert (cached.feature_counts() == counts).all()
        prior = counts[0].sum(axis=0) / counts[0].sum()
        cand = np.ones(9, bool)
        cand[[0, 3]] = False
        ops = StepOps("vmi_naive", prior, conditional(counts), cand, (0, 3))
        expected = plain.run(ops)
        for _ in range(4):
            assert (cached.run(ops) == expected).all()
        num_chunks = chunks.count()
        assert all(0 <= h <= num_chunks for h in cached.cache_hits)
        assert sum(cached.cache_hits) > 0  # later passes found chunks in the workers
    finally:
        chunks.unpersist()


def test_restart_tolerance_minus_inf_never_restarts(spark):
    """-inf is the paper's dotted continuation: one block, equal to the core's run."""
    pdf = random_discrete(3)
    x = pdf.drop(columns="y").to_numpy()
    core = select_vmi(InMemoryBackend(codes_of(x), pdf["y"].to_numpy()),
                      "vmi_naive", 8, -np.inf)
    run = run_selection(spark.createDataFrame(pdf), "y", num_features=8,
                        restart_tolerance=-np.inf)
    assert run.selection.blocks == [0] * 8 and run.selection.restarts == 0
    assert run.selection.selected == core.selected and run.selection.scores == core.scores
    default = run_selection(spark.createDataFrame(pdf), "y", num_features=8)
    assert default.selection.restarts > 0  # the data do restart under the default rule
    n0 = default.selection.blocks.count(0)
    assert run.selection.selected[:n0] == default.selection.selected[:n0]
    assert run.report()["parameters"]["restart_tolerance"] == "-inf"


def test_many_binned_columns_take_split_points_from_one_cached_sample(spark, set_limits):
    """More columns than one driver chunk (the sample is cached and fetched chunk by chunk):
    the splits still equal exact per-column quantiles."""
    import pandas as pd


    set_limits(split_chunk=3)
    rng = np.random.default_rng(5)
    n, d = 400, 8
    pdf = pd.DataFrame({f"c{j}": rng.normal(size=n) * (j + 1) for j in range(d)})
    pdf["y"] = rng.integers(0, 2, n)
    run = run_selection(spark.createDataFrame(pdf).repartition(3), "y", num_features=2,
                        num_bins=5)
    for j, col in enumerate(run.plan.columns):
        s = np.sort(pdf[f"c{j}"].to_numpy())
        assert col.splits == [float(s[k]) for k in (80, 160, 240, 320)], col.name


@pytest.mark.parametrize("budget", [None, 0])
def test_pairwise_state_kept_in_workers_equals_the_core(spark, budget):
    """Workers keep and update their chunks' pairwise state; a state they cannot keep
    (budget 0) is rebuilt from the cached chunks in every pass. Same result either way."""
    from helpers import lung
    from vmi_spark.spark.executions import passes as B

    x, labels = lung()
    y = np.unique(labels, return_inverse=True)[1]
    expected = select_vmi(InMemoryBackend(codes_of(x), y), "vmi_pairwise", 9, 0.01)
    assert expected.restarts >= 1
    df = spark.createDataFrame(lung_frame()).repartition(3)
    features = [c for c in df.columns if c != "label"]
    chunks, plan = _chunks_of(df, "label", features, 20)
    try:
        be = B.SparkBackend(chunks, len(features), plan.arity, len(plan.classes),
                            **({} if budget is None else {"state_budget": budget}))
        continues = []  # per pass: does it extend the block the states held?
        run = be.run

        def recording_run(ops):
            before = be.state_block
            continues.append(bool(before) and tuple(ops.block[:len(before)]) == before)
            return run(ops)

        be.run = recording_run
        sel = select_vmi(be, "vmi_pairwise", 9, 0.01)
        assert sel.selected == expected.selected and sel.scores == expected.scores
        num_chunks = chunks.count()
        assert len(be.cache_hits) == len(continues) and any(continues)
        if budget == 0:
            # nothing kept: a pass that extends a block rebuilt every chunk (a pass that
            # starts a block may start the states in the workers that hold the codes)
            assert all(h == 0 for h, c in zip(be.cache_hits, continues) if c)
        else:
            # chunks were scored from state the workers kept (which worker runs a task is
            # Spark's choice, so a pass may also miss some and rebuild them)
            assert sum(be.cache_hits) > 0
            assert all(0 <= h <= num_chunks for h in be.cache_hits)
    finally:
        chunks.unpersist()


def test_pass_over_every_chunk_id_scores_owned_chunks_once():
    """The first pass of a step (every task looks at every chunk id, in-process here): a
    worker scores each chunk it owns at the serial the driver expects, once per pass however
    many of the pass's tasks it runs (the chunks it scored: :attr:`WorkerCache.scored`),
    drops a stale copy (codes and state), leaves a state it cannot bring to the current
    block alone, and restarts a state in place when every table of the block was shipped.
    Every partial sum it sends is the one of a state built from nothing with every table."""
    import pyarrow as pa

    from vmi_spark.core.bound import PAIRWISE, ChunkState, StepOps, pairwise_partials
    from vmi_spark.core.tables import conditional, pair_conditional, safe_log
    from vmi_spark.spark.executions import passes as B

    rng = np.random.default_rng(3)
    d, n = 3, 6
    rows = {bid: (rng.integers(0, 2, (d, n)).astype(np.uint8), rng.integers(0, 2, n))
            for bid in (1, 2, 3, 5, 6)}
    whole = InMemoryBackend(np.concatenate([c for c, _ in rows.values()], axis=1),
                            np.concatenate([y for _, y in rows.values()]))
    counts = whole.feature_counts()
    prior = counts[0].sum(axis=0) / counts[0].sum()
    tables = {f: safe_log(pair_conditional(whole.pair_counts(f))) for f in range(d)}

    def ops_of(block, shipped=None):
        cands = np.ones(d, bool)
        cands[list(block)] = False
        return StepOps(PAIRWISE, prior, conditional(counts), cands, block,
                       {f: tables[f] for f in (block if shipped is None else shipped)})

    def from_nothing(bid, ops):
        codes, y = rows[bid]
        return pairwise_partials(codes, y, ChunkState.initial(prior, n, d), ops).tolist()

    def partials(out):
        return {b: np.frombuffer(p, dtype=np.int64).tolist() for b, p in
                zip(out.column("chunk_id").to_pylist(), out.column("partial").to_pylist())}

    cache = B.worker_cache()
    cache.reset()
    cache.budget_states(1 << 20)
    tok = "t"
    for bid, (codes, y) in rows.items():
        cache.put((tok, bid), codes, y)
        cache.own((tok, bid), 4 if bid == 3 else 5)  # chunk 3: a stale copy
        if bid != 6:  # chunk 6: owned, its state was evicted
            held = (0,) if bid != 5 else (2,)  # chunk 5 holds a feature the block lacks
            state = ChunkState.initial(prior, n, d)
            pairwise_partials(codes, y, state, ops_of(held))
            assert state.block == held
            cache.put_state((tok, bid), state)
    ops = ops_of((0, 1))
    held_fn, _ = B._pairwise_scorers(ops, ops_of((0, 1), shipped=(1,)), d)
    fn = B._first_pass_fn(held_fn, tok, [1, 2, 3, 4, 5, 6], 6, 1 << 20)  # expects serial 5
    unit = [pa.RecordBatch.from_pydict({"id": [0]})]
    out = pa.Table.from_batches(list(fn(iter(unit))))
    assert out.column("chunk_id").to_pylist() == [1, 2] and cache.scored[(tok, 6)] == {1, 2}
    assert partials(out) == {b: from_nothing(b, ops) for b in (1, 2)}
    assert (tok, 3) not in cache.states and (tok, 3) not in cache.chunks  # stale
    assert cache.states.peek((tok, 5)).block == (2,) and cache.owned[(tok, 5)] == 5  # untouched
    assert (tok, 6) not in cache.states and cache.owned[(tok, 6)] == 5  # a miss
    assert cache.owned[(tok, 1)] == 6 and cache.states.peek((tok, 1)).block == (0, 1)
    again = pa.Table.from_batches(list(fn(iter(unit))))  # a second task of the same pass
    assert again.num_rows == 0 and cache.scored[(tok, 6)] == {1, 2}
    assert cache.states.peek((tok, 1)).block == (0, 1)

    # the next step starts a new block (a restart): every table of it is shipped, so a
    # chunk without a state, or with one that is not a prefix, starts from nothing here
    cache.own((tok, 5), 6)
    cache.own((tok, 6), 6)
    new = ops_of((1,))
    held_fn, _ = B._pairwise_scorers(new, new, d)
    out = pa.Table.from_batches(list(B._first_pass_fn(held_fn, tok, [1, 2, 5, 6], 7,
                                                      1 << 20)(iter(unit))))
    assert out.column("chunk_id").to_pylist() == [1, 2, 5, 6]
    assert cache.scored == {(tok, 7): {1, 2, 5, 6}}  # the older pass forgotten
    assert partials(out) == {b: from_nothing(b, new) for b in (1, 2, 5, 6)}
    assert all(cache.states.peek((tok, b)).block == (1,) for b in (1, 2, 5, 6))
    cache.reset()


def test_first_count_pass_alone_gives_ownership():
    """Only the first pass over the chunks makes owners: a later count pass that reads a
    chunk in another worker must not make a second one."""
    import pyarrow as pa

    from vmi_spark.spark.executions import passes as B

    cache = B.worker_cache()
    cache.reset()
    codes = np.array([[0, 1, 1], [1, 0, 1]], dtype=np.uint8)
    rb = pa.RecordBatch.from_pydict({
        "chunk_id": pa.array([7], pa.int64()), "n": pa.array([3], pa.int32()),
        "codes": pa.array([codes.tobytes()], pa.binary()),
        "y": pa.array([np.array([0, 1, 1], dtype=np.uint16).tobytes()], pa.binary())})
    later = B._count_fn(2, 2, 2, None, "t", grant=False)
    out = pa.Table.from_batches(list(later(iter([rb]))))
    assert out.column("chunk_ids").to_pylist() == [[7]]
    expected = np.zeros((2, 2, 2), dtype=np.int64)  # (feature, value, class), by hand
    expected[0] = [[1, 0], [0, 2]]
    expected[1] = [[0, 1], [1, 1]]
    got = np.frombuffer(out.column("counts")[0].as_py(), dtype=np.int64).reshape(2, 2, 2)
    assert (got == expected).all()
    assert ("t", 7) in cache.chunks and ("t", 7) not in cache.owned
    first = B._count_fn(2, 2, 2, None, "t", grant=True)
    list(first(iter([rb])))
    assert cache.owned[("t", 7)] == 0
    cache.own(("t", 7), 3)
    list(first(iter([rb])))  # a first read never takes ownership back to 0
    assert cache.owned[("t", 7)] == 3
    cache.reset()


def test_count_passes_sum_in_the_task_and_split_bulk_pair_counts(set_limits, spark, monkeypatch):
    """A count pass sends one array per task (its chunks summed there), and bulk pair
    counts are split into passes that fit the transfer budget; the totals equal a plain
    numpy count over all rows."""
    from vmi_spark.spark.executions import passes as B

    chunks, plan = _encoded_chunks(spark, random_discrete(6, n=900, d=7), 100)
    try:
        rows = chunks.collect()
        codes = np.concatenate([np.frombuffer(r["codes"], np.uint8).reshape(7, r["n"])
                                for r in rows], axis=1)
        y = np.concatenate([np.frombuffer(r["y"], np.uint16) for r in rows]).astype(np.intp)
        a, L = plan.arity, len(plan.classes)
        expected = np.zeros((7, 7, a, a, L), dtype=np.int64)  # [f, i, x_i, x_f, y], by rows
        for k in range(codes.shape[1]):
            for f in range(7):
                for i in range(7):
                    expected[f, i, codes[i, k], codes[f, k], y[k]] += 1

        be = B.SparkBackend(chunks, 7, a, L)
        fn = B._count_fn(7, a, L, None, be.token, grant=True)
        tasks = chunks.mapInArrow(fn, "chunk_ids array<long>, counts binary").collect()
        assert len(tasks) <= chunks.rdd.getNumPartitions() < len(rows)  # one row per task
        assert sorted(b for t in tasks for b in t[0]) == sorted(r["chunk_id"] for r in rows)

        passes = []
        counts = be._counts
        monkeypatch.setattr(be, "_counts", lambda fs: passes.append(fs) or counts(fs))
        set_limits(count_pass_bytes=3 * 7 * a * a * L * 8)
        got = be.pair_counts_many(list(range(7)))
        assert passes == [[0, 1, 2], [3, 4, 5], [6]]
        assert got.shape == expected.shape and (got == expected).all()
        fc = be.feature_counts()
        assert (fc == expected[0].sum(axis=2)).all()  # n(x_i, y) from the pair table of f=0
    finally:
        chunks.unpersist()



def test_chunks_are_whole_strides_within_their_byte_bounds():
    """Chunks are a multiple of CHUNK_ROW_STEP rows (the compiled loops' SIMD strides), at
    least 256; no more than CHUNK_BYTES of codes and classes (pairwise: PAIR_CHUNK_BYTES of
    state) unless 256 rows already are; and about four a task slot: never more than four
    when no byte bound holds them back, never fewer rows than a slot's quarter share (or
    than the byte bound) less a stride."""
    from vmi_spark.core.bound import CHUNK_ROW_STEP, MAX_CHUNK_ROWS
    from vmi_spark.spark.chunks import memory

    for num_rows, parts, d, method, classes in itertools.product(
            [1, 1000, 20_000, 200_000, 5_000_000], [1, 2, 16],
            [5, 200, 2000, 10_000, 30_000, 200_000], ["vmi_naive", "vmi_pairwise", "mrmr"],
            [2, 7]):
        case = (num_rows, parts, d, method, classes)
        rows = memory.chunk_rows_for(num_rows, parts, d, method, classes)
        assert rows % CHUNK_ROW_STEP == 0 and 256 <= rows <= MAX_CHUNK_ROWS, case
        state = 8 * d * classes if method == "vmi_pairwise" else 0
        if rows > 256:
            assert rows * (d + 2) <= memory.CHUNK_BYTES, case
            assert rows * state <= memory.PAIR_CHUNK_BYTES, case
        share = -(-num_rows // (4 * parts))
        bound = min(memory.CHUNK_BYTES // (d + 2),
                    memory.PAIR_CHUNK_BYTES // state if state else memory.CHUNK_BYTES)
        if bound >= share + CHUNK_ROW_STEP and share <= MAX_CHUNK_ROWS:
            assert -(-num_rows // rows) <= 4 * parts, case  # not cut finer than the slots need
        if share >= memory.MIN_CHUNK_ROWS:
            assert rows > min(share, bound, MAX_CHUNK_ROWS) - CHUNK_ROW_STEP, case


def test_a_kernel_falling_back_to_numpy_in_a_python_worker_fails_the_task(spark):
    # the spark fixture gives its Python workers the warnings filter that pyproject gives
    # this process: a compiled loop that falls back to numpy there is an error, not a line
    # in a worker's log (the answers would be the same)
    from pyspark.errors import PythonException

    def warn(rows):
        import warnings

        warnings.warn("vmi_spark: numba could not compile a kernel (TypingError); using the "
                      "numpy loops", RuntimeWarning, stacklevel=2)
        yield from rows

    def other(rows):
        import warnings

        warnings.warn("VMI selection stopped early: a test", RuntimeWarning, stacklevel=2)
        yield from rows

    rdd = spark.sparkContext.parallelize(range(4), 2)
    assert sorted(rdd.mapPartitions(other).collect()) == [0, 1, 2, 3]  # other warnings pass
    with pytest.raises(PythonException, match="numba could not compile"):
        rdd.mapPartitions(warn).collect()
