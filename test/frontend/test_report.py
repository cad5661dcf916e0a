"""Attribution of simulated time to module paths and phases."""

from dataclasses import dataclass, field

from neuron_mlir.frontend.report import busy_by_module, combined_trace, module_of, module_report, phase_of


@dataclass
class FakeProfile:
    location_ns: dict[str, float]
    total_ns: float = 100.0
    target: str = "trn2"
    events: list = field(default_factory=list)

    def chrome_trace(self):
        return {"traceEvents": [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "x"}}]}


def test_module_and_phase_parsing():
    assert module_of("model.py:12 (model.layers.0.mlp)") == "model.layers.0.mlp"
    assert module_of("model.py:12") == "(no module)"
    assert module_of("model.head") == "model.head"
    assert phase_of("graph1_backward") == "backward"
    assert phase_of("graph0_forward") == "forward"
    assert phase_of("graph3_inference") == "forward"


def test_time_rolls_up_the_module_hierarchy_per_phase():
    profiles = {
        "graph0_forward": FakeProfile({"m.py:3 (model.a.b)": 10.0, "m.py:4 (model.a.c)": 5.0, "m.py:9": 1.0}),
        "graph1_backward": FakeProfile({"m.py:3 (model.a.b)": 20.0}),
    }
    table = busy_by_module(profiles)
    assert table["model.a.b"] == {"forward": 10.0, "backward": 20.0}
    assert table["model.a"] == {"forward": 15.0, "backward": 20.0}
    assert table["model"] == {"forward": 15.0, "backward": 20.0}
    assert table["(no module)"] == {"forward": 1.0}
    text = module_report(profiles)
    assert "model.a.b" in text
    assert "backward" in text
    assert "model.a.b" not in module_report(profiles, max_depth=2)


def test_combined_trace_has_a_process_per_graph():
    profiles = {"graph0_forward": FakeProfile({}), "graph1_backward": FakeProfile({})}
    names = [e["args"]["name"] for e in combined_trace(profiles)["traceEvents"] if e["name"] == "process_name"]
    assert names == ["graph0_forward (forward, trn2)", "graph1_backward (backward, trn2)"]


def test_eager_work_is_told_from_compiled_graphs_and_tabled_by_op_and_line():
    from neuron_mlir.frontend.device.sources import EagerTime
    from neuron_mlir.frontend.report import eager_report, is_eager_profile

    assert is_eager_profile("graph3_eager_mul_out")
    assert is_eager_profile("device_copy_float32_float32_4x4")
    assert not is_eager_profile("graph0_forward")
    assert not is_eager_profile("graph1_backward")
    times = {
        ("aten.mm.out", "model.py:7"): EagerTime(calls=3, simulated_ns=3000.0),
        ("aten.mm.out", "MmBackward0 (backward)"): EagerTime(calls=1, simulated_ns=1000.0),
        ("aten.native_batch_norm.default", "model.py:9"): EagerTime(calls=2, host_calls=2),
    }
    lines = eager_report(times).splitlines()
    assert lines[0].startswith("eager ops on the device: 6 calls, 4.000 us simulated")
    rows = [line.split() for line in lines[3:]]
    assert rows[0] == ["aten.mm.out", "3", "0", "3.000", "75.0%", "model.py:7"]
    assert rows[1] == ["aten.mm.out", "1", "0", "1.000", "25.0%", "MmBackward0", "(backward)"]
    assert rows[2] == ["aten.native_batch_norm.default", "2", "2", "0.000", "0.0%", "model.py:9"]
