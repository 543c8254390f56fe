"""Names are identifiers, never paths (docs/artifact-format.md, "Names and paths").

A name that comes from source code (`@tfcheck.aot(name=...)`), the configuration, the command
line or a manifest (`"library"`) becomes one file or folder name inside a folder that tfcheck
owns: an export under `--out`, a library inside its artifact folder. One such name with a `/` or a
`..` would make tfcheck write, replace or delete elsewhere, or load a library from anywhere, so
every such name goes through `check_name`, and every file opened or replaced through such a name
through `path_inside`, which also follows symbolic links before deciding.

This module imports nothing from the compiler or TensorFlow: the runtime and the compiler share it.
"""

from __future__ import annotations

from pathlib import Path, PureWindowsPath

# Export staging adds `.<name>.old.<32 hex digits>` (38 bytes), and file systems stop at 255.
MAX_NAME_BYTES = 200


class UnsafePathError(ValueError):
    """A name that is not a plain file or folder name, or a path that leads out of its folder."""


def name_problem(name: object) -> str | None:
    """Why `name` cannot be one file or folder name inside a folder; None when it can."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    if "\0" in name:
        return "contains a NUL character"
    for separator in ("/", "\\"):
        if separator in name:
            return f"contains {separator!r}"
    if name.startswith("."):
        return "starts with '.' ('.', '..' and hidden names are refused)"
    if PureWindowsPath(name).drive:
        return "starts with a drive"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_name(name: object, what: str) -> str:
    """`name` itself when it is a plain name; UnsafePathError naming `what` and why otherwise."""
    problem = name_problem(name)
    if problem is not None:
        raise UnsafePathError(f"{what} {name!r} {problem}: names are identifiers, not paths")
    return str(name)


def path_inside(folder: Path, name: object, what: str) -> Path:
    """`folder/name` with symbolic links resolved, refused unless it lies strictly inside `folder`
    (resolved too, so a `folder` that is itself a link is fine)."""
    root = folder.resolve()
    resolved = (root / check_name(name, what)).resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise UnsafePathError(f"{what} {name!r} leads to {resolved}, outside {root} "
                              "(a symbolic link out of the folder?)")
    return resolved


def remove_tree(path: Path) -> None:
    """Delete a folder, or only the link when `path` is a symbolic link: following one would
    delete what it points to, wherever that is (`shutil.rmtree` refuses links, and with
    `ignore_errors` says nothing)."""
    import shutil  # the cache commands': loading an artifact never deletes

    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)
