"""Symbolic dimensions that go in steps, imported as `offset + step * floordiv(h - offset, step)`.

A U-Net whose skip connections meet after four poolings takes image sizes in multiples of 16
(the build finds that out: `compiler/trace/symbolic.py`, `size_steps`; the manifest records it as
`SymbolicDim.step`). Imported over a plain `tir.Var` h, its concatenations join `h` with
`floordiv(h, 2) * 2`-like sizes that TVM's analyzer cannot prove equal, so their outputs lose their
shapes and the next reshape fails to import (keras-unet-collection's `unet_2d`, issue 42). Over
`16 * floordiv(h, 16)` every such size simplifies (`floordiv(16 * x, 2) = 8 * x`), and the
concatenation's operands have one shape.

Relax cannot take `h` from a parameter of that shape, so `main` keeps the plain `h` in its
parameters and match-casts each input to the stepped shape its body was imported over: the cast
also makes the library itself refuse a size off the step (a runtime that predates steps does not
check them). A new variable `q` with `h = 16 * q` was not chosen: Relax's CanonicalizeBindings (run
by RemoveRedundantReshape) replaces such a `q` in shapes but not in a strided slice's bounds, and
the shapes no longer match (a U-Net of "same" max poolings).
"""

from __future__ import annotations

from typing import Any

from tfcheck.runtime.manifest import SymbolicDim


def stepped_shapes(shapes: dict[str, tuple[Any, ...]] | None,
                   dims: dict[str, SymbolicDim]) -> dict[str, tuple[Any, ...]] | None:
    """`shape_dict` (dimensions as named `tir.Var`s) with each dimension that has a step as
    `offset + step * floordiv(h - offset, step)`: `h` itself at every size the artifact takes."""
    from tvm import tirx

    def stepped(dim: Any) -> Any:
        found = dims.get(str(dim.name)) if isinstance(dim, tirx.Var) else None
        if found is None or found.step == 1:
            return dim
        offset = found.min % found.step
        return offset + found.step * tirx.floordiv(dim - offset, found.step)

    return None if shapes is None else {name: tuple(map(stepped, shape)) for name, shape in shapes.items()}


def cast_to_steps(module: Any, plain: dict[str, tuple[Any, ...]] | None, stepped: dict[str, tuple[Any, ...]] | None) -> Any:
    """`main` over inputs of the `plain` shapes, which it match-casts to the `stepped` shapes its
    body was imported over (`module` as it is where they are the same)."""
    from tvm import relax

    if plain is None or stepped is None or all(map(_unchanged, plain.values(), stepped.values())):
        return module
    main = module["main"]
    params, casts = [], []
    for param, shape, imported in zip(main.params, plain.values(), stepped.values()):
        if _unchanged(shape, imported):
            params.append(param)
            continue
        outer = relax.Var(str(param.name), relax.TensorType(list(shape), param.ty.dtype))
        casts.append(relax.MatchCast(param, outer, param.ty))
        params.append(outer)
    params += list(main.params)[len(plain):]  # the weights, when they are inputs
    body = relax.SeqExpr([relax.BindingBlock(casts), *main.body.blocks], main.body.body)
    module["main"] = relax.Function(params, body, main.ret_ty, main.is_pure, main.attrs)
    return module


def _unchanged(shape: tuple[Any, ...], imported: tuple[Any, ...]) -> bool:
    """Whether `stepped_shapes` left this shape as it was (the same objects: `==` of two PrimExprs
    builds an expression)."""
    return all(dim is same for dim, same in zip(shape, imported))
