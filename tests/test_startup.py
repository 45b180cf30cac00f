"""Start-up work the job and the in-memory selector avoid (issue 38, item 4).

Each test checks what the change does (which copy of PySpark is imported, which modules
a job's progress lines pull in, how many threads the in-memory selector's steps use),
not how long anything takes: the figures are in benchmarks/peers.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib.metadata import version

import numpy as np
import pytest

from vmi_spark._deps import prefer_installed_pyspark


def _python(code: str, env: dict[str, str] | None = None) -> str:
    """What ``python -c code`` prints (stripped), in a fresh process; its exit must be 0."""
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _layout(tmp_path, py4j_version: str):
    """A pip-style site directory whose ``pyspark`` package holds spark-submit's zips."""
    site = tmp_path / "site"
    home = site / "pyspark"
    lib = home / "python" / "lib"
    lib.mkdir(parents=True)
    (home / "__init__.py").write_text("")
    zips = [str(lib / "pyspark.zip"), str(lib / f"py4j-{py4j_version}-src.zip")]
    for z in zips:
        with zipfile.ZipFile(z, "w") as fh:
            fh.writestr("placeholder.txt", "")
    return site, home, zips


def test_spark_submits_zips_go_behind_the_package_they_came_from(tmp_path):
    site, home, (pyspark_zip, py4j_zip) = _layout(tmp_path, version("py4j"))
    path = ["/script", pyspark_zip, py4j_zip, "/stdlib", str(site)]
    moved = prefer_installed_pyspark(path, str(home))
    assert moved == [pyspark_zip, py4j_zip]
    assert path == ["/script", "/stdlib", str(site), pyspark_zip, py4j_zip]


def test_a_py4j_zip_of_another_version_stays_first(tmp_path):
    site, home, (pyspark_zip, py4j_zip) = _layout(tmp_path, "0.0.0")
    path = [pyspark_zip, py4j_zip, str(site)]
    assert prefer_installed_pyspark(path, str(home)) == [pyspark_zip]
    assert path == [py4j_zip, str(site), pyspark_zip]


def test_zips_stay_when_the_path_would_find_another_pyspark(tmp_path):
    site, home, zips = _layout(tmp_path, version("py4j"))
    other = tmp_path / "other"
    (other / "pyspark").mkdir(parents=True)
    (other / "pyspark" / "__init__.py").write_text("")
    path = [*zips, str(other), str(site)]  # another venv's pyspark comes first
    assert prefer_installed_pyspark(path, str(home)) == []
    assert path == [*zips, str(other), str(site)]
    path = [*zips]  # no package at all: the zips are all there is
    assert prefer_installed_pyspark(path, str(home)) == [] and path == zips


def test_a_spark_distribution_is_left_alone(tmp_path):
    home = tmp_path / "spark-4.0.0-bin"
    (home / "python" / "lib").mkdir(parents=True)  # no __init__.py: not a pip package
    path = [str(home / "python" / "lib" / "pyspark.zip"), "/site"]
    assert prefer_installed_pyspark(path, str(home)) == []
    assert prefer_installed_pyspark(list(path), "") == []


def test_the_entry_point_imports_the_installed_pyspark_under_spark_submits_path():
    """The job's entry point with spark-submit's path: PySpark comes from the package."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    lib = os.path.join(home, "python", "lib")
    if not os.path.isfile(os.path.join(lib, "pyspark.zip")):
        pytest.skip("this PySpark has no zipped copy (not a pip install)")
    zips = [os.path.join(lib, z) for z in sorted(os.listdir(lib)) if z.endswith(".zip")]
    entry = os.path.join(os.path.dirname(__file__), "..", "jobs", "select_features.py")
    code = ("import runpy, sys\nsys.argv = ['select_features.py', '--help']\n"
            f"try:\n    runpy.run_path({entry!r}, run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "import pyspark\nprint(pyspark.__file__)")
    env = dict(os.environ, SPARK_HOME=home,
               PYTHONPATH=os.pathsep.join([*zips, os.environ.get("PYTHONPATH", "")]))
    got = _python(code, env).splitlines()[-1]
    assert ".zip" not in got and os.path.dirname(os.path.realpath(got)) == \
        os.path.realpath(home)


def test_job_progress_lines_do_not_import_pyspark_ml():
    """The job logs its steps with :class:`vmi_spark.progress.StepLogger`, which the
    estimator shares, without importing ``pyspark.ml`` (most of a second)."""
    code = ("import sys\nfrom vmi_spark import job\n"
            "logger = job._log_step()\n"
            "print('pyspark.ml' in sys.modules)")
    assert _python(code) == "False"
    from vmi_spark.ml import StepLogger
    from vmi_spark.progress import StepLogger as progress_logger

    assert StepLogger is progress_logger


def test_numba_is_imported_at_the_first_compiled_loop_not_with_the_job():
    """The method registry imports the kernels module; numba (a third of a second) waits
    for the first loop that runs, which then runs compiled."""
    pytest.importorskip("numba")
    code = ("import sys\nimport numpy as np\nfrom vmi_spark import job\n"
            "from vmi_spark.core import kernels\n"
            "before = 'numba' in sys.modules\n"
            "got = kernels.feature_counts(np.array([[1, 0, 1]], np.uint8), np.array([0, 1, 1]),"
            " 2, 2)\n"
            "print(before, 'numba' in sys.modules, kernels.BACKEND, got.tolist(),"
            " kernels.feature_counts.impl.__module__)")
    assert _python(code) == ("False True numba [[[0, 1], [1, 1]]] "
                             "vmi_spark.core.kernels_numba")


def test_the_compiled_loops_are_warmed_on_a_daemon_thread():
    pytest.importorskip("numba")
    code = ("import sys\nfrom vmi_spark.core import kernels\n"
            "t = kernels.warm()\nassert t.daemon and t.name == 'vmi_spark-warm-kernels'\n"
            "t.join(120)\n"
            "print('numba' in sys.modules, kernels.feature_counts.impl.__module__)")
    assert _python(code) == "True vmi_spark.core.kernels_numba"
    from vmi_spark.core import kernels

    with kernels.using("numpy"):
        assert kernels.warm() is None


def test_report_imports_are_warmed_on_a_daemon_thread():
    pytest.importorskip("matplotlib")
    code = ("import sys, threading\nfrom vmi_spark import job\n"
            "job._warm_report_imports()\n"
            "t = [t for t in threading.enumerate() if t.name == 'vmi_spark-warm-imports']\n"
            "assert len(t) == 1 and t[0].daemon\nt[0].join(120)\n"
            "print('matplotlib.figure' in sys.modules, "
            "'matplotlib.backends.backend_agg' in sys.modules)")
    assert _python(code) == "True True"


def test_inmemory_selector_runs_its_steps_on_the_process_cores(monkeypatch):
    """The scikit-learn selector's blocks go to a pool of process_cores() threads, and
    the selection is the one block-at-a-time selection bit for bit."""
    pytest.importorskip("sklearn")
    from vmi_spark.core import inmemory
    from vmi_spark.sklearn import VMIFeatureSelector

    pools = []

    class Recording(inmemory.ThreadPoolExecutor):
        def __init__(self, n):
            pools.append(n)
            super().__init__(n)

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 20_000)
    X = rng.integers(0, 4, (20_000, 8))
    X[:, 3] = (y + rng.integers(0, 2, 20_000)) % 4
    X[:, 6] = (y * 2 + rng.integers(0, 3, 20_000)) % 4
    monkeypatch.setattr(inmemory, "ThreadPoolExecutor", Recording)
    got = {}
    for cores in (1, 3):
        monkeypatch.setattr(inmemory, "process_cores", lambda c=cores: c)
        for method in ("vmi_naive", "vmi_pairwise"):
            sel = VMIFeatureSelector(n_features_to_select=4, method=method).fit(X, y)
            got[cores, method] = (list(sel.selected_features_), list(sel.scores_))
    assert pools == [3, 3]  # one thread: no pool
    for method in ("vmi_naive", "vmi_pairwise"):
        assert got[1, method] == got[3, method]
        assert got[1, method][0][:2] in ([3, 6], [6, 3])
    # n_jobs: 1 runs in the calling thread, a number is that many, -1 is the default
    for n_jobs, want in ((1, []), (2, [2]), (-1, [3]), (None, [3])):
        pools.clear()
        sel = VMIFeatureSelector(n_features_to_select=4, n_jobs=n_jobs).fit(X, y)
        assert pools == want, n_jobs
        assert (list(sel.selected_features_), list(sel.scores_)) == got[1, "vmi_naive"]
    with pytest.raises(ValueError, match="n_jobs must be a number of threads"):
        VMIFeatureSelector(n_jobs=0).fit(X, y)


def test_process_cores_follows_the_affinity():
    from vmi_spark.core.resources import _cpu_quota, process_cores

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    quota = _cpu_quota("/")
    cores = len(os.sched_getaffinity(0))
    assert process_cores() == (min(cores, quota) if quota else cores)


def test_missing_label_check_reads_arrays_at_once():
    from vmi_spark.sklearn import _missing

    assert not _missing(np.arange(5)).any() and not _missing(np.array([True, False])).any()
    assert _missing(np.array([1.0, np.nan])).tolist() == [False, True]
    assert not _missing(np.array([1.0, 2.0])).any()
    assert _missing(np.array(["a", None], dtype=object)).tolist() == [False, True]
    assert not _missing(np.array(["a", "b"])).any()


def test_a_selection_that_cannot_fit_is_refused_before_reading():
    """SPEC_CMI's D x D tables against the memory available: refused in one line naming
    the method, the bytes and what to change; a selection that fits passes."""
    import vmi_spark.params  # noqa: F401 - the front ends' names of the parameters
    from vmi_spark.core.criteria import criterion
    from vmi_spark.core.planning import check_fits
    from vmi_spark.core.resources import available_memory
    from vmi_spark.errors import ParameterError

    assert criterion("spec_cmi").driver_bytes(30_000) == 3 * 8 * 30_000**2
    assert all(criterion(m).driver_bytes(30_000) == 0 for m in ("vmi_naive", "mrmr"))
    with pytest.raises(ParameterError) as err:
        check_fits("spec_cmi", 30_000, available=16 * 2**30)
    msg = err.value.phrase("cli")
    assert "spec_cmi on 30,000 features needs at least 20.1 GiB" in msg
    assert "16.0 GiB available" in msg and "(--exclude)" in msg and "another --method" in msg
    assert "(excludeCols)" in err.value.phrase("ml") and "(exclude)" in err.value.phrase("sklearn")
    assert "\n" not in msg
    check_fits("spec_cmi", 30_000, available=21 * 2**30)  # fits
    check_fits("vmi_naive", 10**7, available=1)  # nothing D x D: nothing to refuse
    have = available_memory()
    assert have is None or 0 < have <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_the_selectors_refuse_it_before_reading(monkeypatch, set_limits):
    """The scikit-learn selector refuses it before encoding X (the Spark front ends call
    the same check before their first pass: tests/test_job.py)."""
    pytest.importorskip("sklearn")
    from vmi_spark.core import planning
    from vmi_spark.sklearn import VMIFeatureSelector

    set_limits(driver_available_bytes=1000)
    monkeypatch.setattr(planning, "build_plan", None)  # reading would fail differently
    X = np.zeros((10, 7))
    with pytest.raises(ValueError, match=r"spec_cmi on 7 features needs at least .* "
                       r"another method"):
        VMIFeatureSelector(method="spec_cmi").fit(X, np.arange(10) % 2)


def _fake_root(tmp_path, cgroup: str, files: dict[str, str], meminfo_kb: int | None = None):
    """A made-up /proc and /sys/fs/cgroup under ``tmp_path`` for :mod:`.resources`."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup)
    if meminfo_kb is not None:
        (tmp_path / "proc" / "meminfo").write_text(
            f"MemTotal:       99999999 kB\nMemAvailable:   {meminfo_kb} kB\n")
    for rel, text in files.items():
        path = tmp_path / "sys" / "fs" / "cgroup" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def test_memory_and_cores_are_held_to_the_control_group_v2(tmp_path):
    from vmi_spark.core.resources import _cpu_quota, available_memory, process_cores

    root = _fake_root(tmp_path, "0::/pod/driver\n", {
        "pod/driver/memory.max": "8589934592\n", "pod/driver/memory.current": "1073741824\n",
        "pod/driver/cpu.max": "150000 100000\n"}, meminfo_kb=200 * 2**20)
    assert available_memory(root) == 7 * 2**30  # the group's room, not the host's 200 GiB
    assert _cpu_quota(root) == 2  # 1.5 cores, rounded up
    assert process_cores(root) == min(2, len(os.sched_getaffinity(0)))
    free = _fake_root(tmp_path / "b", "0::/\n", {"memory.max": "max\n",
                                                  "cpu.max": "max 100000\n"}, meminfo_kb=1024)
    assert available_memory(free) == 2**20 and _cpu_quota(free) is None


def test_memory_and_cores_are_held_to_the_control_group_v1(tmp_path):
    from vmi_spark.core.resources import _cpu_quota, available_memory

    cgroup = "4:memory:/yarn/c1\n2:cpu,cpuacct:/yarn/c1\n0::/\n"
    root = _fake_root(tmp_path, cgroup, {
        "memory/yarn/c1/memory.limit_in_bytes": str(4 * 2**30),
        "memory/yarn/c1/memory.usage_in_bytes": str(3 * 2**30),
        "cpu,cpuacct/yarn/c1/cpu.cfs_quota_us": "300000", "cpu,cpuacct/yarn/c1/cpu.cfs_period_us": "100000"},
        meminfo_kb=64 * 2**20)
    assert available_memory(root) == 2**30 and _cpu_quota(root) == 3
    # no limit (about 2^63), no quota (-1): the machine's figures
    unlimited = _fake_root(tmp_path / "b", cgroup, {
        "memory/yarn/c1/memory.limit_in_bytes": str(2**63 - 4096),
        "cpu,cpuacct/yarn/c1/cpu.cfs_quota_us": "-1", "cpu,cpuacct/yarn/c1/cpu.cfs_period_us": "100000"},
        meminfo_kb=64 * 2**20)
    assert available_memory(unlimited) == 64 * 2**30 and _cpu_quota(unlimited) is None
    # a container that sees only its own group, mounted at the top of the controller
    own = _fake_root(tmp_path / "c", "4:memory:/docker/abc\n", {
        "memory/memory.limit_in_bytes": str(2**31), "memory/memory.usage_in_bytes": "0"})
    assert available_memory(own) == 2**31
    assert available_memory(str(tmp_path / "nothing")) is None
