"""FLOPs and bytes of one inference, counted on an exported ONNX graph at a concrete input shape.

Static shape inference loses the attention shapes behind the exporter's Shape/Reshape chains, so the graph
is run once in ONNX Runtime, unoptimised, with every intermediate exposed: each tensor's shape is then exact.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pocketbert.core.students.inference import ort_options

# FLOPs per output element of element-wise and normalisation ops (a multiply-add is 2 FLOPs, as for MatMul).
ELEMENTWISE_FLOPS = {
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Sqrt": 1, "Pow": 1, "Neg": 1, "Relu": 1,
    "Erf": 8, "Tanh": 8, "Sigmoid": 4,
    "Softmax": 5,  # max, subtract, exp, sum, divide
    "LayerNormalization": 8,  # mean, centre, square, mean, rsqrt, scale, shift
    "ReduceMean": 1,
}


@dataclass
class GraphCost:
    flops: int
    matmul_flops: int
    weight_bytes: int  # initializers as stored in the file: the least an inference must read
    io_bytes: int  # model inputs and outputs
    activation_bytes: int  # every intermediate tensor written once: the traffic when nothing stays in cache
    batch: int
    sequence_length: int

    @property
    def minimum_bytes(self) -> int:
        return self.weight_bytes + self.io_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "minimum_bytes": self.minimum_bytes}


def _initializer_bytes(model) -> int:
    from onnx import numpy_helper

    return int(sum(numpy_helper.to_array(init).nbytes for init in model.graph.initializer))


def weight_bytes(model_path: Path) -> int:
    import onnx

    return _initializer_bytes(onnx.load(str(model_path)))


def count_graph_cost(model_path: Path, inputs: dict) -> GraphCost:
    return count_graph_costs(model_path, [inputs])[0]


def count_graph_costs(model_path: Path, inputs_per_shape: list[dict]) -> list[GraphCost]:
    """Run the fp32 graph once per input shape with every node output exposed and count what each node computes.
    One session serves every shape: building it is the expensive part for a large model."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(model_path))
    initializer_shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    weights = _initializer_bytes(model)
    graph_outputs = [o.name for o in model.graph.output]
    exposed = set(graph_outputs)
    for node in model.graph.node:
        for name in node.output:
            if name and name not in exposed:
                model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
                exposed.add(name)
    options = ort_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return [_count(model.graph, initializer_shapes, weights, graph_outputs, inputs,
                   dict(zip(names, session.run(names, inputs)))) for inputs in inputs_per_shape]


def _count(graph, initializer_shapes: dict, weights: int, graph_outputs: list[str], inputs: dict,
           values: dict) -> GraphCost:
    shapes = {**initializer_shapes, **{k: tuple(np.shape(v)) for k, v in inputs.items()},
              **{k: tuple(np.shape(v)) for k, v in values.items()}}
    nbytes = {k: int(np.asarray(v).nbytes) for k, v in values.items()}

    matmul = other = 0
    for node in graph.node:
        out = shapes.get(node.output[0]) if node.output else None
        if out is None:
            continue
        if node.op_type in ("MatMul", "Gemm"):
            a_shape = shapes[node.input[0]]
            transposed_a = node.op_type == "Gemm" and any(a.name == "transA" and a.i for a in node.attribute)
            k = a_shape[0] if transposed_a else a_shape[-1]
            matmul += 2 * int(np.prod(out)) * int(k)
            if node.op_type == "Gemm" and len(node.input) > 2:
                other += int(np.prod(out))  # bias
        elif node.op_type in ELEMENTWISE_FLOPS:
            other += ELEMENTWISE_FLOPS[node.op_type] * int(np.prod(out))
    io = sum(int(np.asarray(v).nbytes) for v in inputs.values()) + sum(nbytes[name] for name in graph_outputs)
    activations = sum(nbytes.values())
    batch, length = next(iter(inputs.values())).shape[:2]
    return GraphCost(matmul + other, matmul, weights, io, activations, int(batch), int(length))
