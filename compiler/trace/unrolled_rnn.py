"""Keras RNN layers traced unrolled when their time dimension has a known size.

A Keras RNN layer (LSTM, GRU, SimpleRNN, `RNN` of any cell, each direction of a `Bidirectional`)
runs its steps in a `tf.while_loop` that reads and writes `tf.TensorArray`s of `[batch, units]`
elements. TensorFlow's TFLite converter lowers those TensorList ops only for elements of one
known shape, so over an unknown batch (an `input_signature` of `[None, 24, 6]`: every recurrent
model its authors export for any batch) the conversion failed (issue 42: mcps5601/TimeGAN-tensorflow2's
LSTM embedder, faustomorales/keras-ocr's CRNN recognizer).

Traced with the layer's own `unroll=True`, the layer writes its steps as a Python loop instead:
the same cell on each time slice, no loop and no TensorList, and the batch stays symbolic. This is
the layer's documented option, not a copy of it, so the cell, masking, `go_backwards` and
`return_sequences` are the layer's own, and so is the arithmetic of each step: the looped and the
unrolled functions agree to the last bit (`tests/compiler/test_unrolled_rnn.py`).

`concrete_unrolled` traces the symbolic build's function so (`tracing._traced_symbolic`); at known
sizes the loop converts as it is and the frontend unrolls the converter's `WHILE` after import
(`compiler/frontend/loop_unroll.py`), with the same bound on the steps. `rnn_layers_unrolled()`
patches, for the duration of a trace only, the Keras implementations already imported (Keras 3's
and tf_keras'; it imports neither): each RNN layer called in it whose time dimension has a known
size of at most `MAX_UNROLLED_STEPS` runs with `unroll=True`, and its attributes are what they
were once the call returns. A time dimension of unknown size, or a longer one, keeps the loop
(and, where the batch is unknown too, the conversion's message).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# The longest time dimension traced unrolled: the frontend's bound on a WHILE it unrolls
# (`loop_unroll.MAX_STEPS`), beyond which the graph, and the time LLVM takes on it, grows with the
# sequence for little gain (docs/schedules.md, "Recurrent loops").
MAX_UNROLLED_STEPS = 256

# Where each Keras keeps its RNN base class: Keras 3, and tf_keras (Keras 2, TF_USE_LEGACY_KERAS=1).
_RNN_CLASSES = (("keras.src.layers.rnn.rnn", "RNN"), ("tf_keras.src.layers.rnn.base_rnn", "RNN"))


def concrete_unrolled(tf_function: Any) -> Any:
    """`tf_function`'s concrete function traced within `rnn_layers_unrolled()`. One that has been
    traced already (its module called it) would return that trace: its clone, with the same
    options, is traced instead."""
    fresh = tf_function._clone(None) if tf_function.experimental_get_tracing_count() else tf_function  # noqa: SLF001
    with rnn_layers_unrolled():
        return fresh.get_concrete_function()


@contextmanager
def rnn_layers_unrolled(max_steps: int = MAX_UNROLLED_STEPS) -> Iterator[None]:
    """Within it, every call of a Keras RNN layer over at most `max_steps` known time steps runs
    unrolled (see the module); the classes are as they were after it."""
    classes = _rnn_classes()
    own = [cls.__dict__.get("__call__") for cls in classes]
    for cls in classes:
        cls.__call__ = _unrolling(cls.__call__, max_steps)
    try:
        yield
    finally:
        for cls, call in zip(classes, own):
            if call is None:
                del cls.__call__
            else:
                cls.__call__ = call


def _rnn_classes() -> list[type]:
    """The RNN base classes of the Keras implementations the user's code imported."""
    modules = [(sys.modules.get(module), name) for module, name in _RNN_CLASSES]
    return [getattr(module, name) for module, name in modules if module is not None and hasattr(module, name)]


def _unrolling(call: Callable[..., Any], max_steps: int) -> Callable[..., Any]:
    """`call` (an RNN class's `__call__`) with the layer unrolled for the call where its time
    dimension allows (`_unrolled`). A subclass's own `__call__` reaches it through `super()`."""

    @functools.wraps(call)
    def unrolled(layer: Any, *args: Any, **kwargs: Any) -> Any:
        inputs = args[0] if args else kwargs.get("inputs", kwargs.get("sequences"))
        steps = None if _zeroes_reversed_outputs(layer, inputs, kwargs) else time_steps(layer, inputs)
        with _unrolled(layer, steps, max_steps):
            return call(layer, *args, **kwargs)

    return unrolled


def _zeroes_reversed_outputs(layer: Any, inputs: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the layer runs backwards over a masked sequence with its masked steps' outputs
    zeroed (`zero_output_for_mask`: the backward half of a `Bidirectional` with
    `return_sequences`): unrolled, both Keras zero the outputs, which are in reversed order, by the
    mask in the forward order (Keras 3.15's and tf_keras 2.21's `rnn(unroll=True)`), so such a
    layer keeps its loop. The mask comes as `mask=` or on the input, where Keras' `__call__` looks."""
    if not (getattr(layer, "go_backwards", False) and getattr(layer, "zero_output_for_mask", False)):
        return False
    first = _first_tensor(inputs)
    return kwargs.get("mask") is not None or getattr(first, "_keras_mask", None) is not None


def _first_tensor(inputs: Any) -> Any:
    """The first tensor of a (nested) input, as an RNN layer reads its shape (`tf.nest`'s order: items
    of a list or tuple in turn, a dict's by sorted key); None for none. Written out, since TensorFlow
    is imported by `bridge.py` only."""
    while isinstance(inputs, (list, tuple, dict)) and inputs:
        inputs = inputs[sorted(inputs)[0]] if isinstance(inputs, dict) else inputs[0]
    return None if isinstance(inputs, (list, tuple, dict)) else inputs


def time_steps(layer: Any, inputs: Any) -> int | None:
    """The known size of the time dimension of the layer's (first) input, else None: axis 1, or
    axis 0 for a tf_keras layer with `time_major=True`."""
    first = _first_tensor(inputs)
    if getattr(first, "shape", None) is None:
        return None
    try:  # a TensorShape (its sizes, None where unknown) or a tuple for a Keras 3 KerasTensor
        sizes = list(first.shape)
    except ValueError:  # a TensorShape of unknown rank
        return None
    axis = 0 if getattr(layer, "time_major", False) else 1
    return sizes[axis] if len(sizes) > axis else None


@contextmanager
def _unrolled(layer: Any, steps: int | None, max_steps: int) -> Iterator[None]:
    """The layer with `unroll=True` (and, for tf_keras' LSTM and GRU, which decide in their
    constructor between the unrollable loop and a fused kernel that is never unrolled,
    `_could_use_gpu_kernel=False`) while the block runs; unchanged when `steps` is unknown or over
    `max_steps`, or the layer is unrolled already."""
    if steps is None or steps > max_steps or getattr(layer, "unroll", True):
        yield
        return
    saved = {name: layer.__dict__[name] for name in ("unroll", "_could_use_gpu_kernel") if name in layer.__dict__}
    layer.unroll = True
    if "_could_use_gpu_kernel" in saved:
        layer._could_use_gpu_kernel = False
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(layer, name, value)
