"""Finding and checking the pipelines' `defs.yaml` files, then building them through Dagster's component tree.

Each file is validated against the `RetrievalPipeline` schema first, so a mistake is reported as
`<file>:<line>: attributes.<field>: <what is wrong>` instead of a stack of union-type alternatives; names and
landings are checked to be unique across pipelines.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import ValidationError

from runtime_ops.components.retrieval_pipeline import RetrievalPipeline
from runtime_ops.embedders.token_counts import check_chunking
from runtime_ops.errors import UserError
from runtime_ops.pipeline.attributes import PipelineAttributes
from runtime_ops.pipeline.resolve import LOADING_SETTINGS, DeclarationError, embedder_spec, landing_uri, resolve_spec
from runtime_ops.pipeline.spec import ChunkingSpec, PipelineSpec
from runtime_ops.settings import Settings, get_settings

COMPONENT_TYPE = "runtime_ops.components.RetrievalPipeline"
GATE_TYPE = "runtime_ops.components.ApprovalGate"
BUILTIN_DEFS = Path(__file__).resolve().parent.parent / "defs"


class PipelineConfigError(UserError, ValueError):
    """A defs.yaml is unusable; the message names the file, the line and the field."""


@dataclass(frozen=True)
class DeclaredPipeline:
    name: str
    path: Path
    line: int
    landing: str | None
    tree: Any = field(default=None, compare=False, repr=False)  # the YAML's source positions

    def line_of(self, path: Sequence[str | int]) -> int:
        """The line of the YAML node at `path` (or of the deepest one of it that is there)."""
        return _line_of(self.tree, path) if self.tree is not None else self.line


def _line_of(tree: Any, path: Sequence[str | int]) -> int:
    # The deepest position the error path still reaches (an unknown key is reported at its own line).
    node, line = tree, tree.position.start.line
    for part in path:
        child = node.children.get(part) if node is not None else None
        if child is None:
            break
        node, line = child, child.position.start.line
    return line


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _strip_templates(value: Any) -> Any:
    # Jinja-templated values (`{{ env('X', '1') }}`) are rendered by Dagster later; check the rest now.
    if isinstance(value, dict):
        return {k: _strip_templates(v) for k, v in value.items() if not _templated(v)}
    if isinstance(value, list):
        return [_strip_templates(v) for v in value if not _templated(v)]
    return value


def _read(path: Path) -> str:
    """The text of a defs.yaml; PipelineConfigError names the file and what is wrong with it."""
    if path.is_dir():
        raise PipelineConfigError(
            f"{path}: is a folder, not a file; a pipeline is declared in a file named defs.yaml (rename the folder)"
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise PipelineConfigError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise PipelineConfigError(
            f"{path}:{line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8"
        ) from None
    return text


def check_file(path: Path) -> DeclaredPipeline | None:
    """Validate one defs.yaml; None when it declares another component type (Dagster loads those)."""
    import yaml
    from dagster_shared.yaml_utils import parse_yamls_with_source_position

    try:
        documents = parse_yamls_with_source_position(_read(path), filename=str(path))
    except yaml.YAMLError as exc:  # one line: where the problem is and what it is
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise PipelineConfigError(f"{path}:{mark.line + 1 if mark else 1}: not valid YAML: {problem}") from None
    if not documents or (len(documents) == 1 and documents[0].value is None):
        raise PipelineConfigError(
            f"{path}: is empty; declare a pipeline in it (type: {COMPONENT_TYPE} and its attributes, as "
            "runtime_ops/defs/demo/defs.yaml does) or remove it"
        )
    if len(documents) > 1:
        raise PipelineConfigError(
            f"{path}: holds {len(documents)} YAML documents (separated by ---); declare one pipeline per defs.yaml, "
            "each in a folder of its own"
        )
    [parsed] = documents
    doc, tree = parsed.value, parsed.source_position_tree
    if not isinstance(doc, dict) or doc.get("type") != COMPONENT_TYPE:
        return None
    unknown = sorted(set(doc) - {"type", "attributes", "requirements", "post_processing"})
    if unknown:
        raise PipelineConfigError(f"{path}:{_line_of(tree, [unknown[0]])}: unknown key {unknown[0]!r}")
    attrs = doc.get("attributes")
    if not isinstance(attrs, dict):
        raise PipelineConfigError(f"{path}:{_line_of(tree, ['attributes'])}: attributes: must be a mapping")
    try:
        model = PipelineAttributes.model_validate(_strip_templates(attrs))
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = [p for p in err["loc"] if isinstance(p, str | int)]
            field = ".".join(str(p) for p in ["attributes", *loc])
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{path}:{_line_of(tree, ['attributes', *loc])}: {field}: {msg}")
        raise PipelineConfigError("\n".join(lines)) from None  # a line per mistake, each naming file, line and field
    _check_chunking(model, path, tree)
    return DeclaredPipeline(
        name=model.name,
        path=path,
        line=_line_of(tree, ["attributes", "name"]),
        landing=None if _templated(attrs.get("landing", {}).get("uri")) else model.landing.uri,
        tree=tree,
    )


def _check_chunking(model: PipelineAttributes, path: Path, tree: Any) -> None:
    """Chunks longer than the embedder's window would be cut before embedding: refused at load."""
    declared = ChunkingSpec(model.chunking.max_tokens, model.chunking.overlap_tokens)
    problem = check_chunking(embedder_spec(model, path.parent), declared)
    if problem is not None:
        line = _line_of(tree, ["attributes", "chunking", problem.field])
        raise PipelineConfigError(f"{path}:{line}: attributes.chunking.{problem.field}: {problem.message}")


def check_folder(folder: Path) -> list[DeclaredPipeline]:
    if not folder.is_dir():
        raise PipelineConfigError(f"{folder}: no such pipelines folder (RUNTIME_OPS_PIPELINES_DIR)")
    declared = [p for f in sorted(folder.rglob("defs.yaml")) if (p := check_file(f)) is not None]
    seen: dict[str, DeclaredPipeline] = {}
    for p in declared:
        if p.name in seen:
            raise PipelineConfigError(
                f"{p.path}:{p.line}: attributes.name: pipeline {p.name!r} is already declared in {seen[p.name].path}"
            )
        seen[p.name] = p
    return declared


def check_landings(declared: Sequence[DeclaredPipeline], settings: Settings) -> None:
    """Two pipelines reading one landing would ingest each other's documents: refuse at load."""
    owners: dict[str, DeclaredPipeline] = {}
    for p in declared:
        uri = landing_uri(p.landing, settings).rstrip("/")
        other = owners.setdefault(uri, p)
        if other is not p:
            raise PipelineConfigError(
                f"{p.path}:{p.line}: attributes.landing.uri: pipelines {other.name!r} ({other.path}) and {p.name!r} "
                f"both land in {uri}; give each its own landing.uri"
            )


def _defs_module(folder: Path) -> types.ModuleType:
    # Dagster's component tree walks a module; the pipelines folder holds YAML only (no __init__.py, so no
    # Python module of ours is loaded as definitions), so give the tree a namespace-like module over it.
    name = "runtime_ops.defs" if folder == BUILTIN_DEFS else f"runtime_ops_pipelines_{abs(hash(str(folder))):x}"
    module = sys.modules.get(name)
    if module is None or list(getattr(module, "__path__", [])) != [str(folder)]:
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__file__ = None
        sys.modules[name] = module
    return module


def load_pipelines(folder: Path, settings: Settings) -> dg.Definitions:
    from dagster.components.core.component_tree import ComponentTree

    folder = folder.resolve()
    declared = check_folder(folder)
    check_landings(declared, settings)
    # Settings-dependent refusals (a pipeline anyone could approve) with their own message, before Dagster's
    # component tree would wrap them in its own.
    _resolve(declared, settings)
    if not declared:
        raise PipelineConfigError(
            f"{folder}: no defs.yaml declares a {COMPONENT_TYPE}; add <name>/defs.yaml (see runtime_ops/defs/demo)"
        )
    tree = ComponentTree.from_module(defs_module=_defs_module(folder), project_root=folder.parent)
    token = LOADING_SETTINGS.set(settings)
    try:
        declared_gates(folder, [p.name for p in declared])  # refuses a gate named like a pipeline
        return _build(tree, [p.path for p in declared] + other_components(folder))
    finally:
        LOADING_SETTINGS.reset(token)


def declared_gates(folder: Path, pipelines: Sequence[str] = ()) -> list[Path]:
    """The defs.yaml files of the folder that declare an `ApprovalGate` on one of this code location's assets. A
    gate's name is the scope of its requests: one that is also a pipeline's would mix them, so it is refused."""
    import yaml

    from runtime_ops.pipeline.gate_spec import default_name

    gates = []
    for path in sorted(folder.rglob("defs.yaml")):
        doc = yaml.safe_load(_read(path))
        if isinstance(doc, dict) and doc.get("type") == GATE_TYPE:
            attrs = doc.get("attributes") or {}
            name = attrs.get("name") or default_name(tuple(str(attrs.get("target", "")).split("/")))
            if name in pipelines:
                raise PipelineConfigError(
                    f"{path}: attributes.name: approval gate {name!r} has the name of a pipeline; its requests would "
                    "mix with the pipeline's: set another name"
                )
            gates.append(path)
    return gates


def _build(tree: Any, declared: Sequence[Path]) -> dg.Definitions:
    with warnings.catch_warnings():
        # The component machinery tags its own code references with beta classes: not ours to act on.
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        # Each declared folder on its own: the tree's root would also import every installed integration's
        # component types (seconds of boto3 etc.) to describe them in repository metadata we do not use.
        return dg.Definitions.merge(*(tree.build_defs(path.parent) for path in declared))


def other_components(folder: Path) -> list[Path]:
    """The defs.yaml files under `folder` that declare another component type than RetrievalPipeline (e.g. the
    InferencePipeline of `defs/tickets`): Dagster's component tree checks and builds them as they are."""
    return [f for f in sorted(folder.rglob("defs.yaml")) if check_file(f) is None]


def _raw_attributes(path: Path) -> dict[str, Any]:
    import yaml

    doc = yaml.safe_load(path.read_text())
    return dict(doc["attributes"])


def load_specs(settings: Settings | None = None) -> dict[str, PipelineSpec]:
    """Every declared pipeline's resolved spec, by name, without building Dagster definitions (CLI, ops API)."""
    settings = settings or get_settings()
    folder = (settings.pipelines_dir or BUILTIN_DEFS).resolve()
    declared = check_folder(folder)
    check_landings(declared, settings)
    return _resolve(declared, settings)


def _resolve(declared: Sequence[DeclaredPipeline], settings: Settings) -> dict[str, PipelineSpec]:
    specs = {}
    for p in declared:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dg.BetaWarning)
            component = RetrievalPipeline.resolve_from_dict(_raw_attributes(p.path))
        try:
            specs[p.name] = resolve_spec(component, settings, base_dir=p.path.parent, source=str(p.path))
        except DeclarationError as exc:  # fields valid one by one that cannot work together: at their line
            raise PipelineConfigError(exc.located(str(p.path), p.line_of(["attributes", *exc.field]))) from None
    return specs


def get_spec(name: str | None = None, settings: Settings | None = None) -> PipelineSpec:
    """One pipeline's spec; with no name, the only pipeline (or `demo`), else an error listing the names."""
    specs = load_specs(settings)
    if name is None:
        if len(specs) == 1:
            return next(iter(specs.values()))
        if "demo" in specs:
            return specs["demo"]
        raise PipelineConfigError(f"several pipelines are declared ({', '.join(sorted(specs))}); name one")
    if name not in specs:
        raise PipelineConfigError(f"no pipeline named {name!r}; declared: {', '.join(sorted(specs)) or 'none'}")
    return specs[name]
