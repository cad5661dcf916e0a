"""Regenerate the MLP IR these lit tests run passes on: `python test/lit/lowering/Inputs/regenerate.py`.

It traces examples/mlp.py's MLP (300 -> 520 -> 130 -> 10, batch 37) forward and backward as the neuron-mlir
backend would, and saves the IR before every stage of the default pipeline. Source paths are written relative
to the repository so the files do not depend on where it is checked out.
"""

import sys
from pathlib import Path

import torch
from xdsl.context import Context

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "test"))

from mlp import MLP  # noqa: E402
from support import capture_aten_graphs  # noqa: E402

from neuron_mlir.frontend.compile_graph import ir_text  # noqa: E402
from neuron_mlir.frontend.fx_importer import import_fx_graph  # noqa: E402
from neuron_mlir.lowering.pipelines import run_pipeline  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    graphs = capture_aten_graphs(MLP(), torch.randn(37, 300), backward=True)
    saved: set[str] = set()
    for kind, graph in zip(("forward", "backward"), graphs, strict=True):
        module, _ = import_fx_graph(graph)

        def save(stage: str, current, kind: str = kind) -> None:
            if stage == "torch" and kind in saved:
                return  # <kind>.torch.mlir stays the imported IR (the input of the lit tests), not the torch stage's
            saved.add(kind)
            text = ir_text(current).replace(str(REPO) + "/", "")
            (HERE / f"mlp_{kind}.{stage}.mlir").write_text(text)

        save("torch", module)
        run_pipeline(Context(), module, after_stage=save)


if __name__ == "__main__":
    main()
