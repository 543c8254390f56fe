"""MetaSchedule tuning: one database per target, reuse without trials, sharing, RPC measurement,
and the default schedules competing with the tuned ones, per operator and as a whole model.

The tuning tests share one xdist group: the first `TuneContext` in a process imports TVM's tensor
intrinsics (6 s here), so they pay for it once. Each tunes a tiny matmul with a few trials.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.script import relax as R  # noqa: E402

from tfcheck.compiler.tuning.model_timing import UntimeableModel, race, random_inputs  # noqa: E402
from tfcheck.compiler.build.compile import compile_module  # noqa: E402
from tfcheck.compiler.schedules import apply_default_schedules, legalize_and_fuse  # noqa: E402
from tfcheck.compiler.schedules.apply import RULE_ATTR  # noqa: E402
from tfcheck.compiler.build.targets import host_cpu_target  # noqa: E402
from tfcheck.compiler.process.messages import TuningOptions, WholeModel, as_json  # noqa: E402
from tfcheck.compiler.tuning.metaschedule import (  # noqa: E402
    RpcConfig,
    default_database_root,
    target_database_dir,
    tune_module,
)

TRIALS = 4
# The races below pit an unscheduled loop nest (one core, no vectors) against the default schedule.
# At 64x256x256 that was 3.2 ms against 0.05 ms here, and on a loaded 2-core CI runner the default
# build's two-thread kernel, waiting each call for a core that another test held, once lost; at
# 128x512x512 it is 45 ms against 0.16 ms, a margin that waiting for a busy core cannot close.
RACE_ROWS, RACE_INNER, RACE_COLS = 128, 512, 512


def _dense_relu(rows: int | tvm.tirx.Var, inner: int, cols: int) -> tvm.IRModule:
    """`relu(x @ w)`: one fused MetaSchedule task per shape (``rows`` symbolic: a batch of any size)."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((rows, inner), "float32"))
    w = relax.Var("w", R.Tensor((inner, cols), "float32"))
    with builder.function("main", [x, w]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.relu(relax.op.matmul(x, w)))
        builder.emit_func_output(out)
    return builder.get()


def _dense_relu_with_constant_weight(rows: int, inner: int, cols: int) -> tuple[tvm.IRModule, np.ndarray]:
    """`relu(x @ w)` with `w` a constant, as in an imported model: its layout may be packed at build time."""
    weight = np.random.default_rng(1).random((inner, cols), dtype=np.float32)
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((rows, inner), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.relu(relax.op.matmul(x, relax.const(weight))))
        builder.emit_func_output(out)
    return builder.get(), weight


def _kernels(mod: tvm.IRModule) -> dict[str, tvm.tirx.PrimFunc]:
    return {gvar.name_hint: f for gvar, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}


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


def test_frame_lookups_once_answer_as_inspect_does_and_leave_it_as_it_was() -> None:
    """What makes the tensor intrinsics' import take seconds, not a minute, changes no answer."""
    import inspect

    from tfcheck.compiler.tuning.metaschedule import frame_lookups_once

    scan = inspect.getmodule
    frames = [info.frame for info in inspect.stack(0)]
    frames.append(eval("__import__('sys')._getframe()"))  # a frame of '<string>'
    expected = [scan(frame, frame.f_code.co_filename) for frame in frames]
    with frame_lookups_once():
        assert inspect.getmodule is not scan
        for _ in range(2):
            assert [inspect.getmodule(frame, frame.f_code.co_filename) for frame in frames] == expected
        assert inspect.getmodule(inspect) is inspect
    assert inspect.getmodule is scan
    assert any(frame.f_code.co_filename.startswith("<") for frame in frames)


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
        tune_module(_dense_relu(4, 8, 4), _target(), trials=-1, database_dir=tmp_path)


def test_tasks_without_records_fall_back_to_the_default_schedules(tmp_path: Path) -> None:
    result = tune_module(_dense_relu(8, 16, 8), _target(), trials=0, database_dir=tmp_path)
    assert (result.tasks_total, result.tasks_reused, result.tasks_tuned, result.trials) == (1, 0, 0, 0)
    [kernel] = [f for _, f in result.mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert kernel.attrs[RULE_ATTR] == "schedule_contraction"
    described = json.loads((result.database_dir / "target.json").read_text())
    assert described["mcpu"] == host_cpu_target()["mcpu"]


def test_kernels_over_a_size_known_at_run_time_keep_their_default_schedules(tmp_path: Path) -> None:
    """MetaSchedule measures candidates on arrays of the kernel's shapes; over a batch of any size
    its search failed and took the build with it. Such kernels are not tuning tasks: they keep the
    default schedules, and the model runs at every batch."""
    rng = np.random.default_rng(0)
    w = rng.random((16, 8), dtype=np.float32)
    result = tune_module(_dense_relu(tvm.tirx.Var("batch", "int64"), 16, 8), _target(), trials=4, database_dir=tmp_path)
    assert (result.tasks_total, result.tasks_of_unknown_size, result.tasks_tuned, result.trials) == (0, 1, 0, 0)
    from tfcheck.commands.build import _tuning_text

    assert "1 operator over sizes known only at run time kept it (not tunable)" in _tuning_text(as_json(result.summary()))
    [kernel] = _kernels(result.mod).values()
    assert kernel.attrs[RULE_ATTR] == "schedule_contraction"
    for rows in (1, 9):
        x = rng.random((rows, 16), dtype=np.float32)
        np.testing.assert_allclose(_run(result.mod, _target(), x, w), np.maximum(x @ w, 0), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_tuning_records_are_reused_and_shared_across_models(tmp_path: Path) -> None:
    target = _target()
    rng = np.random.default_rng(0)
    x, w = rng.random((32, 64), dtype=np.float32), rng.random((64, 48), dtype=np.float32)

    first = tune_module(_dense_relu(32, 64, 48), target, trials=TRIALS, database_dir=tmp_path)
    assert (first.tasks_total, first.tasks_tuned, first.trials) == (1, 1, TRIALS)
    [kernel] = _kernels(first.mod).values()
    assert RULE_ATTR not in kernel.attrs, "the kernel was scheduled without its measured records"
    np.testing.assert_allclose(_run(first.mod, target, x, w), np.maximum(x @ w, 0), rtol=1e-5)

    again = tune_module(_dense_relu(32, 64, 48), target, trials=TRIALS, database_dir=tmp_path)
    assert (again.tasks_reused, again.tasks_tuned, again.trials) == (1, 0, 0)
    assert again.mod.script() == first.mod.script()

    other = tune_module(_two_denses(32, 64, 48, 8), target, trials=TRIALS, database_dir=tmp_path)
    assert (other.tasks_total, other.tasks_reused, other.tasks_tuned, other.trials) == (2, 1, 1, TRIALS)
    w2 = rng.random((48, 8), dtype=np.float32)
    expected = np.maximum(x @ w, 0) @ w2
    np.testing.assert_allclose(_run(other.mod, target, x, w, w2), expected, rtol=1e-4)


def _record_unscheduled_kernel(mod: tvm.IRModule, target: tvm.target.Target, root: Path, run_secs: float) -> None:
    """Store, as if tuning had measured it, the operator's unscheduled loop nest taking `run_secs`."""
    from tvm import s_tir

    from tfcheck.compiler.tuning.metaschedule import _TUNED, _commit, _open_database, _tunable_tasks

    [task], _ = _tunable_tasks(legalize_and_fuse(mod, target), target)
    workload = task.dispatched[0]
    args = ms.arg_info.ArgInfo.from_entry_func(workload, remove_preproc=True)
    database = _open_database(target_database_dir(root, target), _TUNED)
    sch = s_tir.Schedule(workload)
    sch.get_sblock("root")  # a lookup only: MetaSchedule's databases ignore records with empty traces
    _commit(database, workload, sch.trace, [run_secs], args, target)


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
@pytest.mark.parametrize(("tuned_secs", "default_wins"), [(1.0, True), (1e-9, False)])
def test_each_operator_keeps_the_faster_of_its_tuned_and_default_schedule(
    tmp_path: Path, tuned_secs: float, default_wins: bool
) -> None:
    target = _target()
    mod, weight = _dense_relu_with_constant_weight(32, 64, 48)
    target_database_dir(tmp_path, target).mkdir(parents=True)
    _record_unscheduled_kernel(mod, target, tmp_path, run_secs=tuned_secs)

    result = tune_module(mod, target, trials=0, database_dir=tmp_path)
    assert (result.tasks_reused, result.tasks_tuned, result.tasks_kept_default) == (1, 0, int(default_wins))
    [(name, kernel)] = _kernels(result.mod).items()
    assert ("T.vectorized" in kernel.script()) == default_wins
    assert name.endswith("_prepacked") == default_wins, "the default schedule packs the weight at build time"
    x = np.random.default_rng(0).random((32, 64), dtype=np.float32)
    np.testing.assert_allclose(_run(result.mod, target, x), np.maximum(x @ weight, 0), rtol=1e-5)

    again = tune_module(mod, target, trials=0, database_dir=tmp_path)
    assert again.mod.script() == result.mod.script()
    [measured] = result.database_dir.glob("default-*_tuning_record.json")
    assert len(measured.read_text().splitlines()) == 1, "the default schedule was measured again"


def _tuning_request(root: Path, rpc: RpcConfig | None = None) -> TuningOptions:
    """What `tfcheck build --tune --trials 0` asks of the compiling child."""
    if rpc is None:
        return TuningOptions(0, str(root))
    return TuningOptions(0, str(root), f"{rpc.tracker_host}:{rpc.tracker_port}", rpc.key)


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_a_tuned_model_slower_as_a_whole_gives_way_to_the_default_build(tmp_path: Path) -> None:
    target = _target()
    mod, weight = _dense_relu_with_constant_weight(RACE_ROWS, RACE_INNER, RACE_COLS)
    target_database_dir(tmp_path, target).mkdir(parents=True)
    _record_unscheduled_kernel(mod, target, tmp_path, run_secs=1e-9)  # wins per operator, loses as a model

    compiled = compile_module(mod, target, "cpu", _tuning_request(tmp_path))
    executable, tuning = compiled.executable, compiled.tuning
    assert (tuning.tasks_kept_default, tuning.whole_model.kept) == (0, "default")
    assert tuning.whole_model.tuned_ms > tuning.whole_model.default_ms > 0
    x = np.random.default_rng(0).random((RACE_ROWS, RACE_INNER), dtype=np.float32)
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ weight, 0), rtol=1e-5)


def test_without_a_tuned_schedule_there_is_no_race(tmp_path: Path) -> None:
    mod, _ = _dense_relu_with_constant_weight(8, 16, 8)
    tuning = compile_module(mod, _target(), "cpu", _tuning_request(tmp_path)).tuning
    assert tuning.tasks_tuned == 0 and tuning.whole_model == WholeModel("default")


def test_the_race_keeps_the_faster_model_and_reports_both_times() -> None:
    target = _target()
    mod, _ = _dense_relu_with_constant_weight(RACE_ROWS, RACE_INNER, RACE_COLS)
    unscheduled = legalize_and_fuse(mod, target)  # plain loop nests: one core, no vectors
    result = race({"default": unscheduled, "tuned": apply_default_schedules(mod, target)}, target, rounds=2)
    assert result.winner == "tuned" and result.median_ms["default"] > result.median_ms["tuned"] > 0
    assert result.summary() == WholeModel("tuned", round(result.median_ms["tuned"], 4),
                                          round(result.median_ms["default"], 4))


def test_models_whose_weights_are_parameters_race_each_with_its_own_weights() -> None:
    """With their constants lifted (a build with its weights as inputs), the unscheduled model
    takes the weight as it is and the scheduled one takes it packed: other shapes."""
    from tfcheck.compiler.build.library_weights import lift_constants

    target = _target()
    mod, _ = _dense_relu_with_constant_weight(RACE_ROWS, RACE_INNER, RACE_COLS)
    slow = lift_constants(legalize_and_fuse(mod, target)).mod
    fast = lift_constants(apply_default_schedules(mod, target)).mod
    assert [p.ty.shape for p in slow["main"].params[1:]] != [p.ty.shape for p in fast["main"].params[1:]]
    result = race({"slow": slow, "fast": fast}, target, rounds=2)
    assert result.winner == "fast"


def test_a_model_without_static_input_shapes_cannot_be_raced() -> None:
    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((tvm.tirx.Var("n", "int64"), 8), "float32"))
    with builder.function("main", [x]):
        builder.emit_func_output(relax.op.nn.relu(x))
    with pytest.raises(UntimeableModel, match="'x' has no static shape"):
        random_inputs(builder.get()["main"])


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_tuned_schedules_pack_constant_weights_at_build_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfcheck.compiler.tuning import metaschedule as tuning

    monkeypatch.setattr(tuning, "_measure_defaults", lambda *args: None)  # only tuned schedules compete
    target = _target()
    mod, weight = _dense_relu_with_constant_weight(32, 64, 48)
    result = tune_module(mod, target, trials=TRIALS, database_dir=tmp_path)
    [(name, kernel)] = _kernels(result.mod).items()
    assert RULE_ATTR not in kernel.attrs and result.tasks_kept_default == 0
    assert name.endswith("_prepacked"), "MetaSchedule's RewriteLayout did not pack the constant weight"
    x = np.random.default_rng(0).random((32, 64), dtype=np.float32)
    np.testing.assert_allclose(_run(result.mod, target, x), np.maximum(x @ weight, 0), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_build_tune_reports_what_tuning_did_and_a_rebuild_reuses_the_records(
    project: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    folder = project({"dense.py": """
        import numpy as np
        import tensorflow as tf
        import tfcheck

        weights = tf.constant(np.random.default_rng(0).random((64, 48), dtype=np.float32))

        @tfcheck.aot
        @tf.function(input_signature=[tf.TensorSpec([32, 64], tf.float32)])
        def dense(x):
            return tf.nn.relu(tf.matmul(x, weights))
    """})
    tune = ["--tune", "--trials", str(TRIALS), "--tuning-db", str(tmp_path / "db")]

    first = run_cli(folder, "build", "dense.py", *tune, "--cache-dir", "first", "--format", "json")
    assert first.exit_code == 0, first.output
    [record] = json.loads(first.stdout)["functions"]
    assert record["status"] == "built" and record["verified"] is True
    tuning = record["tuning"]
    assert tuning["tasks"] >= 1 and tuning["tasks_tuned"] == tuning["tasks"] and tuning["trials"] >= TRIALS
    assert 0 <= tuning["tasks_kept_default"] <= tuning["tasks"] and tuning["seconds"] > 0
    manifest = json.loads((Path(record["artifact"]) / "manifest.json").read_text())
    assert manifest["tuned"] is True and manifest["tuning"] == tuning
    assert tuning["whole_model"]["kept"] in {"tuned", "default"}

    again = run_cli(folder, "build", "dense.py", *tune, "--cache-dir", "second")
    assert again.exit_code == 0, again.output
    assert f"{tuning['tasks']} from the tuning database, none tuned now" in again.output
    assert f"kept the {tuning['whole_model']['kept']} build" in " ".join(again.output.split())


@pytest.fixture
def rpc_device() -> RpcConfig:
    """An RPC tracker and one server registered with it, on 127.0.0.1 only; stopped afterwards."""
    from tvm import rpc
    from tvm.rpc.tracker import Tracker

    key = f"tfcheck-test-{os.getpid()}"  # test runs side by side on one machine never share a server
    tracker = Tracker(host="127.0.0.1", port=9190, port_end=9290, silent=True)
    server = rpc.Server(
        host="127.0.0.1", port=9300, port_end=9400, key=key,
        tracker_addr=("127.0.0.1", tracker.port), silent=True,
    )
    try:
        _wait_for_server(tracker.port, key)
        yield RpcConfig("127.0.0.1", tracker.port, key, session_timeout_s=60.0)
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


@pytest.mark.slow
@pytest.mark.xdist_group("tvm-tuning")
def test_the_whole_model_race_runs_on_the_rpc_device(tmp_path: Path, rpc_device: RpcConfig) -> None:
    target = _target()
    mod, _ = _dense_relu_with_constant_weight(RACE_ROWS, RACE_INNER, RACE_COLS)
    target_database_dir(tmp_path, target).mkdir(parents=True)
    _record_unscheduled_kernel(mod, target, tmp_path, run_secs=1e-9)
    tuning = compile_module(mod, target, "cpu", _tuning_request(tmp_path, rpc_device)).tuning
    assert tuning.whole_model.kept == "default", tuning
    assert tuning.whole_model.tuned_ms > tuning.whole_model.default_ms > 0


@pytest.mark.parametrize(
    ("race", "says"),
    [
        ({"kept": "default", "tuned_ms": 134.16, "default_ms": 123.65}, "; whole model 134 ms tuned, 124 ms default: kept the default build"),
        ({"kept": "default"}, "; no tuned schedule measured faster: kept the default build"),
        ({"kept": "tuned", "why": "input 'x' has no static shape"}, "; kept the tuned build without timing the whole model (input 'x' has no static shape)"),
        (None, "tuning took 3.0 s"),  # a manifest written before the race existed
    ],
)
def test_the_build_line_says_which_model_won_the_race(race: dict[str, object] | None, says: str) -> None:
    from tfcheck.commands.build import _tuning_text

    tuning = {"tasks": 3, "tasks_reused": 3, "tasks_tuned": 0, "trials": 0, "tasks_kept_default": 1, "seconds": 3.0}
    text = _tuning_text({**tuning, **({"whole_model": race} if race else {})})
    assert text.endswith(says)
