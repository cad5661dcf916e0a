"""trace-picture: rows per queue, boxes per opcode merged per pixel column, busy shares, windows, bad input."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.simulator import run_program
from neuron_mlir.tools.trace_picture import main, read_tracks, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def _trace(*events: tuple[int, str, float, float], names: dict[int, str] | None = None) -> dict:
    trace_events: list[dict] = [
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}
        for tid, name in (names or {}).items()
    ]
    for tid, opcode, start, duration in events:
        trace_events.append({"name": opcode, "ph": "X", "pid": 0, "tid": tid, "ts": start, "dur": duration})
    return {"traceEvents": trace_events}


def _boxes(svg: str) -> list[tuple[float, float, str]]:
    root = ET.fromstring(svg)
    boxes = []
    for rect in root.iter(f"{SVG}rect"):
        title = rect.find(f"{SVG}title")
        if title is not None:
            boxes.append((float(rect.attrib["x"]), float(rect.attrib["width"]), title.text or ""))
    return boxes


def test_one_row_per_track_with_busy_share():
    trace = _trace((0, "nc_matmul", 0.0, 50.0), (1, "tensor_copy", 50.0, 50.0), names={0: "TensorE", 1: "VectorE"})
    tracks = read_tracks(trace)
    assert [track.label for track in tracks] == ["TensorE", "VectorE"]
    svg = render_svg(tracks, width=1000 + 190 + 20)
    assert 'TensorE <tspan fill="#555">50%</tspan>' in svg
    boxes = _boxes(svg)
    assert [opcode for *_, opcode in boxes] == ["nc_matmul", "tensor_copy"]
    # 1000 columns for 100 us: each half of the run is 500 columns wide.
    assert [width for _, width, _ in boxes] == [500.0, 500.0]


def test_many_events_merge_into_runs_per_column():
    events = [(0, "nc_matmul", float(i), 0.9) for i in range(10_000)]
    svg = render_svg(read_tracks(_trace(*events)), width=1210)
    boxes = _boxes(svg)
    assert len(boxes) == 1  # 10,000 back-to-back matmuls fill every column: one run
    assert boxes[0][1] == 1000


def test_window_and_errors(tmp_path):
    trace = _trace((0, "dma_copy", 0.0, 10.0), (0, "dma_copy", 90.0, 10.0))
    svg = render_svg(read_tracks(trace), width=1210, start_us=50.0, end_us=100.0)
    [(x, width, _)] = _boxes(svg)
    assert (x, width) == (190 + 800.0, 200.0)
    with pytest.raises(ValueError, match="no instruction events"):
        render_svg(read_tracks({"traceEvents": []}))
    with pytest.raises(ValueError, match="empty time window"):
        render_svg(read_tracks(trace), start_us=5.0, end_us=5.0)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main([str(bad), str(tmp_path / "out.svg")]) == 1
    assert not (tmp_path / "out.svg").exists()


def _matmul_program():
    b = ProgramBuilder("trn2", auto_waits=True)
    a_hbm, b_hbm, c_hbm = (
        b.input("a", (128, 128), "f32"),
        b.input("b", (128, 512), "f32"),
        b.output("c", (128, 512), "f32"),
    )
    a_tile, b_tile, out = b.sbuf("a", (128, 128), "f32"), b.sbuf("b", (128, 512), "f32"), b.sbuf("o", (128, 512), "f32")
    acc = b.psum("acc", (128, 512))
    b.dma(b.ap(a_tile), b.ap(a_hbm), queue=0)
    b.dma(b.ap(b_tile), b.ap(b_hbm), queue=1)
    b.inst("nc_matmul", "tensor", {"dst": b.ap(acc), "stationary": b.ap(a_tile), "moving": b.ap(b_tile)})
    b.inst("tensor_copy", "vector", {"dst": b.ap(out), "src": b.ap(acc)})
    b.dma(b.ap(c_hbm), b.ap(out), queue=2)
    return b.build()


def test_picture_of_a_simulated_run(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)
    _, profile = run_program(_matmul_program(), [a, b])
    trace_path, picture = tmp_path / "trace.json", tmp_path / "run.svg"
    profile.write_chrome_trace(trace_path)
    assert main([str(trace_path), str(picture), "--title", "matmul"]) == 0
    svg = picture.read_text()
    ET.fromstring(svg)  # well-formed
    labels = re.findall(r'font-size="12">([^<]+) <tspan', svg)
    assert labels[0].startswith("TensorE")
    assert {opcode for *_, opcode in _boxes(svg)} >= {"nc_matmul", "dma_copy", "tensor_copy"}
    assert json.loads(trace_path.read_text())["traceEvents"]
