"""`tfcheck run`: run a compiled artifact on inputs saved as .npy files, without TensorFlow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tfcheck.requirements import require


@click.command()
@click.argument("artifact", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--input", "-i", "inputs", multiple=True, metavar="[NAME=]FILE.npy",
              help="An input array, in signature order; NAME=FILE passes it by input name.")
@click.option("--function", "-f", "function", metavar="NAME",
              help="Function to run when ARTIFACT holds several (name or module.name).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("outputs.npz"), show_default=True,
              help="Where to write the outputs: .npz (one array per output) or, for a single "
                   "output, .npy.")
def run(artifact: Path, inputs: tuple[str, ...], function: str | None, output: Path) -> None:
    """Run ARTIFACT (an artifact folder, a `tfcheck build --out` folder or the cache) on saved
    inputs and write its outputs. TensorFlow is not needed."""
    require("run", "runtime")
    import numpy as np

    from tfcheck.runtime import ArtifactError, InputError, load

    try:
        library = load(artifact, lazy=True)
        compiled = library[_pick_function(library, function)]
        args, kwargs = _read_inputs(inputs)
        outputs = _named_outputs(compiled(*args, **kwargs))
    except (ArtifactError, InputError, KeyError, OSError, ValueError) as error:
        raise click.ClickException(error.args[0] if isinstance(error, KeyError) else str(error))
    _write(output, outputs, np)
    for name, value in outputs.items():
        click.echo(f"{name}: {value.dtype}{list(value.shape)}")
    click.echo(f"wrote {output}")


def _pick_function(library: Any, requested: str | None) -> str:
    """The requested function, or the only one in the library."""
    if requested:
        return requested
    names = list(library)
    if len(names) != 1:
        raise click.UsageError(f"{library.root} holds {len(names)} functions "
                               f"({', '.join(names)}): choose one with --function")
    return names[0]


def _read_inputs(specs: tuple[str, ...]) -> tuple[list[Any], dict[str, Any]]:
    """`FILE` values are positional; `NAME=FILE` values are keyword arguments."""
    import numpy as np

    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        array = _load_array(np, path if sep else spec)
        if sep:
            kwargs[name] = array
        else:
            args.append(array)
    return args, kwargs


def _load_array(np: Any, path: str) -> Any:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise click.BadParameter(f"{path}: not a readable .npy file ({error or 'empty'})",
                                 param_hint="--input") from None


def _named_outputs(result: Any) -> dict[str, Any]:
    """Outputs by name: dict keys, `output_<i>` for a tuple, `output_0` for a single array."""
    if isinstance(result, dict):
        return dict(result)
    if isinstance(result, (tuple, list)):
        return {f"output_{index}": value for index, value in enumerate(result)}
    return {"output_0": result}


def _write(path: Path, outputs: dict[str, Any], np: Any) -> None:
    if path.suffix == ".npy":
        if len(outputs) != 1:
            raise click.UsageError(f"{len(outputs)} outputs do not fit one .npy file: use .npz")
        np.save(path, next(iter(outputs.values())))
    else:
        with path.open("wb") as handle:  # a handle keeps np.savez from appending ".npz"
            np.savez(handle, **outputs)
