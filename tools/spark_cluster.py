"""A Spark standalone cluster on 127.0.0.1 for tests and benchmarks, and an environment for its executors.

    .venv/bin/python tools/spark_cluster.py start [--workers 2] [--cores 1] [--memory 2g]
    .venv/bin/python tools/spark_cluster.py status
    .venv/bin/python tools/spark_cluster.py stop
    .venv/bin/python tools/spark_cluster.py executor-env     # prints the executors' python

A master and ``--workers`` workers, started with pyspark's own ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), each in its own
process group so that stopping the group also ends the executors and Python workers it
started. Ports are free ones found at start; logs, work directories and the state file
live in one directory (``--dir``, default ``$TMPDIR/kproto-spark-cluster-$USER``),
removed by ``stop``. ``start`` prints the master URL.

``executor-env`` builds a wheel of this checkout and installs it into a virtualenv
(``build/executor-env``) beside pyarrow, numpy and pandas of the driver's versions:
the executors get kproto the way docs/analyze.md tells users to ship it, never from
the source tree. The dependencies are installed once; the wheel every time.
"""

from __future__ import annotations

import argparse
import getpass
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"
DEFAULT_DIR = Path(tempfile.gettempdir()) / f"kproto-spark-cluster-{getpass.getuser()}"
EXECUTOR_ENV = ROOT / "build" / "executor-env"
# Packages the executors' Python needs besides kproto: pyspark's mapInArrow imports pandas.
EXECUTOR_PACKAGES = ("pyarrow", "numpy", "pandas")


class ClusterError(RuntimeError):
    pass


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's choice for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def daemon_environment() -> dict[str, str]:
    """The environment of the master and workers (and so of the executors they start).

    No PYTHONPATH: executors must find kproto in their own environment, not in this checkout.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_HOME=str(spark_home()),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_NO_DAEMONIZE="1",
        # No REST submission server: its fixed port (6066) would collide between clusters.
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    return env


class Cluster:
    """A standalone master and workers whose processes, logs and work directories live under ``directory``."""

    def __init__(self, directory: Path | str = DEFAULT_DIR) -> None:
        self.directory = Path(directory)
        self.state: dict = {}
        self._children: dict[int, subprocess.Popen] = {}  # daemons started by this process, to reap
        state_path = self.directory / STATE_FILE
        if state_path.exists():
            self.state = json.loads(state_path.read_text())

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.state['master_port']}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.state['master_web_port']}"

    def start(self, workers: int = 2, cores: int = 1, memory: str = "2g", timeout: float = 180.0) -> str:
        """Start the master and the workers; return once every worker is registered (else stop and raise)."""
        if self.state.get("processes") and self.alive():
            raise ClusterError(f"a cluster already runs from {self.directory} ({self.url}): stop it first")
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        self.state = {"master_port": free_port(), "master_web_port": free_port(), "workers": workers, "processes": []}
        try:
            self._launch(
                "master",
                [
                    MASTER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.state["master_port"]),
                    "--webui-port",
                    str(self.state["master_web_port"]),
                ],
            )
            # Workers retry a master that is not up only after 5-15 s: start them once it listens.
            self._wait(lambda: _listening(self.state["master_port"]), timeout, "the master to listen")
            for index in range(workers):
                work = self.directory / f"work-{index}"
                work.mkdir(exist_ok=True)
                self._launch(
                    f"worker-{index}",
                    [
                        WORKER_CLASS,
                        self.url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        str(cores),
                        "--memory",
                        memory,
                        "--work-dir",
                        str(work),
                        "--webui-port",
                        str(free_port()),
                    ],
                )
            self._wait(
                lambda: (self.master_status() or {}).get("aliveworkers") == workers,
                timeout,
                f"{workers} worker(s) to register",
            )
        except BaseException:
            self.stop(remove=False)
            raise
        return self.url

    def _launch(self, name: str, arguments: list[str]) -> None:
        log = self.directory / "logs" / f"{name}.log"
        with open(log, "ab") as output:
            # A session of its own: the process group holds the daemon, its executors and their Python workers.
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *arguments],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=daemon_environment(),
                cwd=self.directory,
                start_new_session=True,
            )
        self._children[process.pid] = process
        self.state["processes"].append({"name": name, "pid": process.pid, "log": str(log)})
        (self.directory / STATE_FILE).write_text(json.dumps(self.state, indent=1))

    def master_status(self) -> dict | None:
        """The master's JSON status page, or None when it does not answer."""
        try:
            with urllib.request.urlopen(self.web_url + "/json/", timeout=5) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError):
            return None

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p["name"] for p in self.state["processes"] if not self._group_alive(p["pid"])]
            if dead:
                raise ClusterError(f"{', '.join(dead)} exited while waiting for {what}:\n{self.log_tails()}")
            if ready():
                return
            time.sleep(0.5)
        raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}:\n{self.log_tails()}")

    def log_tails(self, lines: int = 15) -> str:
        tails = []
        for process in self.state.get("processes", []):
            text = (
                Path(process["log"]).read_text(errors="replace").splitlines() if Path(process["log"]).exists() else []
            )
            tails.append(f"--- {process['log']}\n" + "\n".join(text[-lines:]))
        return "\n".join(tails)

    def alive(self) -> list[str]:
        """Names of the processes whose group still has a member."""
        return [p["name"] for p in self.state.get("processes", []) if self._group_alive(p["pid"])]

    def _group_alive(self, group: int) -> bool:
        child = self._children.get(group)
        if child is not None:
            child.poll()  # reap the leader if it exited, else it lingers as a zombie of the group
        return _group_alive(group)

    def stop(self, remove: bool = True, grace: float = 10.0) -> None:
        """End every process group this cluster started (TERM, then KILL after ``grace`` s); then remove the dir."""
        groups = [p["pid"] for p in reversed(self.state.get("processes", []))]
        for group in groups:
            _signal_group(group, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(self._group_alive(g) for g in groups):
            time.sleep(0.2)
        for group in groups:
            _signal_group(group, signal.SIGKILL)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(self._group_alive(g) for g in groups):
            time.sleep(0.1)
        left = [g for g in groups if self._group_alive(g)]
        if left:
            raise ClusterError(f"process groups {left} survived SIGKILL")
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)
        self.state["processes"] = []


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _group_alive(group: int) -> bool:
    """Whether a process group has a member (a zombie leader counts: callers reap their children first)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- the executors' environment
def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"{what} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def build_wheel(dist: Path) -> Path:
    """A wheel of this checkout, as docs/analyze.md builds it (``pip wheel --no-deps``)."""
    shutil.rmtree(dist, ignore_errors=True)
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        "building the kproto wheel",
    )
    wheels = sorted(dist.glob("kproto-*.whl"))
    if len(wheels) != 1:
        raise ClusterError(f"expected one kproto wheel in {dist}, found {wheels}")
    return wheels[0]


def executor_env(env: Path = EXECUTOR_ENV) -> Path:
    """A virtualenv with a freshly built kproto wheel and the driver's pyarrow, numpy and pandas; its python."""
    from importlib.metadata import version

    python = env / "bin" / "python"
    pins = [f"{name}=={version(name)}" for name in EXECUTOR_PACKAGES]
    stamp = env / ".kproto-executor-deps"
    if not python.exists() or not stamp.exists() or stamp.read_text() != " ".join(pins):
        shutil.rmtree(env, ignore_errors=True)
        # The base interpreter of this venv: the executors' Python must be the driver's version.
        _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(env)], "creating the venv")
        _run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
            "installing the executors' dependencies",
        )
        stamp.write_text(" ".join(pins))
    wheel = build_wheel(env.parent / "executor-dist")
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--force-reinstall",
            str(wheel),
        ],
        "installing the kproto wheel",
    )
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop", "status", "executor-env"])
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(os.environ.get("KPROTO_CLUSTER_DIR", DEFAULT_DIR)),
        help="state, logs and work directories (default: %(default)s)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="2g", help="memory per worker (executors' heaps come out of it)")
    args = parser.parse_args(argv)
    if args.command == "executor-env":
        print(executor_env())
        return 0
    cluster = Cluster(args.dir)
    if args.command == "start":
        print(cluster.start(workers=args.workers, cores=args.cores, memory=args.memory))
        return 0
    if args.command == "stop":
        if not cluster.state.get("processes"):
            print(f"no cluster in {args.dir}")
            return 0
        cluster.stop()
        print("stopped")
        return 0
    if not cluster.state.get("processes"):
        print(f"no cluster in {args.dir}")
        return 1
    status = cluster.master_status()
    alive = cluster.alive()
    print(
        f"{cluster.url}: processes alive: {', '.join(alive) or 'none'}; master: "
        + (f"{status['aliveworkers']} worker(s) alive, {status['cores']} core(s)" if status else "not answering")
    )
    return 0 if status and len(alive) == len(cluster.state["processes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
