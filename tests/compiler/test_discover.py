"""Static discovery of @tfcheck.aot functions: every spelling, without importing anything."""

from __future__ import annotations

import sys
from pathlib import Path

from tfcheck.compiler.trace.discover import discover, import_root, resolve_module_argument

SPELLINGS = '''
import tensorflow as tf
import tfcheck
import tfcheck as tc
from tfcheck import aot

raise RuntimeError("discovery must not import this module")


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
def plain(x):
    return x


@tc.aot(name="renamed", shapes=[(1, 4), (8, 4)])
@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
def aliased(x):
    return x


@aot
@tf.function
def imported_name(x):
    return x


def helper(x):
    return x * 2


wrapped = tfcheck.aot(tf.function(helper, input_signature=[tf.TensorSpec([2], tf.float32)]))
configured = tfcheck.aot(name="configured")(tf.function(helper))


class Model(tf.Module):
    @tfcheck.aot
    @tf.function
    def method(self, x):
        return x


@tf.function
def not_annotated(x):
    return x
'''


def test_every_spelling_is_found_in_line_order(tmp_path: Path) -> None:
    source = tmp_path / "models.py"
    source.write_text(SPELLINGS, encoding="utf-8")
    found = discover([source])
    assert found.errors == []
    assert [f.qualname for f in found.functions] == [
        "plain", "aliased", "imported_name", "wrapped", "configured", "Model.method"]
    by_name = {f.qualname: f for f in found.functions}
    assert by_name["aliased"].name == "renamed"
    assert by_name["aliased"].shapes == [(1, 4), (8, 4)]
    assert by_name["configured"].name == "configured"
    assert by_name["plain"].module == "models" and by_name["plain"].root == tmp_path.resolve()
    # decorators count as part of the function, for the lint gate's line range
    assert by_name["plain"].line == SPELLINGS.splitlines().index("@tfcheck.aot") + 1
    # module-level wrappers cover the wrapped function's body too
    assert by_name["wrapped"].line < by_name["wrapped"].end_line
    assert "module-level" in (by_name["Model.method"].problem or "")
    assert all(f.problem is None for f in found.functions if f.qualname != "Model.method")


def test_files_without_the_decorator_and_parse_errors(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    return x\n")
    (tmp_path / "broken.py").write_text("import tfcheck\n@tfcheck.aot\ndef f(:\n")
    found = discover([tmp_path / "plain.py", tmp_path / "broken.py"])
    assert found.functions == []
    assert len(found.errors) == 1 and "broken.py:3" in found.errors[0]


def test_package_modules_import_from_the_package_root(tmp_path: Path) -> None:
    package = tmp_path / "app" / "models"
    package.mkdir(parents=True)
    (tmp_path / "app" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "vision.py").write_text("import tfcheck\nimport tensorflow as tf\n\n"
                                       "@tfcheck.aot\n@tf.function\ndef f(x):\n    return x\n")
    [function] = discover([package / "vision.py"]).functions
    assert function.module == "app.models.vision"
    assert function.root == tmp_path.resolve()
    assert import_root(package / "__init__.py", "app.models") == tmp_path.resolve()


def test_module_arguments_resolve_to_files_without_importing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "pkg" / "mod.py").write_text("")
    assert resolve_module_argument("pkg.mod", [str(tmp_path)]) == tmp_path / "pkg" / "mod.py"
    assert resolve_module_argument("pkg", [str(tmp_path)]) == tmp_path / "pkg" / "__init__.py"
    assert resolve_module_argument("pkg.missing", [str(tmp_path)]) is None
    assert "pkg" not in sys.modules


TARGETS = '''
import tensorflow as tf
import tfcheck

CHOSEN = ["cpu"]


@tfcheck.aot(targets="cuda")
@tf.function
def one(x):
    return x


@tfcheck.aot(targets=["cpu", '{"kind": "llvm", "mcpu": "x86-64"}'])
@tf.function
def two(x):
    return x


@tfcheck.aot(targets=None)
@tf.function
def unset(x):
    return x


@tfcheck.aot(targets=CHOSEN)
@tf.function
def named_elsewhere(x):
    return x


@tfcheck.aot(targets=[1])
@tf.function
def not_strings(x):
    return x
'''


def test_targets_are_read_as_literals(tmp_path: Path) -> None:
    source = tmp_path / "targets.py"
    source.write_text(TARGETS, encoding="utf-8")
    by_name = {f.qualname: f for f in discover([source]).functions}
    assert by_name["one"].targets == ["cuda"]
    assert by_name["two"].targets == ["cpu", '{"kind": "llvm", "mcpu": "x86-64"}']
    assert by_name["unset"].targets is None and by_name["unset"].problem is None
    for name in ("named_elsewhere", "not_strings"):
        problem = by_name[name].problem or ""
        line = TARGETS.splitlines().index(f"def {name}(x):") - 1  # 1-based line of the decorator
        assert f"targets= on line {line} must be a literal" in problem, problem


METHODS = '''
import keras
import tensorflow as tf
import tfcheck


class Classifier(keras.Model):
    @tfcheck.aot
    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def serve(self, x):
        return self(x)


class Tuned(Classifier):
    pass


class Lonely(tf.Module):
    @tfcheck.aot
    @tf.function
    def run(self, x):
        return x


class Twice(tf.Module):
    @tfcheck.aot(name="twice")
    @tf.function
    def run(self, x):
        return x


class Plain:
    @tf.function
    def apply(self, x):
        return x


classifier: keras.Model = Tuned()
first = Twice()
second = Twice()
plain = Plain()
apply_plain = tfcheck.aot(plain.apply)
'''


def test_methods_are_built_for_the_one_module_level_instance(tmp_path: Path) -> None:
    source = tmp_path / "models.py"
    source.write_text(METHODS, encoding="utf-8")
    by_name = {f.qualname: f for f in discover([source]).functions}
    assert set(by_name) == {"classifier.serve", "Lonely.run", "Twice.run", "apply_plain"}
    served = by_name["classifier.serve"]  # an instance of a subclass counts
    assert (served.instance, served.problem, served.label) == ("classifier", None, "models.classifier.serve")
    assert served.line == METHODS.splitlines().index("    @tfcheck.aot") + 1
    assert "models.Lonely.run" in (by_name["Lonely.run"].problem or "") and "creates none" in by_name["Lonely.run"].problem
    several = by_name["Twice.run"].problem or ""
    lines = METHODS.splitlines()
    first, second = lines.index("first = Twice()") + 1, lines.index("second = Twice()") + 1
    assert f"2 module-level instances of Twice (first (line {first}), second (line {second}))" in several
    wrapped = by_name["apply_plain"]
    assert (wrapped.instance, wrapped.problem) == ("plain", None)
    # the method's lines, for the lint gate, through to the statement
    assert (wrapped.line, wrapped.end_line) == (lines.index("    def apply(self, x):") + 1, len(lines))


def test_saved_model_signatures_are_read_without_tensorflow(tmp_path: Path) -> None:
    from tfcheck.compiler.trace.saved_model import module_label, saved_model_functions, signature_names

    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    def entry(name: str) -> bytes:
        return field(5, field(1, name.encode()) + field(2, b""))

    meta_graph = field(1, b"\x08\x01") + entry("serving_default") + entry("__saved_model_init_op") + entry("bad-name")
    folder = tmp_path / "2-export"
    folder.mkdir()
    (folder / "saved_model.pb").write_bytes(b"\x08\x01" + field(2, meta_graph))
    assert signature_names(folder) == ["bad-name", "serving_default"]
    assert module_label(folder) == "_2_export"
    functions, errors = saved_model_functions(folder, ["serving_default", "bad-name", "missing"])
    assert errors == []
    problems = {f.qualname: f.problem for f in functions}
    assert problems["serving_default"] is None
    assert "is not a Python identifier" in (problems["bad-name"] or "")
    assert "has no signature 'missing'; its signatures: bad-name, serving_default" in (problems["missing"] or "")
    (folder / "saved_model.pb").write_bytes(b"\x12\xff")
    assert "truncated" in saved_model_functions(folder, [])[1][0]
