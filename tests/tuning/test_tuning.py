"""MetaSchedule tuning: one database per target, reuse without trials, sharing, RPC measurement.

The tuning tests share one xdist group: the first `TuneContext` in a process imports TVM's tensor
intrinsics (30-60 s here), so they pay for it once. Each tunes a tiny matmul with a few trials.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from tfcheck.compiler.schedules.apply import RULE_ATTR  # noqa: E402
from tfcheck.compiler.targets import host_cpu_target  # noqa: E402
from tfcheck.compiler.tuning import (  # noqa: E402
    RpcConfig,
    default_database_root,
    target_database_dir,
    tune,
    tune_module,
)

TRIALS = 4


def _dense_relu(rows: int, inner: int, cols: int) -> tvm.IRModule:
    """`relu(x @ w)` with static shapes: one fused MetaSchedule task per shape."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((rows, inner), "float32"))
    w = relax.Var("w", R.Tensor((inner, cols), "float32"))
    with builder.function("main", [x, w]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.relu(relax.op.matmul(x, w)))
        builder.emit_func_output(out)
    return builder.get()


def _two_denses(rows: int, inner: int, cols: int, cols2: int) -> tvm.IRModule:
    """A second "model" that shares the first layer's shapes with `_dense_relu` and adds one."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((rows, inner), "float32"))
    w = relax.Var("w", R.Tensor((inner, cols), "float32"))
    w2 = relax.Var("w2", R.Tensor((cols, cols2), "float32"))
    with builder.function("main", [x, w, w2]):
        with builder.dataflow():
            hidden = builder.emit(relax.op.nn.relu(relax.op.matmul(x, w)))
            out = builder.emit_output(relax.op.matmul(hidden, w2))
        builder.emit_func_output(out)
    return builder.get()


def _target(**changes: object) -> tvm.target.Target:
    return tvm.target.Target({**host_cpu_target(), "num-cores": 2, **changes})


def _run(mod: tvm.IRModule, target: tvm.target.Target, *arrays: np.ndarray) -> np.ndarray:
    machine = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    return machine["main"](*(tvm.runtime.tensor(a) for a in arrays)).numpy()


def test_each_target_gets_its_own_database_folder(tmp_path: Path) -> None:
    host = target_database_dir(tmp_path, _target())
    assert host == target_database_dir(tmp_path, _target())
    assert host.parent == tmp_path
    assert host.name.startswith(f"llvm-{host_cpu_target()['mcpu']}-")
    others = {target_database_dir(tmp_path, _target(**c)) for c in ({"num-cores": 4}, {"mcpu": "haswell"})}
    assert host not in others and len(others) == 2


def test_default_root_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_database_root() == tmp_path / "tfcheck" / "tuning"


@pytest.mark.parametrize(
    ("tracker", "key", "problem"),
    [("localhost", "k", "host:port"), ("host:port", "k", "host:port"), ("127.0.0.1:9190", "", "--rpc-key")],
)
def test_rpc_config_rejects_bad_options(tracker: str, key: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RpcConfig.parse(tracker, key)


def test_rpc_config_parses_host_and_port() -> None:
    assert RpcConfig.parse("127.0.0.1:9190", "cpu") == RpcConfig("127.0.0.1", 9190, "cpu")


def test_negative_trials_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="trials"):
        tune(_dense_relu(4, 8, 4), _target(), trials=-1, database_dir=tmp_path)


def test_tasks_without_records_fall_back_to_the_default_schedules(tmp_path: Path) -> None:
    result = tune_module(_dense_relu(8, 16, 8), _target(), trials=0, database_dir=tmp_path)
    assert (result.tasks_total, result.tasks_reused, result.tasks_tuned, result.trials) == (1, 0, 0, 0)
    [kernel] = [f for _, f in result.mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert kernel.attrs[RULE_ATTR] == "schedule_contraction"
    described = json.loads((result.database_dir / "target.json").read_text())
    assert described["mcpu"] == host_cpu_target()["mcpu"]


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_tuning_records_are_reused_and_shared_across_models(tmp_path: Path) -> None:
    target = _target()
    rng = np.random.default_rng(0)
    x, w = rng.random((32, 64), dtype=np.float32), rng.random((64, 48), dtype=np.float32)

    first = tune_module(_dense_relu(32, 64, 48), target, trials=TRIALS, database_dir=tmp_path)
    assert (first.tasks_total, first.tasks_tuned, first.trials) == (1, 1, TRIALS)
    [kernel] = [f for _, f in first.mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert RULE_ATTR not in kernel.attrs, "the tuned schedule was replaced by a default one"
    np.testing.assert_allclose(_run(first.mod, target, x, w), np.maximum(x @ w, 0), rtol=1e-5)

    again = tune_module(_dense_relu(32, 64, 48), target, trials=TRIALS, database_dir=tmp_path)
    assert (again.tasks_reused, again.tasks_tuned, again.trials) == (1, 0, 0)
    assert again.mod.script() == first.mod.script()

    other = tune_module(_two_denses(32, 64, 48, 8), target, trials=TRIALS, database_dir=tmp_path)
    assert (other.tasks_total, other.tasks_reused, other.tasks_tuned, other.trials) == (2, 1, 1, TRIALS)
    w2 = rng.random((48, 8), dtype=np.float32)
    expected = np.maximum(x @ w, 0) @ w2
    np.testing.assert_allclose(_run(other.mod, target, x, w, w2), expected, rtol=1e-4)


@pytest.fixture
def rpc_device() -> RpcConfig:
    """An RPC tracker and one server registered with it, on 127.0.0.1 only; stopped afterwards."""
    from tvm import rpc
    from tvm.rpc.tracker import Tracker

    tracker = Tracker(host="127.0.0.1", port=9190, port_end=9290, silent=True)
    server = rpc.Server(
        host="127.0.0.1", port=9300, port_end=9400, key="tfcheck-test",
        tracker_addr=("127.0.0.1", tracker.port), silent=True,
    )
    try:
        _wait_for_server(tracker.port, "tfcheck-test")
        yield RpcConfig("127.0.0.1", tracker.port, "tfcheck-test", session_timeout_s=60.0)
    finally:
        server.terminate()
        tracker.terminate()


def _wait_for_server(port: int, key: str, timeout: float = 60.0) -> None:
    """The server registers with the tracker in the background: wait (bounded) until it has."""
    from tvm import rpc

    deadline = time.monotonic() + timeout
    while key not in rpc.connect_tracker("127.0.0.1", port).summary()["queue_info"]:
        if time.monotonic() > deadline:
            pytest.fail(f"the RPC server did not register with the tracker within {timeout:.0f} s")
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_tuning_measures_through_an_rpc_tracker(tmp_path: Path, rpc_device: RpcConfig) -> None:
    result = tune_module(_dense_relu(16, 32, 16), _target(), trials=TRIALS, database_dir=tmp_path, rpc=rpc_device)
    assert (result.tasks_tuned, result.trials) == (1, TRIALS)
    records = (result.database_dir / "database_tuning_record.json").read_text().splitlines()
    run_secs = [json.loads(line)[1][1] for line in records]  # [workload, [trace, run_secs, ...]]
    assert any(all(s < 1.0 for s in secs) for secs in run_secs), "no candidate was measured remotely"
