"""The int8 ONNX model's word-piece table stored per row, the rarest rows in 4 bits (export/programs/table_rows.py): what
ONNX Runtime reads back from the rewritten graph is the table within each row's own quantization step."""

from __future__ import annotations

import numpy as np
import pytest

ROWS, WIDTH = 300, 128
INT4_SHARE = 0.6
ONNX_SLACK_BYTES = 2048  # the 4-bit path's two dozen nodes and their names


def _lookup_model(path, table: np.ndarray):
    """A graph that looks token ids up in `table` (as the exported students' first node does)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["rows"], name="/embeddings/word_embeddings/Gather")],
        "lookup", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["batch", "sequence", WIDTH])],
        [numpy_helper.from_array(table, "table")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def _looked_up(path, ids: np.ndarray) -> np.ndarray:
    from pocketbert.core.students.inference import ort_session

    return ort_session(path, 1).run(None, {"input_ids": ids})[0]


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    # rows of very different ranges: one scale for the whole table would flatten the small ones
    return (rng.standard_normal((ROWS, WIDTH)) * rng.uniform(0.001, 1.0, (ROWS, 1))).astype(np.float32)


@pytest.mark.parametrize("share", [0.0, INT4_SHARE])
def test_each_row_is_read_back_within_its_own_quantization_step(tmp_path, table, share):
    from pocketbert.export.programs import table_rows

    counts = np.arange(ROWS)[::-1]  # the later the row, the rarer
    four = table_rows.int4_rows(counts, share) if share else None
    path = _lookup_model(tmp_path / "lookup.onnx", table)
    record = table_rows.quantize_rows(path, four)
    assert record["int4_rows"] == (0 if four is None else len(four)) and record["rows"] == ROWS
    ids = np.array([[0, 5, ROWS - 1, 7], [ROWS - 2, 1, 2, 3]], dtype=np.int64)
    got = _looked_up(path, ids)
    assert got.shape == (2, 4, WIDTH)
    is4 = np.zeros(ROWS, dtype=bool)
    if four is not None:
        is4[four] = True
        assert is4[ROWS - 1] and not is4[0]  # the rarest rows went to 4 bits
    for row_id, row in zip(ids.ravel(), got.reshape(-1, WIDTH)):
        original = table[row_id]
        if is4[row_id]:  # 7 steps each side of zero, a scale per group of values
            step = np.repeat(np.abs(original.reshape(-1, table_rows.int4_group(WIDTH))).max(axis=1) / 7,
                             table_rows.int4_group(WIDTH))
        else:
            step = np.full(WIDTH, np.abs(original).max() / 127)
        assert np.all(np.abs(row - original) <= step / 2 + 1e-7), row_id


def test_the_4_bit_rows_halve_their_bytes(tmp_path, table):
    from pocketbert.export.programs import table_rows

    sizes = {}
    for share in (0.0, INT4_SHARE):
        path = _lookup_model(tmp_path / f"lookup-{share}.onnx", table)
        table_rows.quantize_rows(path, table_rows.int4_rows(np.arange(ROWS), share) if share else None)
        sizes[share] = path.stat().st_size
    table_bytes = ROWS * WIDTH
    assert sizes[0.0] < table_bytes * 1.1  # one byte a value, and a scale a row
    # half a byte a value saved on the 4-bit rows, less the row map and their group scales (4 bytes each)
    overhead = ROWS * 4 * (1 + WIDTH // table_rows.int4_group(WIDTH))
    assert sizes[0.0] - sizes[INT4_SHARE] > INT4_SHARE * table_bytes / 2 - overhead - ONNX_SLACK_BYTES


def test_a_narrow_table_shares_a_scale_among_fewer_values():
    from pocketbert.core.errors import ConfigError
    from pocketbert.export.programs.table_rows import EMBEDDING_INT4_GROUP, int4_group

    assert int4_group(384) == int4_group(192) == EMBEDDING_INT4_GROUP
    assert (int4_group(32), int4_group(312)) == (32, 52)
    with pytest.raises(ConfigError, match="embedding_int4_share.*odd.*set it to 0"):
        int4_group(33)


def test_the_rarest_rows_are_chosen_ties_to_the_higher_id():
    from pocketbert.export.programs.table_rows import int4_rows

    assert int4_rows(np.array([5, 0, 3, 0, 9]), 0.4).tolist() == [1, 3]
    assert int4_rows(np.array([5, 0, 3, 0, 9]), 0.2).tolist() == [3]


@pytest.mark.parametrize("share", [0.0, INT4_SHARE])
def test_the_size_with_a_larger_vocabulary_is_the_size_of_that_table_stored_the_same_way(tmp_path, table, share):
    from pocketbert.export.programs import table_rows

    def stored(rows: int) -> int:
        path = _lookup_model(tmp_path / f"lookup-{rows}.onnx", table[np.arange(rows) % ROWS])
        table_rows.quantize_rows(path, table_rows.int4_rows(np.arange(rows), share) if share else None)
        return path.stat().st_size

    small = _lookup_model(tmp_path / "small.onnx", table)
    assert abs(table_rows.size_with_rows(small, ROWS, 3 * ROWS) - (3 * ROWS * WIDTH * 4)) < ONNX_SLACK_BYTES  # fp32
    table_rows.quantize_rows(small, table_rows.int4_rows(np.arange(ROWS), share) if share else None)
    assert abs(table_rows.size_with_rows(small, ROWS, 3 * ROWS) - stored(3 * ROWS)) < ONNX_SLACK_BYTES
