"""The package's shape: no import cycle among tinax's own modules, and no layer below jit/
that reaches into the public object's private state."""

from __future__ import annotations

import ast
import pathlib

import pytest

_ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path, known: set[str], module: str | None = None) -> set[str]:
    """The tinax modules ``path`` (the module named ``module``) imports, at run time or
    for type checking alike, at its top or inside a function; a relative import is
    resolved against ``module``'s package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from ..y import z
                assert module is not None, f"{path}: a relative import, and no module name"
                package = module.split(".")
                if path.name != "__init__.py":
                    package.pop()
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(_ROOT.joinpath("tinax").rglob("*.py"))
    known = {_module_name(path) for path in paths}
    return {
        _module_name(path): _imports(path, known, _module_name(path)) - {_module_name(path)}
        for path in paths
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert "tinax._src.budget.counting" in graph  # the parse found the package
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


# The layers of tinax._src, bottom to top: each folder (or top-level module) may import
# only the ones below it. docs/architecture.md draws the same list.
LAYERS = (
    "private",
    "core",
    "diagnosis",
    "buckets",
    "models",
    "objects",
    "parallel",
    "observe",
    "audit",
    "budget",
    "jit",
    "warm",
    "testing",
)


def unit_of(module: str) -> str | None:
    """The folder (or top-level module) of tinax._src that ``module`` belongs to."""
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[:2] == ["tinax", "_src"] else None


def unit_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """``{unit: {unit it imports: [module -> module, ...]}}`` between different units."""
    units: dict[str, dict[str, list[str]]] = {}
    for module, targets in graph.items():
        here = unit_of(module)
        if here is None:
            continue
        edges = units.setdefault(here, {})
        for target in targets:
            there = unit_of(target)
            if there is not None and there != here:
                edges.setdefault(there, []).append(f"{module} -> {target}")
    return units


def test_no_folder_imports_another_in_a_circle():
    """Typing-only imports count: a reader must be able to say which folder stands on
    which."""
    units = unit_graph(import_graph())
    assert {"core", "diagnosis", "jit", "budget"} <= set(units)
    cycle = find_cycle({unit: set(edges) for unit, edges in units.items()})
    assert cycle is None, " -> ".join(cycle or [])


def test_every_folder_stands_above_the_folders_it_imports():
    units = unit_graph(import_graph())
    assert set(units) <= set(LAYERS), f"not in LAYERS: {sorted(set(units) - set(LAYERS))}"
    upward = [
        line
        for unit, edges in units.items()
        for target, lines in edges.items()
        if LAYERS.index(target) > LAYERS.index(unit)
        for line in lines
    ]
    assert upward == [], "imports a layer above:\n" + "\n".join(upward)


# The public modules re-export every layer: a layer that imported one would stand on all of
# them, out of the layer graph's sight (they belong to no folder of tinax._src).
PUBLIC_MODULES = ("tinax", "tinax.jit", "tinax.parallel", "tinax.testing")


def test_no_layer_imports_a_public_module():
    graph = import_graph()
    assert set(PUBLIC_MODULES) <= set(graph)
    found = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if unit_of(module) is not None
        for target in sorted(targets)
        if target in PUBLIC_MODULES
    ]
    assert found == []


def test_layers_call_the_private_folder_through_its_attributes():
    """Modules outside private/ import the folder and call ``private.X``, never a name or
    a room of it: a test that patches ``private.X`` then patches what they call."""
    direct = []
    for path in sorted(_ROOT.joinpath("tinax").rglob("*.py")):
        if _module_name(path).startswith("tinax._src.private"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "tinax._src.private"
            ):
                direct.append(f"{_module_name(path)}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                direct.extend(
                    f"{_module_name(path)}: import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("tinax._src.private.")
                )
    assert direct == []


# The rooms of models/nnx, bottom to top: each may import only the ones before it.
NNX_ROOMS = (
    "classes",
    "messages",
    "checks",
    "trees",
    "watch",
    "layout",
    "tracing",
    "propagate",
)


def test_every_room_of_models_nnx_stands_above_the_rooms_it_imports():
    prefix = "tinax._src.models.nnx."
    graph = import_graph()
    rooms = {module[len(prefix) :] for module in graph if module.startswith(prefix)}
    assert rooms == set(NNX_ROOMS), f"not in NNX_ROOMS: {sorted(rooms ^ set(NNX_ROOMS))}"
    upward = [
        f"{prefix}{room} -> {target}"
        for room in NNX_ROOMS
        for target in sorted(graph[prefix + room])
        if target.startswith(prefix)
        and NNX_ROOMS.index(target[len(prefix) :]) >= NNX_ROOMS.index(room)
    ]
    assert upward == [], "imports a room above:\n" + "\n".join(upward)


def test_a_folder_circle_is_found(tmp_path):
    graph = {
        "tinax._src.core.validation": {"tinax._src.jit.common"},
        "tinax._src.jit.common": {"tinax._src.core.validation"},
    }
    units = unit_graph(graph)
    assert units["core"] == {"jit": ["tinax._src.core.validation -> tinax._src.jit.common"]}
    assert find_cycle({unit: set(edges) for unit, edges in units.items()}) == [
        "core",
        "jit",
        "core",
    ]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert find_cycle(graph) == expected


def test_imports_from_the_package_are_seen(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from tinax._src.budget import counting\n"
        "if TYPE_CHECKING:\n"
        "    from tinax._src.diagnosis.record import TracedSignature\n"
        "import tinax._src.observe\n"
    )
    known = {
        "tinax._src.budget",
        "tinax._src.budget.counting",
        "tinax._src.diagnosis.record",
        "tinax._src.observe",
    }
    assert _imports(module, known) == {
        "tinax._src.budget",
        "tinax._src.budget.counting",
        "tinax._src.diagnosis.record",
        "tinax._src.observe",
    }


def test_imports_inside_functions_and_relative_imports_are_seen(tmp_path):
    room = tmp_path / "counting.py"
    room.write_text(
        "def later():\n"
        "    from tinax.jit import bounded_jit\n"
        "    from . import compiles\n"
        "    from ..diagnosis.record import TracedSignature\n"
        "    from .. import observe\n"
    )
    known = {
        "tinax.jit",
        "tinax._src",
        "tinax._src.budget.compiles",
        "tinax._src.diagnosis.record",
        "tinax._src.observe",
    }
    assert _imports(room, known, "tinax._src.budget.counting") == {
        "tinax.jit",
        "tinax._src",
        "tinax._src.budget.compiles",
        "tinax._src.diagnosis.record",
        "tinax._src.observe",
    }
    package = tmp_path / "__init__.py"
    package.write_text("from . import compiles\n")
    assert _imports(package, known, "tinax._src.budget") == {"tinax._src.budget.compiles"}


def test_the_architecture_page_names_every_module():
    """docs/architecture.md is the map: every module of the package is on it, in its room."""
    page = (_ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for path in sorted(_ROOT.joinpath("tinax", "_src").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        room = path.parent.name
        if room != "_src" and f"`{room}/`" not in page:
            missing.append(f"{room}/")
        if f"`{path.stem}`" not in page:
            missing.append(path.stem)
    assert missing == []


# --- the layers below jit/ are given a handle, never the public object ----------------------


def _public_private_names() -> frozenset[str]:
    """The private attribute names the public classes have: what their own classes
    define or declare (methods, the first-use parts, annotated state), and what an
    object of each holds in its ``__dict__`` once built and called."""
    import jax.numpy as jnp

    from tinax.jit import BatchedJit, BoundedJit

    names: set[str] = set(_own_keys_in_jit())
    for kind in (BoundedJit, BatchedJit):
        for klass in kind.__mro__:
            if klass.__module__.startswith("tinax."):
                names.update(vars(klass))
                names.update(getattr(klass, "__annotations__", {}))
    for owner in (
        BoundedJit(lambda x: x + 1, max_traces=1),
        BatchedJit(lambda x: x + 1, max_traces=1),
        BoundedJit(lambda x: x + 1, max_traces=1, donate_argnums=0),
    ):
        names.update(vars(owner))
        owner(jnp.ones((2, 3)))
        names.update(vars(owner))
    return frozenset(name for name in names if name.startswith("_") and not name.startswith("__"))


def _own_keys_in_jit() -> set[str]:
    """The private keys jit/ writes or reads in an object's ``__dict__`` (``own["_x"]``,
    ``owner.__dict__.get("_x")``): state some objects hold only at times."""
    keys: set[str] = set()
    for path in _ROOT.joinpath("tinax", "_src", "jit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Subscript):
                target, key = node.value, node.slice
            elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
                target, key = node.func.value, node.args[0]
            else:
                continue
            named_own = isinstance(target, ast.Name) and target.id == "own"
            a_dict = isinstance(target, ast.Attribute) and target.attr == "__dict__"
            if (named_own or a_dict) and isinstance(key, ast.Constant):
                if isinstance(key.value, str) and key.value.startswith("_"):
                    keys.add(key.value)
    return keys


def _private_sites(source: str, names: frozenset[str]) -> list[str]:
    """``x._name``, ``x.__dict__["_name"]`` (also ``.get``, ``.pop``, ``.setdefault``) and
    ``getattr(x, "_name")`` in ``source``, where ``_name`` is one of ``names`` and ``x`` is
    not ``self`` or ``cls``: each as its name."""

    def receiver_is_own(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in ("self", "cls")

    def private_key(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and node.value in names:
            return str(node.value)
        return None

    def of_dict(node: ast.expr) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "__dict__"
            and not receiver_is_own(node.value)
        )

    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in names:
            if not receiver_is_own(node.value):
                found.append(node.attr)
        elif isinstance(node, ast.Subscript) and of_dict(node.value):
            key = private_key(node.slice)
            if key is not None:
                found.append(key)
        elif isinstance(node, ast.Call) and node.args:
            function = node.func
            key = private_key(node.args[0])
            if (
                isinstance(function, ast.Attribute)
                and function.attr in ("get", "pop", "setdefault")
                and of_dict(function.value)
                and key is not None
            ):
                found.append(key)
            elif (
                isinstance(function, ast.Name)
                and function.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2
                and not receiver_is_own(node.args[0])
            ):
                name = private_key(node.args[1])
                if name is not None:
                    found.append(name)
    return found


def _private_sites_below_jit() -> dict[str, int]:
    """``{"room/module.py: _name": count}`` for every module under ``tinax/_src`` outside
    ``jit/`` (`_private_sites`)."""
    names = _public_private_names()
    base = _ROOT.joinpath("tinax", "_src")
    sites: dict[str, int] = {}
    for path in sorted(base.rglob("*.py")):
        relative = path.relative_to(base).as_posix()
        if relative.startswith("jit/"):
            continue
        for name in _private_sites(path.read_text(encoding="utf-8"), names):
            key = f"{relative}: {name}"
            sites[key] = sites.get(key, 0) + 1
    return sites


def test_no_layer_below_jit_reads_a_private_attribute_of_the_public_object():
    """The layers below jit/ are given the object's handle (`objects.handle`), and read
    the object only as `objects.handle.Budgeted`: none reads its private state."""
    assert _private_sites_below_jit() == {}


def test_the_public_objects_have_what_the_layers_below_may_read():
    """`objects.handle.Budgeted` is what `Handle.public` gives the layers below jit/: its
    members are public attributes of both classes (type-checked below jit/ as such)."""
    from tinax._src.objects import handle
    from tinax.jit import BatchedJit, BoundedJit

    members = sorted(name for name in vars(handle.Budgeted) if not name.startswith("_"))
    assert members == ["function", "max_traces", "traced_signatures", "traces_used"]
    for kind in (BoundedJit, BatchedJit):
        built = kind(len, max_traces=2)
        assert built.function is len and built.max_traces == 2
        assert (built.traces_used, built.traced_signatures) == (0, ())


def test_a_private_read_of_the_public_object_is_found():
    names = _public_private_names()
    assert {"_ledger", "_static", "_signature", "_call", "_reused"} <= names
    planted = (
        "def f(owner, self):\n"
        "    owner._static\n"
        "    self._static\n"
        "    owner.__dict__['_call'] = 1\n"
        "    owner.__dict__.pop('_plan', None)\n"
        "    getattr(owner, '_ledger')\n"
        "    owner.function\n"
    )
    assert _private_sites(planted, names) == ["_static", "_call", "_plan", "_ledger"]


# --- a mode is a class, not an if -----------------------------------------------------------
# In jit/, the calling conventions (jit/conventions: plain, equinox's non-arrays, nnx's
# write-back) are composed, never asked for: no branch tests a mode, but plan.parse, which
# chooses the convention.
_MODE_NAMES = {"static_nonarrays", "propagate_updates", "write_back", "Propagating"} | {
    "Plain",
    "PLAIN",
    "NonArrays",
    "WriteBack",
    "WRITE_BACK",
}
_MODE_ATTRIBUTES = _MODE_NAMES | {"nonarrays"}  # Statics.nonarrays; not the module nonarrays
_CHOOSES_THE_CONVENTION = {"plan.py"}


def _tests(tree: ast.AST) -> list[ast.expr]:
    """The conditions of every branch: if, while, conditional expression, comprehension
    filter, assert, match subject, and the operands of and/or (a short-circuit branch)."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            found.append(node.test)
        elif isinstance(node, ast.comprehension):
            found.extend(node.ifs)
        elif isinstance(node, ast.Match):
            found.append(node.subject)
        elif isinstance(node, ast.BoolOp):
            found.extend(node.values)
    return found


def mode_branches(path: pathlib.Path) -> list[str]:
    """``file:line name`` of each branch of ``path`` that tests a mode."""
    found = []
    for test in _tests(ast.parse(path.read_text(encoding="utf-8"))):
        for node in ast.walk(test):
            if isinstance(node, ast.Name) and node.id in _MODE_NAMES:
                found.append(f"{path.name}:{test.lineno} {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in _MODE_ATTRIBUTES:
                found.append(f"{path.name}:{test.lineno} {node.attr}")
    return sorted(set(found))


# Where a branch on a mode is the idea itself: models/ implements the modes (and refuses
# two together), diagnosis/ records whether a trace held non-arrays static (a fact of the
# trace, compared as static arguments are).
_MODES_ARE_THE_IDEA = ("models", "diagnosis")


def test_no_branch_on_a_mode_outside_the_plan_and_the_modes_own_layers():
    """jit/ composes the convention its plan chose; the other layers (budget/, observe/,
    warm/...) are given what the convention decides (as `Handle.user_arguments`), never
    the mode to branch on."""
    base = _ROOT / "tinax" / "_src"
    found = [
        f"{path.parent.name}/{branch}"
        for path in sorted(base.rglob("*.py"))
        if path.name not in _CHOOSES_THE_CONVENTION or path.parent.name != "jit"
        if path.relative_to(base).parts[0] not in _MODES_ARE_THE_IDEA
        for branch in mode_branches(path)
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "if statics.nonarrays:\n    pass\n",
        "call = a if propagate_updates else b\n",
        "ok = isinstance(jitted, nnx_propagate.Propagating) and x\n",
        "kept = [x for x in xs if plan.static_nonarrays]\n",
        "if isinstance(plan.convention, conventions.NonArrays):\n    pass\n",
    ],
)
def test_a_branch_on_a_mode_is_found(tmp_path, source):
    path = tmp_path / "room.py"
    path.write_text(source, encoding="utf-8")
    assert len(mode_branches(path)) == 1


def test_a_module_named_for_a_mode_is_no_branch(tmp_path):
    path = tmp_path / "room.py"
    path.write_text("if nonarrays.hashable(value):\n    pass\n", encoding="utf-8")
    assert mode_branches(path) == []


# --- rooms a reader can hold in mind ---------------------------------------------------------

MAX_LINES = 600
VAGUE_NAMES = frozenset({"common", "utils", "util", "helpers", "misc", "shared", "base"})


def test_no_room_is_over_600_lines_or_named_for_no_idea():
    """A module is one idea: at most 600 lines, and named for what it holds."""
    found = []
    for path in sorted(_ROOT.joinpath("tinax").rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(_ROOT)}: {lines} lines")
        if path.stem in VAGUE_NAMES or path.parent.name in VAGUE_NAMES:
            found.append(f"{path.relative_to(_ROOT)}: named for no idea")
    assert found == []
