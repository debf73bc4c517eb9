"""The package's layout: layers, no import circles, one flat public API (issue: architecture).

The import graph is read from the source (every ``import`` and ``from ... import``
statement, including those inside functions), not from ``sys.modules``, so a
circle hidden behind a lazy import is found too.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import odeflow

PACKAGE = Path(odeflow.__file__).parent
ROOT = PACKAGE.parent

#: Layer of each top-level subpackage or module; a module may import only from
#: its own layer or lower ones (the front ends and odeflow/__init__ may import anything).
LAYERS = {
    "errors": 0, "numerics": 0, "io": 0, "version": 0, "tables": 0, "families": 0,
    "data": 1,
    "results": 2,
    "fields": 3,
    "solver": 4,
    "analysis": 5, "training": 5,
    "sweeps": 6,
    "testing": 7, "cli": 7, "plots": 7, "__main__": 7,
    "experiments": 7,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The odeflow modules that the module ``name`` imports (any depth of nesting)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "odeflow":
                    out.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "odeflow":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imported_modules(name, path, known) & known for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circle_inside_the_package():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_cycle_finder_finds_a_planted_circle():
    graph = {"odeflow.a": {"odeflow.b"}, "odeflow.b": {"odeflow.c"},
             "odeflow.c": {"odeflow.a"}, "odeflow.d": set()}
    assert find_cycle(graph) == ["odeflow.a", "odeflow.b", "odeflow.c", "odeflow.a"]
    assert find_cycle({"odeflow.a": {"odeflow.b"}, "odeflow.b": set()}) is None


def test_the_import_reader_sees_lazy_imports(tmp_path):
    pkg = tmp_path / "odeflow"
    pkg.mkdir()
    src = pkg / "x.py"
    src.write_text("def f():\n    from .y import g\n    import odeflow.z\n")
    found = imported_modules("odeflow.x", src, {"odeflow.y", "odeflow.z", "odeflow.x"})
    assert found == {"odeflow.y", "odeflow.z"}


def layer(name: str) -> int | None:
    parts = name.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def test_every_module_imports_only_its_own_layer_or_lower():
    wrong = []
    for name, targets in import_graph().items():
        mine = layer(name)
        assert mine is not None or name == "odeflow", f"{name} has no layer in LAYERS"
        if name == "odeflow" or mine == max(LAYERS.values()):
            continue
        for target in targets:
            theirs = layer(target)
            if target == "odeflow" or (theirs is not None and theirs > mine):
                wrong.append(f"{name} -> {target}")
    assert not wrong, "imports from a higher layer: " + ", ".join(sorted(wrong))


def experiments_importers(graph: dict[str, set[str]]) -> set[str]:
    """The modules that import ``odeflow.experiments`` (or a module of it) but are
    neither in that package nor ``odeflow.cli.reproduce*``."""
    def allowed(name: str) -> bool:
        return (name == "odeflow.experiments" or name.startswith("odeflow.experiments.")
                or name.startswith("odeflow.cli.reproduce"))

    return {name for name, targets in graph.items() if not allowed(name)
            and any(t == "odeflow.experiments" or t.startswith("odeflow.experiments.")
                    for t in targets)}


def test_only_the_reproduce_command_imports_the_experiments():
    """The papers' reproductions (``odeflow/experiments/``) import the library, never the
    other way: only ``odeflow reproduce`` (``odeflow/cli/reproduce*.py``) imports them,
    and only inside its functions, so that no other command loads them."""
    graph = import_graph()
    assert not experiments_importers(graph), sorted(experiments_importers(graph))
    planted = {**graph, "odeflow.analysis.levels": {"odeflow.experiments.paper"}}
    assert experiments_importers(planted) == {"odeflow.analysis.levels"}
    at_top = []
    for path in PACKAGE.glob("cli/reproduce*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            at_top += [f"{path.name}: {n}" for n in names if n.startswith("odeflow.experiments")]
    assert not at_top, f"module-level imports of the experiments: {at_top}"


def test_a_vector_field_never_calls_the_solver():
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith("odeflow.fields"):
            assert not any(t.startswith("odeflow.solver") for t in targets), name


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names
                           if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    offenders.append(f"{name}: from {node.module} import {private}")
    assert not offenders, offenders


def test_the_layers_are_folders():
    for folder in ("data", "results", "fields", "solver", "analysis", "training", "sweeps",
                   "cli", "plots", "experiments", "testing"):
        assert (PACKAGE / folder / "__init__.py").is_file(), folder
    flat = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert flat == ["__init__", "__main__", "errors", "io", "numerics", "tables",
                    "version"], flat


#: Public names and what each must be.
PUBLIC_KINDS = {
    **dict.fromkeys(("solve", "gradient_ascent", "train_sgd", "sgd_ensemble", "verify",
                     "solve_snap"), inspect.isfunction),
    **dict.fromkeys(("Trajectory", "DataModel", "SequenceClass", "SnapResult",
                     "InductionData"), inspect.isclass),
    "ValidationError": lambda obj: inspect.isclass(obj) and issubclass(obj, ValueError),
    "SolveError": lambda obj: inspect.isclass(obj) and issubclass(obj, Exception),
    "closed_forms": inspect.ismodule,
    "__version__": lambda obj: isinstance(obj, str) and re.fullmatch(r"\d+\.\d+\.\d+\S*", obj),
}


@pytest.mark.parametrize("name", sorted(PUBLIC_KINDS))
def test_flat_public_api(name):
    assert name in odeflow.__all__
    assert PUBLIC_KINDS[name](getattr(odeflow, name)), f"odeflow.{name} is the wrong kind"


def test_every_public_name_is_defined_and_documented():
    """Every name in ``odeflow.__all__`` resolves; each module, class or function has a
    docstring of its own (a class's ``__doc__`` is not inherited); the rest (constants,
    tables) is not empty."""
    undocumented, empty = [], []
    for name in odeflow.__all__:
        obj = getattr(odeflow, name)
        if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj):
            if not (obj.__doc__ or "").strip():
                undocumented.append(name)
        elif not obj:
            empty.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"
    assert not empty, f"empty public constants: {empty}"


#: Modules that belong to no model family: the layers' shared machinery (bases,
#: registries, the solver, sweeps, file I/O) and the front ends, which serve every
#: family. Every other module belongs to one family: a family's modules carry its
#: name in a part of theirs (``odeflow.fields.induction.population``,
#: ``odeflow.cli.reproduce_induction``); the Scan and Snap family, the first, is the rest.
SHARED_MODULES = {
    "odeflow", "odeflow.__main__", "odeflow.errors", "odeflow.io", "odeflow.numerics",
    "odeflow.version", "odeflow.testing", "odeflow.testing.common", "odeflow.tables",
    "odeflow.data", "odeflow.data.checks", "odeflow.data.forms",
    "odeflow.results", "odeflow.results.solution", "odeflow.results.files",
    "odeflow.families", "odeflow.families.base",
    "odeflow.fields", "odeflow.fields.base",
    "odeflow.fields.optimizers", *(f"odeflow.fields.optimizers.{m}" for m in
                                   ("base", "gradient", "momentum", "adam", "flow")),
    "odeflow.analysis", "odeflow.analysis.check_registry", "odeflow.training",
    "odeflow.training.api",
}
#: Layers whose every module is shared (the solver, sweeps and front ends).
SHARED_LAYERS = {"solver", "sweeps", "cli"}


def family(name: str) -> str:
    """The registered family a module name belongs to, or ``"shared"``."""
    from odeflow.families import families

    parts = name.split(".")
    for other in list(families())[1:]:
        if any(other in part for part in parts):
            return other
    if name in SHARED_MODULES or (len(parts) > 1 and parts[1] in SHARED_LAYERS):
        return "shared"
    if name.startswith("odeflow.plots") and parts[-1] in ("plots", "style", "registry"):
        return "shared"
    return "scan_snap"


def test_no_module_of_one_family_imports_the_other():
    """The model families are siblings behind shared bases: a module of one never
    imports a module of another (the shared layers and front ends serve them all)."""
    wrong = []
    for name, targets in import_graph().items():
        mine = family(name)
        if mine == "shared":
            continue
        for target in targets:
            theirs = family(target)
            if theirs not in ("shared", mine):
                wrong.append(f"{name} ({mine}) -> {target} ({theirs})")
    assert not wrong, "imports across model families: " + ", ".join(sorted(wrong))


#: Shared modules that import a module of a family other than the first (Scan and Snap,
#: whose modules predate the family registry): the packages' re-exports of the
#: induction family's public names (odeflow.testing's among them); the
#: list is exact (a crossing removed is removed here). A new family adds none.
SHARED_TO_FAMILY = {
    ("odeflow.data", "odeflow.data.induction"),
    ("odeflow.results", "odeflow.results.induction"),
    ("odeflow.analysis", "odeflow.analysis.induction"),
    ("odeflow.testing", "odeflow.testing.induction"),
}


def shared_imports_of_families(graph) -> set:
    """``(shared module, family module)`` pairs over the families after the first."""
    from odeflow.families import families

    later = set(list(families())[1:])
    return {(name, target) for name, targets in graph.items() if family(name) == "shared"
            for target in targets if family(target) in later}


def test_shared_modules_import_no_family_module():
    """Shared layers find a family through its declaration (:mod:`odeflow.families`),
    never by importing its modules."""
    graph = import_graph()
    assert shared_imports_of_families(graph) == SHARED_TO_FAMILY, \
        sorted(shared_imports_of_families(graph) ^ SHARED_TO_FAMILY)
    planted = {**graph, "odeflow.solver.api": {"odeflow.fields.induction.population"}}
    assert ("odeflow.solver.api", "odeflow.fields.induction.population") in \
        shared_imports_of_families(planted)


def test_family_rule_sees_a_planted_crossing():
    assert family("odeflow.fields.induction.population") == "induction"
    assert family("odeflow.fields.exact") == "scan_snap"
    assert family("odeflow.solver.api") == "shared"
    assert family("odeflow.data.checks") == "shared"


def test_testing_module_holds_documented_strategies_only():
    """``odeflow.testing`` exports strategies for users' own tests: each a function whose
    numpydoc names what it returns; it stays short and builds nothing of the CLI (the
    project's own fuzzers live in ``tests/fuzzers.py``)."""
    import odeflow.testing as testing

    assert {"data_models", "induction_models", "learning_rates"} <= set(testing.__all__)
    for name in testing.__all__:
        func = getattr(testing, name)
        assert inspect.isfunction(func), name
        doc = inspect.getdoc(func) or ""
        assert "Returns\n-------" in doc, name
        assert "Parameters\n----------" in doc or not inspect.signature(func).parameters, name
    assert not {"cli_argv", "corrupted_bytes", "sweep_config_texts"} & set(dir(testing))
    assert not [m for m in import_graph()["odeflow.testing"] if m.startswith("odeflow.cli")]
    assert all(len(path.read_text().splitlines()) < 500
               for path in (PACKAGE / "testing").glob("*.py"))


def test_derivations_is_installed_as_a_second_top_level_package():
    cfg = (ROOT / "setup.cfg").read_text()
    include = re.search(r"\[options\.packages\.find\]\s*include\s*=([^\[]*)", cfg).group(1)
    assert {"odeflow", "odeflow.*", "derivations"} <= set(include.split())
