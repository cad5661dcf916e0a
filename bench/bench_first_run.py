"""The simulator's first run of compiled graphs against their steady runs, old code and new taking turns.

    python bench/bench_first_run.py [--models gpt2,llama] [--modes infer,train] [--repeat 8] [--rounds 4]
                                    [--against /path/to/a/worktree/of/another/commit] [--captures graphs.pickle]

Each model and mode of the zoo (`examples/models/zoo.py`) is compiled once in a child process (compile cache off)
and the programs of its first call are kept as bundles with the inputs their first run got (`--captures` keeps
them in a file, and a later invocation given the same file reads them instead of compiling). Then children time,
per graph, the first run of a program read back from its bundle (a fresh `ValidatedProgram`: plans, walk, tape,
analyses, race checking on) and the steady runs after two more, in CPU time of the process
(`time.process_time`); `--rounds` children of `--repeat` first runs each per side. With `--against`, the children
alternate between this checkout's code and the other worktree's (run with this checkout's virtual environment,
whose editable install is pointed at that worktree), so that both see the same load; the table gives medians and
minima of the first runs before and after, and the median steady run after.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_CAPTURE = textwrap.dedent(
    """
    import os, pickle, sys
    sys.path.insert(0, {examples!r})
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    import torch
    import neuron_mlir.runtime.simulator as simulator
    from neuron_mlir.runtime.bundle import encode_bundle
    from models.zoo import MODELS, without_dropout
    name, mode = {name!r}, {mode!r}
    model, inputs = MODELS[name]()
    graphs, run_validated = [], simulator.run_validated

    def captured(validated, arrays, **options):
        graphs.append((
            encode_bundle(validated), [np.array(a, copy=True) for a in arrays], tuple(options.get("scalars", ())),
            options.get("check_races", True),
        ))
        return run_validated(validated, arrays, **options)

    simulator.run_validated = captured
    if mode == "train":
        without_dropout(model.train())
    compiled = torch.compile(model, backend="neuron-mlir")
    if mode == "train":
        output = compiled(*inputs)
        output = output[0] if isinstance(output, (tuple, list)) else output
        output.float().square().mean().backward()
    else:
        with torch.no_grad():
            compiled(*inputs)
    with open({path!r}, "wb") as handle:
        pickle.dump(graphs, handle)
    """
)

_TIME = textwrap.dedent(
    """
    import sys
    root = {root!r}
    if root:
        # this checkout's editable install, pointed at the other worktree's sources
        for name in list(sys.modules):
            if name.startswith("__editable__") and hasattr(sys.modules[name], "MAPPING"):
                mapping = sys.modules[name].MAPPING
                for key, value in list(mapping.items()):
                    mapping[key] = value.replace({here!r}, root)
    import gc, json, pickle, time
    from neuron_mlir.runtime import simulator
    from neuron_mlir.runtime.bundle import read_validated_bundle
    assert not root or simulator.__file__.startswith(root), simulator.__file__
    with open({captures!r}, "rb") as handle:
        captures = pickle.load(handle)
    found = {{}}
    for key, graphs in captures.items():
        for number, (raw, inputs, scalars, races) in enumerate(graphs):
            firsts, steadies = [], []
            for _ in range({repeat}):
                validated = read_validated_bundle(raw)
                gc.collect()
                started = time.process_time()
                simulator.run_validated(validated, inputs, scalars=scalars, check_races=races, share_profile=True)
                firsts.append(time.process_time() - started)
                for _ in range(2):
                    simulator.run_validated(validated, inputs, scalars=scalars, check_races=races, share_profile=True)
                started = time.process_time()
                for _ in range(5):
                    simulator.run_validated(validated, inputs, scalars=scalars, check_races=races, share_profile=True)
                steadies.append((time.process_time() - started) / 5)
            found[f"{{key}} {{number}}"] = (len(validated.instructions), firsts, steadies)
    print(json.dumps(found))
    """
)


def capture(names: list[str], modes: list[str], path: Path) -> None:
    captures: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            for mode in modes:
                graphs = Path(directory) / f"{name}-{mode}.pickle"
                code = _CAPTURE.format(examples=str(REPO / "examples"), name=name, mode=mode, path=str(graphs))
                env = {**os.environ, "NEURON_MLIR_CACHE_DIR": "off"}
                subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
                with open(graphs, "rb") as handle:
                    captures[f"{name} {mode}"] = pickle.load(handle)
    with open(path, "wb") as handle:
        pickle.dump(captures, handle)


def timed(captures: Path, repeat: int, root: str) -> dict[str, tuple[int, list[float], list[float]]]:
    code = _TIME.format(root=root, here=str(REPO), captures=str(captures), repeat=repeat)
    completed = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--modes", default="infer,train")
    parser.add_argument("--repeat", type=int, default=8, help="first runs per graph in each child")
    parser.add_argument("--rounds", type=int, default=1, help="children per side")
    parser.add_argument("--against", default="", help="a worktree of the commit to compare with")
    parser.add_argument("--captures", default="", help="a file of captured graphs, made if it does not exist")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        captures = Path(args.captures) if args.captures else Path(directory) / "graphs.pickle"
        if not captures.exists():
            capture([n for n in args.models.split(",") if n], [m for m in args.modes.split(",") if m], captures)
        sides = {"after": "", "before": str(Path(args.against).resolve())} if args.against else {"after": ""}
        results: dict[str, dict[str, tuple[int, list[float], list[float]]]] = {side: {} for side in sides}
        loads = []
        for _ in range(args.rounds):
            for side, root in sides.items():
                loads.append(os.getloadavg()[0])
                for key, (count, firsts, steadies) in timed(captures, args.repeat, root).items():
                    entry = results[side].setdefault(key, (count, [], []))
                    entry[1].extend(firsts)
                    entry[2].extend(steadies)
    print(f"load average {min(loads):.1f} to {max(loads):.1f}; CPU ms, medians (minima) of {args.repeat * args.rounds}")
    for key, (count, firsts, steadies) in results["after"].items():
        after = f"{statistics.median(firsts) * 1e3:7.1f} ({min(firsts) * 1e3:6.1f})"
        line = f"{key:<18} {count:>5} instructions  first run "
        if "before" in results:
            _, old, _ = results["before"][key]
            line += f"{statistics.median(old) * 1e3:7.1f} ({min(old) * 1e3:6.1f}) -> "
        print(f"{line}{after}  steady run {statistics.median(steadies) * 1e3:.2f}")


if __name__ == "__main__":
    main()
