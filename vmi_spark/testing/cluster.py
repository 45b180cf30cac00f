"""A throw-away Spark standalone cluster on the loopback interface, for tests.

Starts one master and N workers with the pyspark distribution's own launcher
(``spark-class org.apache.spark.deploy.master.Master ...`` and
``... deploy.worker.Worker ...``), waits until every worker has registered, and stops
them by PID (SIGTERM, then SIGKILL) on exit::

    with SparkCluster(num_workers=2, scripts_dir="docker") as cluster:
        subprocess.run(["spark-submit", "--master", cluster.master_url, ...])

With ``scripts_dir`` the daemons are started through ``start-master.sh`` and
``start-worker.sh`` in that directory (the repository's ``docker/`` scripts, which the
compose services also run), so the test exercises the same start logic as the
containers. Without it, the same ``spark-class`` command lines are run directly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> str | None:
    """SPARK_HOME: the environment's, else the pip-installed pyspark package directory."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    try:
        import pyspark
    except ImportError:
        return None
    return os.path.dirname(pyspark.__file__)


def find_spark_class() -> str | None:
    """The ``spark-class`` launcher: next to ``sys.executable`` (a venv with pyspark),
    in pyspark's own ``bin/`` (SPARK_HOME = the pyspark package), or on PATH."""
    candidates = [Path(sys.executable).parent / "spark-class"]
    try:
        import pyspark

        candidates.append(Path(os.path.dirname(pyspark.__file__)) / "bin" / "spark-class")
    except ImportError:
        pass
    for c in candidates:
        if c.is_file():
            return str(c)
    return shutil.which("spark-class")


def master_command(spark_class: str, host: str, port: int, webui_port: int) -> list[str]:
    """The master's command line (what ``docker/start-master.sh`` runs)."""
    return [spark_class, MASTER_CLASS, "--host", host, "--port", str(port),
            "--webui-port", str(webui_port)]


def worker_command(spark_class: str, master_url: str, host: str, cores: int, memory: str,
                   webui_port: int) -> list[str]:
    """A worker's command line (what ``docker/start-worker.sh`` runs)."""
    return [spark_class, WORKER_CLASS, master_url, "--host", host, "--cores", str(cores),
            "--memory", memory, "--webui-port", str(webui_port)]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that were free a moment ago (bound together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _stop_pid(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        pass


class SparkCluster:
    """One master and ``num_workers`` workers on ``host``; a context manager.

    Attributes after :meth:`start`: ``master_url`` (``spark://host:port``), ``webui_url``,
    ``pids`` (master first), ``log_dir`` (each daemon's stdout/stderr).
    """

    def __init__(self, num_workers: int = 2, cores: int = 1, memory: str = "1g",
                 host: str = "127.0.0.1", scripts_dir: str | os.PathLike | None = None,
                 spark_class: str | None = None, timeout: float = 120.0,
                 daemon_memory: str = "512m", stop_timeout: float = 15.0):
        self.num_workers = num_workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self.scripts_dir = Path(scripts_dir) if scripts_dir is not None else None
        self.spark_class = spark_class or find_spark_class()
        self.timeout = timeout
        self.daemon_memory = daemon_memory
        self.stop_timeout = stop_timeout
        self.master_url: str | None = None
        self.webui_url: str | None = None
        self._procs: list[subprocess.Popen] = []
        self._logs: list[Path] = []
        self._tmp: str | None = None
        self.log_dir: Path | None = None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    # -- starting ---------------------------------------------------------------------
    def _env(self, name: str) -> dict[str, str]:
        assert self._tmp is not None
        work = Path(self._tmp) / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPARK_MASTER_", "SPARK_WORKER_"))}
        env.update(SPARK_LOCAL_IP=self.host, SPARK_WORKER_DIR=str(work),
                   SPARK_LOG_DIR=str(self.log_dir), SPARK_PID_DIR=str(self.log_dir),
                   SPARK_DAEMON_MEMORY=self.daemon_memory, SPARK_CLASS=self.spark_class or "")
        home = spark_home()
        if home:  # else the launcher's find-spark-home asks whatever python3 is on PATH
            env["SPARK_HOME"] = home
        return env

    def _launch(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        assert self.log_dir is not None
        log = self.log_dir / f"{name}.log"
        self._logs.append(log)
        with open(log, "wb") as fh:
            proc = subprocess.Popen(list(argv), env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self._procs.append(proc)

    def start(self) -> SparkCluster:
        if self.spark_class is None:
            raise FileNotFoundError("spark-class not found (is pyspark installed?)")
        self._tmp = tempfile.mkdtemp(prefix="vmi-spark-cluster-")
        self.log_dir = Path(self._tmp) / "logs"
        self.log_dir.mkdir()
        try:
            port, webui, *worker_uis = free_ports(2 + self.num_workers, self.host)
            self.master_url = f"spark://{self.host}:{port}"
            self.webui_url = f"http://{self.host}:{webui}"
            env = self._env("master")
            if self.scripts_dir is not None:
                env.update(SPARK_MASTER_HOST=self.host, SPARK_MASTER_PORT=str(port),
                           SPARK_MASTER_WEBUI_PORT=str(webui))
                argv = ["bash", str(self.scripts_dir / "start-master.sh")]
            else:
                argv = master_command(self.spark_class, self.host, port, webui)
            self._launch("master", argv, env)
            self._wait(lambda state: True, "master web UI")
            for i, ui in enumerate(worker_uis):
                name = f"worker{i + 1}"
                env = self._env(name)
                if self.scripts_dir is not None:
                    env.update(SPARK_MASTER_URL=self.master_url, SPARK_WORKER_HOST=self.host,
                               SPARK_WORKER_CORES=str(self.cores),
                               SPARK_WORKER_MEMORY=self.memory,
                               SPARK_WORKER_WEBUI_PORT=str(ui))
                    argv = ["bash", str(self.scripts_dir / "start-worker.sh")]
                else:
                    argv = worker_command(self.spark_class, self.master_url, self.host,
                                          self.cores, self.memory, ui)
                self._launch(name, argv, env)
            self._wait(lambda state: state.get("aliveworkers", 0) >= self.num_workers,
                       f"{self.num_workers} workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def master_state(self) -> dict:
        """The master's ``/json/`` state (status, aliveworkers, workers, ...)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def _wait(self, ready, what: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for proc, log in zip(self._procs, self._logs):
                if proc.poll() is not None:
                    raise RuntimeError(f"{log.stem} exited with status {proc.returncode} "
                                       f"while waiting for {what}:\n{self._tail(log)}")
            try:
                state = self.master_state()
                if state.get("status") == "ALIVE" and ready(state):
                    return state
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {self.timeout:.0f}s waiting for {what}:\n"
                                   + "\n".join(self._tail(log) for log in self._logs))
            time.sleep(0.5)

    @staticmethod
    def _tail(log: Path, n: int = 20) -> str:
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return f"--- {log.name}\n" + "\n".join(lines[-n:])

    # -- stopping ---------------------------------------------------------------------
    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` (1-based) with its executors: its whole process group.

        Executors are children of the worker's JVM, in the worker's process group, so
        this is what losing a machine looks like to the driver.
        """
        proc = self._procs[index]  # _procs[0] is the master
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def stop(self) -> None:
        """Stop workers, then the master, by PID: SIGTERM, then SIGKILL after a timeout."""
        for proc in reversed(self._procs):
            _stop_pid(proc, self.stop_timeout)
        self._procs.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":  # python -m vmi_spark.testing.cluster [N]: run until Ctrl-C
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with SparkCluster(num_workers=n) as c:
        print(f"master {c.master_url}  web UI {c.webui_url}  pids {c.pids}", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
