"""No pass keeps state in its module: what one application of a pass knows lives in objects made for it.

A module of lowering/ may define tables (dicts, lists, sets at module level) but no function may change one:
such a table would carry what one conversion learned into the next, and an exception half-way through a
conversion would leave it behind. The check reads the source (ast): a module-level container mutated inside any
function of lowering/ (item assignment or deletion, a mutating method, augmented assignment), or a `global`
statement, fails it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO

LOWERING = REPO / "lowering"
_CONTAINER_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "bytearray"})
_CONTAINER_NODES = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "appendleft",
        "extendleft",
        "sort",
        "reverse",
    }
)


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "neuron_mlir." + ".".join(parts)


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, _CONTAINER_NODES):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return name in _CONTAINER_CALLS
    return False


def _module_containers(tree: ast.Module) -> set[str]:
    """Names bound to a container by a statement at the module's top level."""
    names: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and _is_container(statement.value):
            names |= {target.id for target in statement.targets if isinstance(target, ast.Name)}
        elif (
            isinstance(statement, ast.AnnAssign)
            and _is_container(statement.value)
            and isinstance(statement.target, ast.Name)
        ):
            names.add(statement.target.id)
    return names


def _imported_names(tree: ast.Module, containers: dict[str, set[str]]) -> dict[str, str]:
    """Local name -> '<module>.<name>' for containers of other lowering modules imported by name."""
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in containers:
            for alias in node.names:
                if alias.name in containers[node.module]:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return imported


def _mutations(tree: ast.Module, watched: dict[str, str]) -> list[tuple[int, str]]:
    """(line, what) for each change, inside a function, of a watched module-level name."""
    found: list[tuple[int, str]] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]
    for function in functions:
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found.append((node.lineno, f"global {', '.join(node.names)}"))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
                if isinstance(node.value, ast.Name) and node.value.id in watched:
                    found.append((node.lineno, f"item assignment to {watched[node.value.id]}"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = node.func.value
                if node.func.attr in _MUTATORS and isinstance(target, ast.Name) and target.id in watched:
                    found.append((node.lineno, f"{watched[target.id]}.{node.func.attr}()"))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in watched:
                found.append((node.lineno, f"augmented assignment to {watched[node.target.id]}"))
    return found


def module_state_mutations(root: Path, base: Path = REPO) -> list[str]:
    """Every change of module-level state by a function in the modules under `root` (a package of the repository
    at `base`), as 'path:line: what'."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(root.rglob("*.py"))}
    containers = {_module_name(path, base): _module_containers(tree) for path, tree in trees.items()}
    problems = []
    for path, tree in trees.items():
        module = _module_name(path, base)
        watched = {**{name: f"{module}.{name}" for name in containers[module]}, **_imported_names(tree, containers)}
        for line, what in _mutations(tree, watched):
            problems.append(f"{path.relative_to(base)}:{line}: {what}")
    return problems


def test_no_function_of_lowering_changes_module_state():
    assert module_state_mutations(LOWERING) == []


def test_the_check_finds_module_state(tmp_path):
    """The check itself: a registry filled by one function and cleared by another, a `global`, and a table
    changed through an import from another module are all found."""
    package = tmp_path / "lowering"
    package.mkdir()
    (package / "registry.py").write_text(
        "_seen: dict[str, int] = {}\n"
        "TABLE = {'a': 1}\n"
        "_current = None\n"
        "def note(name):\n    _seen[name] = 1\n"
        "def reset():\n    _seen.clear()\n"
        "def swap(value):\n    global _current\n    _current = value\n"
    )
    (package / "user.py").write_text(
        "from neuron_mlir.lowering.registry import TABLE\ndef extend(name):\n    TABLE.update({name: 2})\n"
    )
    problems = module_state_mutations(package, tmp_path)
    assert [problem.split(": ", 1)[1] for problem in problems] == [
        "item assignment to neuron_mlir.lowering.registry._seen",
        "neuron_mlir.lowering.registry._seen.clear()",
        "global _current",
        "neuron_mlir.lowering.registry.TABLE.update()",
    ]
