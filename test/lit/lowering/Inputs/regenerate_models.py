"""Regenerate the model-set IR the torch-level lit tests run on: `python test/lit/lowering/Inputs/regenerate_models.py`.

It traces examples/models/zoo.py's GPT-2 (inference) as the neuron-mlir backend would and saves the imported
torch-dialect IR with locations. Paths are written relative to the repository (and to site-packages for
transformers' own files) so the files do not depend on where things are installed.
"""

import os
import sys
import sysconfig
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "test"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.zoo import MODELS  # noqa: E402
from support import capture_aten_graphs_with_inputs  # noqa: E402

from neuron_mlir.frontend.compile_graph import ir_text  # noqa: E402
from neuron_mlir.frontend.fx_importer import import_fx_graph  # noqa: E402


def main() -> None:
    model, inputs = MODELS["gpt2"]()
    with torch.no_grad():
        ((graph, graph_inputs),) = capture_aten_graphs_with_inputs(model, *inputs)
    module, _ = import_fx_graph(graph, inputs=graph_inputs)
    text = ir_text(module).replace(sysconfig.get_paths()["purelib"] + "/", "").replace(str(REPO) + "/", "")
    (HERE / "gpt2_forward.torch.mlir").write_text(text)


if __name__ == "__main__":
    main()
