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
