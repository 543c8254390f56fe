"""The zoo's MLP and MobileNetV2 as .tflite (`models.py tflite`, with TensorFlow) and the MLP as
ONNX (`models.py onnx`, with the `onnx` package), in the working directory, for cold_start.py."""

import sys
from pathlib import Path

ZOO = Path(__file__).resolve().parents[2] / "fixtures" / "aot"


def tflite() -> None:
    """Trace, freeze and convert as `tfcheck build` does; save the MLP's weights for ONNX."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    sys.path.insert(0, str(ZOO))
    import mlp
    import mobilenet_v2

    np.savez("mlp_weights.npz", *mlp.model.get_weights())
    for name, wrapper in (("mlp", mlp.mlp), ("mobilenet_v2", mobilenet_v2.mobilenet_v2)):
        frozen = convert_variables_to_constants_v2(wrapper.tf_function.get_concrete_function())
        Path(f"{name}.tflite").write_bytes(
            tf.lite.TFLiteConverter.from_concrete_functions([frozen]).convert())


def onnx_mlp() -> None:
    """MatMul, Add, Relu, MatMul, Add, Softmax with the MLP's weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.load("mlp_weights.npz")
    k1, b1, k2, b2 = (weights[f"arr_{i}"] for i in range(4))
    steps = [("MatMul", ["x", "k1"]), ("Add", ["h0", "b1"]), ("Relu", ["h1"]), ("MatMul", ["h2", "k2"]),
             ("Add", ["h3", "b2"])]
    nodes = [helper.make_node(op, inputs, [f"h{i}"]) for i, (op, inputs) in enumerate(steps)]
    nodes.append(helper.make_node("Softmax", ["h4"], ["y"], axis=-1))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 10])],
        [numpy_helper.from_array(a, n) for a, n in ((k1, "k1"), (b1, "b1"), (k2, "k2"), (b2, "b2"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, "mlp.onnx")


if __name__ == "__main__":
    {"tflite": tflite, "onnx": onnx_mlp}[sys.argv[1]]()
