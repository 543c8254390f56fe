"""Reference-text cases for TFC002, TFC003, TFC009 and TFC016, run through every rule.

Each snippet is copied from `shared/reference/` (the tf.function guides; notebook cells that belong
together are joined, output lines dropped). The expected set is what ALL rules together must report,
so a recommended fix must stay silent under every rule, and a bad example must be caught by the rule
meant for it and by no rule that has no business there.
"""

from __future__ import annotations


import pytest

from tests.lint.helpers import FIXTURES, codes_of_all_rules, fixture_findings

IMPORT = "import tensorflow as tf\n"

CASES: dict[str, tuple[str, set[str]]] = {
    # tf_function_guide.txt, "Changing Python global and free variables"
    "external-list-append": ("""
external_list = []

@tf.function
def side_effect(x):
  print('Python side effect')
  external_list.append(x)

side_effect(1)
side_effect(1)
side_effect(1)
# The list append only happened once!
assert len(external_list) == 1
""", {"TFC001", "TFC002"}),
    "counter-guard-bad": ("""
class Model(tf.Module):
  def __init__(self):
    self.v = tf.Variable(0)
    self.counter = 0

  @tf.function
  def __call__(self):
    if self.counter == 0:
      # A python side-effect
      self.counter += 1
      self.v.assign_add(1)

    return self.v

m = Model()
for n in range(3):
  print(m().numpy()) # prints 1, 2, 3
""", {"TFC002"}),
    "counter-guard-init-scope-fix": ("""
class Model(tf.Module):
  def __init__(self):
    self.v = tf.Variable(0)
    self.counter = 0

  @tf.function
  def __call__(self):
    if self.counter == 0:
      # Lifts ops out of function-building graphs
      with tf.init_scope():
        self.counter += 1
        self.v.assign_add(1)

    return self.v

m = Model()
for n in range(3):
  print(m().numpy()) # prints 1, 1, 1
""", set()),
    # "All outputs of a tf.function must be return values"
    "leak-through-global": ("""
x = None

@tf.function
def leaky_function(a):
  global x
  x = a + 1  # Bad - leaks local tensor
  return a + 2

correct_a = leaky_function(tf.constant(1))

print(correct_a.numpy())  # Good - value obtained from function's returns
try:
  x.numpy()  # Bad - tensor leaked from inside the function, cannot be used here
except AttributeError as expected:
  print(expected)
""", {"TFC009"}),
    "leak-returned-and-captured": ("""
@tf.function
def leaky_function(a):
  global x
  x = a + 1  # Bad - leaks local tensor
  return x  # Good - uses local tensor

correct_a = leaky_function(tf.constant(1))

print(correct_a.numpy())  # Good - value obtained from function's returns
try:
  x.numpy()  # Bad - tensor leaked from inside the function, cannot be used here
except AttributeError as expected:
  print(expected)

@tf.function
def captures_leaked_tensor(b):
  b += x  # Bad - `x` is leaked from `leaky_function`
  return b

with assert_raises(TypeError):
  captures_leaked_tensor(tf.constant(2))
""", {"TFC009"}),  # the capture is shown inside assert_raises, on purpose: no TFC003 there
    # The guide shows this function without its decorator; as printed it is eager code...
    "leak-into-collection-and-object-as-printed": ("""
class MyClass:

  def __init__(self):
    self.field = None

external_list = []
external_object = MyClass()

def leaky_function():
  a = tf.constant(1)
  external_list.append(a)  # Bad - leaks tensor
  external_object.field = a  # Bad - leaks tensor
""", set()),
    # ... and in the tf.function the section is about, both stores leak.
    "leak-into-collection-and-object": ("""
class MyClass:

  def __init__(self):
    self.field = None

external_list = []
external_object = MyClass()

@tf.function
def leaky_function():
  a = tf.constant(1)
  external_list.append(a)  # Bad - leaks tensor
  external_object.field = a  # Bad - leaks tensor
""", {"TFC009"}),
    # "Depending on Python global and free variables"
    "global-rebound-bad-and-argument-fix": ("""
@tf.function
def buggy_add():
  return 1 + foo

@tf.function
def recommended_add(foo):
  return 1 + foo

foo = 1
print("Buggy:", buggy_add())
print("Correct:", recommended_add(foo))
print("Updating the value of `foo` to 100!")
foo = 100
print("Buggy:", buggy_add())  # Did not change!
print("Correct:", recommended_add(foo))
""", {"TFC003"}),
    "argument-fix-alone": ("""
@tf.function
def recommended_add(foo):
  return 1 + foo

foo = 1
print("Correct:", recommended_add(foo))
foo = 100
print("Correct:", recommended_add(foo))
""", set()),
    "global-variable-fix": ("""
@tf.function
def variable_add():
  return 1 + foo

foo = tf.Variable(1)
print("Variable:", variable_add())
print("Updating the value of `foo` to 100!")
foo.assign(100)
print("Variable:", variable_add())
""", set()),
    # "Depending on Python objects"
    "mutable-object-attribute-bad": ("""
class SimpleModel(tf.Module):
  def __init__(self):
    # These values are *not* tf.Variables.
    self.bias = 0.
    self.weight = 2.

@tf.function
def evaluate(model, x):
  return model.weight * x + model.bias

simple_model = SimpleModel()
x = tf.constant(10.)
print(evaluate(simple_model, x))
print("Adding bias!")
simple_model.bias += 5.0
print(evaluate(simple_model, x))  # Didn't change :(
""", {"TFC016"}),
    "new-function-per-change-workaround": ("""
class SimpleModel(tf.Module):
  def __init__(self):
    # These values are *not* tf.Variables.
    self.bias = 0.
    self.weight = 2.

def evaluate(model, x):
  return model.weight * x + model.bias

x = tf.constant(10.)
new_model = SimpleModel()
evaluate_no_bias = tf.function(evaluate).get_concrete_function(new_model, x)
# Don't pass in `new_model`, `Function` already captured its state during tracing.
print(evaluate_no_bias(x))
print("Adding bias!")
new_model.bias += 5.0
# Create new Function and ConcreteFunction since you modified new_model.
evaluate_with_bias = tf.function(evaluate).get_concrete_function(new_model, x)
print(evaluate_with_bias(x)) # Don't pass in `new_model`.
""", set()),
    "variable-attributes-fix": ("""
class BetterModel:

  def __init__(self):
    self.bias = tf.Variable(0.)
    self.weight = tf.Variable(2.)

@tf.function
def evaluate(model, x):
  return model.weight * x + model.bias

x = tf.constant(10.)
better_model = BetterModel()
print(evaluate(better_model, x))
print("Adding bias!")
better_model.bias.assign_add(5.0)  # Note: instead of better_model.bias += 5
print(evaluate(better_model, x))  # This works!
""", set()),
    # tf_function_guide_older.txt, "Python side effects": the side effect moved into tf.py_function.
    "side-effect-in-py-function": ("""
external_list = []

def side_effect(x):
  print('Python side effect')
  external_list.append(x)

@tf.function
def f(x):
  tf.py_function(side_effect, inp=[x], Tout=[])

f(1)
f(1)
f(1)
# The list append happens all three times!
assert len(external_list) == 3
# The list contains tf.constant(1), not 1, because py_function casts everything to tensors.
assert external_list[0].numpy() == 1
""", {"TFC015"}),
    "external-variable-read": ("""
external_var = tf.Variable(3)
@tf.function
def f(x):
  return x * external_var

traced_f = f.get_concrete_function(4)
print("Calling concrete function...")
print(traced_f(4))
""", set()),
}


def codes(snippet: str) -> set[str]:
    return codes_of_all_rules(IMPORT + snippet)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_case(case: str) -> None:
    snippet, expected = CASES[case]
    assert codes(snippet) == expected, case


# (line, code) that ALL rules together report on the demo fixtures of these rules.
FIXTURE_FINDINGS: dict[str, list[tuple[int, str]]] = {
    "state_bad.py": [(12, "TFC002"), (13, "TFC003"), (19, "TFC009"), (34, "TFC002"), (35, "TFC016")],
    "state_good.py": [],
    "state_keras_training.py": [(21, "TFC002"), (22, "TFC016"), (24, "TFC009"), (25, "TFC009"), (32, "TFC002"),
                                (35, "TFC009"), (38, "TFC003")],
}


@pytest.mark.parametrize("name", sorted(FIXTURE_FINDINGS))
def test_fixture_findings(name: str) -> None:
    assert fixture_findings(FIXTURES / name) == FIXTURE_FINDINGS[name]
