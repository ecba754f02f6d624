"""Where a sweep's points are measured: here, one after another (`LocalExecutor`, the
default), or as Ray tasks spread over a cluster (`RayExecutor`, `tvr run --executor ray`).

Either way the driver is the one writer: an executor yields each measured point as it
finishes and harness.run.sweep writes its row and MLflow run, so results.csv, resume and
the MLflow layout are the same whichever executor measured a point.

Ray is imported only here and only when the Ray executor is chosen.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from experiments.spec import Point
from harness.errors import BadInput
from harness.measure.machine import machine_facts
from harness.run import raywatch
from harness.run.board import Board
from harness.run.point import TIMED_RUNNERS, Measured, measure, resolve_device
from harness.run.rayaddress import check_address
from harness.runner import Context, Result
from harness.track.store import mask


class NoNode(RuntimeError):
    """No node of the cluster can take a point."""


Skip = Callable[[Point], bool]  # True: a sweep beside this one measured the point meanwhile


class LocalExecutor:
    """Every point in this process, one after another, in the suite's order."""

    name = "local"

    def facts(self, device: torch.device) -> dict[str, Any]:
        """This machine's facts, in every row."""
        return machine_facts(device)

    def params(self) -> dict[str, Any]:
        return {}

    def resolve_device(self, name: str) -> torch.device:
        return resolve_device(name)

    def run(self, points: list[Point], ctx: Context, max_memory: int | None,
            skip: Skip) -> Iterator[Measured]:
        for point in points:
            if not skip(point):
                yield measure(point, ctx, max_memory)

    def close(self) -> None:
        """Nothing to release."""


# ---------------------------------------------------------------- Ray


def _measure(point: Point, ctx: Context, max_memory: int | None, threads: int,
             board: Any) -> Measured:
    """The Ray task: measure one point on the worker it landed on, with `threads` torch
    threads (what the task reserved), and name the node in the facts."""
    import ray

    context = ray.get_runtime_context()
    node = f"{socket.gethostname()}/{context.get_node_id()[:12]}"
    board.started.remote(point.point_id, node)  # so a death mid-point can name the node
    torch.set_num_threads(threads)
    nice = _unnice()
    # the driver's context whole: its folder holds the shared caches and checkpoints (one
    # filesystem: this machine's nodes, or a cluster's shared disk)
    return measure(point, ctx, max_memory, machine_facts(ctx.device) | {"node": node,
                                                                        "nice": nice})


def _unnice() -> int:
    """Ray starts its workers at niceness 15 (so its own daemons come first): a point timed
    there loses its cores to any other job. Back to 0 where the worker may (root, or
    CAP_SYS_NICE); the row records the niceness it ran at either way."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current > 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        except PermissionError:
            return current  # an unprivileged worker keeps Ray's niceness, and says so
    return os.getpriority(os.PRIO_PROCESS, 0)


class RayExecutor:
    """Points as Ray tasks; rows come back to the driver as tasks finish.

    Resources: a timed point (TIMED_RUNNERS) asks for one GPU on a GPU run, else for every
    CPU of a node it is pinned to (round robin over the nodes); any other point asks for
    `cpus_per_point` CPUs (and one GPU on a GPU run) and uses that many torch threads. A task
    whose worker or node dies is retried once on another node, then becomes an error row
    naming the node. Stopping (Ctrl-C, SIGTERM) cancels every task not finished; the finished
    ones were yielded, hence written, as they came.
    """

    name = "ray"

    def __init__(self, address: str | None, cpus_per_point: int) -> None:
        if address:
            check_address(address)
        elif os.environ.get("RAY_ADDRESS"):  # where ray.init would go without --ray-address
            check_address(os.environ["RAY_ADDRESS"], "$RAY_ADDRESS")
        try:
            import ray
        except ImportError:
            raise BadInput("--executor ray: Ray is not installed here; "
                           "pip install 'tvr-bench[cluster]'") from None

        self.cpus_per_point = cpus_per_point
        self._turn = 0  # round robin of timed points over the nodes
        # A Ray instance started here ("local": a new one, never another user's that Ray
        # would find on this machine) is stopped with the run, whatever ends it; it listens
        # on loopback only (nothing of it answers another machine: it has no authentication)
        # and keeps its session (logs, sockets, spilled objects) in a folder of its own,
        # removed with it.
        here = address == "local" or not (address or os.environ.get("RAY_ADDRESS"))
        self._session = _session_folder() if here else None
        self._watchdog = raywatch.start(self._session) if here else None
        own = {"_node_ip_address": LOOPBACK, "_temp_dir": self._session} if here else {}
        try:
            with _masked_entrypoint(), _own_signals(), _loopback(here):
                ray.init(address="local" if here else address, include_dashboard=False,
                         log_to_driver=False, logging_level="ERROR", configure_logging=True,
                         **own)
        except (ConnectionError, RuntimeError, ValueError) as e:
            self._release_watchdog()
            self._remove_session()
            lines = [x.strip() for x in str(e).splitlines() if x.strip()] or [type(e).__name__]
            # Ray Client's "Initialization failure from server:" says why below (a traceback's
            # last line)
            first = (f"{lines[0]} {lines[-1]}" if lines[0].endswith(":") and len(lines) > 1
                     else lines[0])
            raise BadInput(f"--ray-address {address or '(local)'}: cannot join the cluster "
                           f"({first})") from None
        self._remote = ray.remote(max_retries=0)(_measure)
        self.board = ray.remote(num_cpus=0, max_restarts=-1)(Board).options(
            scheduling_strategy=self._head()).remote()

    def _head(self) -> Any:
        """The board goes to the head node, which lives as long as the cluster does (a
        driver on the head's host may be attached to another node's raylet)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        heads = [n for n in self.nodes() if "node:__internal_head__" in n["Resources"]]
        node = heads[0]["NodeID"] if heads else ray.get_runtime_context().get_node_id()
        return NodeAffinitySchedulingStrategy(node, soft=True)

    def _started_on(self, point_id: str) -> str | None:
        """Where the point last started, if the board can still say."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        try:
            return ray.get(self.board.node.remote(point_id), timeout=10)
        except (RayError, GetTimeoutError):
            return None

    def nodes(self) -> list[dict[str, Any]]:
        import ray

        return [n for n in ray.nodes() if n.get("Alive")]

    def resolve_device(self, name: str) -> torch.device:
        """"auto" is CUDA when the cluster has GPUs; "cuda" on a cluster without any is bad
        input (the driver itself may have no GPU)."""
        import ray

        gpus = ray.cluster_resources().get("GPU", 0)
        if name == "auto":
            return torch.device("cuda" if gpus else "cpu")
        if name == "cuda" and not gpus:
            raise BadInput("--device cuda: the Ray cluster has no GPU; use --device cpu")
        return torch.device(name)

    def facts(self, device: torch.device) -> dict[str, Any]:
        """In every row; each row adds the facts of the node that measured it."""
        return {"executor": "ray"}

    def params(self) -> dict[str, Any]:
        """The cluster as a whole, for the parent run."""
        import ray

        res = ray.cluster_resources()
        return {"ray_nodes": len(self.nodes()), "ray_cpus": int(res.get("CPU", 0)),
                "ray_gpus": int(res.get("GPU", 0)), "ray_version": ray.__version__}

    def _options(self, point: Point, device: torch.device, avoid: str | None
                 ) -> tuple[dict[str, Any], int]:
        """Ray task options and torch threads for one attempt at `point`; `avoid` is the
        "host/node-id" a first attempt died on (a retry goes to another node if one lives)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in self.nodes() if n["Resources"].get("CPU", 0) >= 1]
        if not alive:
            raise NoNode("no node of the Ray cluster with a CPU is alive")
        others = [n for n in alive if avoid is None or not avoid.endswith(n["NodeID"][:12])]
        nodes = others or alive
        self._turn += 1
        gpu = 1 if device.type == "cuda" else 0
        if point.runner in TIMED_RUNNERS and not gpu:
            node = nodes[self._turn % len(nodes)]
            cpus = max(1, int(node["Resources"].get("CPU", 1)))
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            return {"num_cpus": cpus, "scheduling_strategy": strategy}, cpus
        options: dict[str, Any] = {"num_cpus": self.cpus_per_point, "num_gpus": gpu}
        if avoid is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                nodes[self._turn % len(nodes)]["NodeID"], soft=True)
        return options, self.cpus_per_point

    def _submit(self, point: Point, ctx: Context, max_memory: int | None,
                avoid: str | None = None) -> Any:
        options, threads = self._options(point, ctx.device, avoid)
        return self._remote.options(**options).remote(point, ctx, max_memory, threads,
                                                       self.board)

    def run(self, points: list[Point], ctx: Context, max_memory: int | None,
            skip: Skip) -> Iterator[Measured]:
        import ray

        pending = {self._submit(p, ctx, max_memory): (p, 0) for p in points if not skip(p)}
        try:
            while pending:
                # a timeout, so a stop signal is handled within a second
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    point, attempt = pending.pop(ref)
                    measured, avoid = self._collect(ref, point, attempt)
                    if measured is None:
                        try:
                            pending[self._submit(point, ctx, max_memory, avoid)] = (point, 1)
                        except NoNode as e:  # nowhere to retry: the point's row says so
                            yield _failed(point, f"its node {avoid or '(unknown)'} died and "
                                          f"{e}", avoid)
                    elif not skip(point):
                        measured.facts["attempts"] = attempt + 1
                        yield measured
        finally:  # stopped (Ctrl-C, SIGTERM) or closed early: drop the points not finished
            for ref in pending:
                ray.cancel(ref, force=True)

    def _collect(self, ref: Any, point: Point, attempt: int
                 ) -> tuple[Measured | None, str | None]:
        """The finished task's Measured, or (None, node to avoid) when its worker or node
        died and it may be retried once."""
        import ray
        from ray.exceptions import RayError, RayTaskError

        try:
            return ray.get(ref), None
        except RayTaskError as e:  # run_point turns every exception into a row: a bug here
            return _failed(point, f"the Ray task failed: {e.cause!r}"), None
        except RayError as e:
            node = self._started_on(point.point_id)
            if attempt == 0:
                return None, node
            what = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            return _failed(point, f"{type(e).__name__} on node {node or '(unknown)'}, after one "
                           f"retry elsewhere: {what}", node), None

    def close(self) -> None:
        import ray

        try:
            ray.shutdown()
        finally:
            self._release_watchdog()
            self._remove_session()

    def _remove_session(self) -> None:
        """The session folder of a Ray instance started here, once Ray's shutdown stopped
        what wrote in it; what a straggler writes after this, the watchdog removes once it
        stopped the straggler (raywatch.watch), so a file in use here is not an error."""
        if self._session is not None:
            shutil.rmtree(self._session, ignore_errors=True)
            self._session = None

    def _release_watchdog(self) -> None:
        """Ray's own shutdown done (or failed): the watchdog stops whatever it left."""
        if self._watchdog is not None and self._watchdog.stdin is not None:
            self._watchdog.stdin.close()
            self._watchdog = None


LOOPBACK = "127.0.0.1"  # the address a Ray instance started here listens on
# Ray's switch for a single machine (its default on Windows and macOS): with it off,
# ray.init keeps 127.0.0.1 as the node's address instead of turning it into the machine's
# address on the network, and the GCS, raylet, agents and workers listen there.
_CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextmanager
def _loopback(here: bool) -> Iterator[None]:
    """While a Ray instance starts here, Ray takes this machine for a single node: the
    processes it starts inherit the switch, and the driver's own reading of it (read by Ray
    when imported, perhaps before) says so; as before afterwards."""
    if not here:
        yield
        return
    from ray._private import ray_constants

    before_env, before = os.environ.get(_CLUSTER_SWITCH), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_CLUSTER_SWITCH] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        if before_env is None:
            os.environ.pop(_CLUSTER_SWITCH, None)
        else:
            os.environ[_CLUSTER_SWITCH] = before_env


def _session_folder() -> str:
    """A folder of this run's own for the Ray instance it starts (Ray's default, /tmp/ray,
    is shared by every instance and kept after them), where Ray would put its own: under
    $RAY_TMPDIR, else the system's temporary folder. Short: Ray's socket paths go in it."""
    base = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
    return tempfile.mkdtemp(prefix=f"{raywatch.SESSION_PREFIX}{os.getpid()}-", dir=base)


@contextmanager
def _masked_entrypoint() -> Iterator[None]:
    """Ray records the driver's command line as its job's entrypoint (kept by the cluster,
    shown by `ray list jobs` and its dashboard): with the password of a --tracking-uri on it.
    While joining, Ray's helper that reads the command line returns it masked."""
    from ray._private import utils

    original = getattr(utils, "get_entrypoint_name", None)
    if original is None:  # another Ray version: nothing to mask
        yield
        return
    utils.get_entrypoint_name = lambda: mask(original())
    try:
        yield
    finally:
        utils.get_entrypoint_name = original


@contextmanager
def _own_signals() -> Iterator[None]:
    """ray.init, starting a local instance, makes SIGTERM exit 1 at once: the harness's own
    handlers come back, so a stop exits 143/130 and marks the parent run KILLED, and the
    instance is stopped on the way out (close)."""
    import signal

    from harness.signals import arm

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in old.items():
            if handler is not None:
                signal.signal(s, handler)
        arm()  # a stop from here on raises, so the Ray instance is shut down with the run


def _failed(point: Point, message: str, node: str | None = None) -> Measured:
    facts = {"node": node} if node else {}
    return Measured(point, Result({}, status="error", message=message), None, facts)


def make_executor(name: str, address: str | None, cpus_per_point: int | None
                  ) -> LocalExecutor | RayExecutor:
    """The executor `tvr run --executor NAME` asked for, connected (Ray) before any point
    runs; BadInput for options that make no sense together."""
    if name == "local":
        for option, value in (("--ray-address", address), ("--cpus-per-point", cpus_per_point)):
            if value is not None:
                raise BadInput(f"{option} needs --executor ray")
        return LocalExecutor()
    if name != "ray":
        raise BadInput(f"unknown executor {name!r}; valid: local, ray")
    cpus_per_point = cpus_per_point or 1
    executor = RayExecutor(address, cpus_per_point)
    most = max((n["Resources"].get("CPU", 0) for n in executor.nodes()), default=0)
    if cpus_per_point > most:
        executor.close()
        raise BadInput(f"--cpus-per-point {cpus_per_point}: no node of the cluster has that "
                       f"many CPUs (the largest has {most:.0f})")
    return executor
