"""Reference-text cases for TFC004, TFC005, TFC007, TFC012 and TFC017, run through every rule.

Each snippet is copied from `shared/reference/` (the tf.function guides); the expected set is what ALL
rules together must report on it, so a recommended fix must stay silent under every rule, and a bad
example must be caught by the rule meant for it and by no rule that has no business there.
Then whole files through the real runner: `fixtures/lint/{loops,retrace}_bad.py` mark each expected
finding with `# expect: TFC0xx`, and their fixes in `*_good.py` must report nothing.
"""

from __future__ import annotations


import pytest

from tfcheck.engine import analyze_source
from tfcheck.edits import parses
from tfcheck.fixes import apply_fixes
from tfcheck.rule import all_rules
from tfcheck.rules.tfc012_retrace_python_arg import RetracePythonArg

from tests.lint.helpers import FIXTURES, codes_of_all_rules, expected_findings, fixture_findings

IMPORT = "import tensorflow as tf\n"

CASES: dict[str, tuple[str, set[str]]] = {
    # The guide calls its bad functions inside `assert_raises`: a demonstration, whose author knows the
    # error (judged so on issue 36's corpus, which holds the guide). Called as code is, TFC004 reports it.
    "creating-variables-bad": ("""
@tf.function
def f(x):
  v = tf.Variable(1.0)
  return v

with assert_raises(ValueError):
  f(1.0)
""", set()),
    "creating-variables-bad-called": ("""
@tf.function
def f(x):
  v = tf.Variable(1.0)
  return v

f(1.0)
f(2.0)
""", {"TFC004"}),
    "creating-variables-bad-older": ("""
@tf.function
def f(x):
  v = tf.Variable(1.0)
  v.assign_add(x)
  return v

with assert_raises(ValueError):
  f(1.0)
""", set()),
    "creating-variables-guard-fix": ("""
class Count(tf.Module):
  def __init__(self):
    self.count = None

  @tf.function
  def __call__(self):
    if self.count is None:
      self.count = tf.Variable(0)
    return self.count.assign_add(1)

c = Count()
print(c())
print(c())
""", set()),
    "multiple-optimizers-bad": ("""
opt1 = tf.keras.optimizers.Adam(learning_rate = 1e-2)
opt2 = tf.keras.optimizers.Adam(learning_rate = 1e-3)

@tf.function
def train_step(w, x, y, optimizer):
   with tf.GradientTape() as tape:
       L = tf.reduce_sum(tf.square(w*x - y))
   gradients = tape.gradient(L, [w])
   optimizer.apply_gradients(zip(gradients, [w]))

w = tf.Variable(2.)
x = tf.constant([-1.])
y = tf.constant([2.])

train_step(w, x, y, opt1)
print("Calling `train_step` with different optimizer...")
with assert_raises(ValueError):
  train_step(w, x, y, opt2)
""", {"TFC018"}),
    "multiple-optimizers-fix": ("""
opt1 = tf.keras.optimizers.Adam(learning_rate = 1e-2)
opt2 = tf.keras.optimizers.Adam(learning_rate = 1e-3)

# Not a tf.function.
def train_step(w, x, y, optimizer):
   with tf.GradientTape() as tape:
       L = tf.reduce_sum(tf.square(w*x - y))
   gradients = tape.gradient(L, [w])
   optimizer.apply_gradients(zip(gradients, [w]))

w = tf.Variable(2.)
x = tf.constant([-1.])
y = tf.constant([2.])

# Make a new Function and ConcreteFunction for each optimizer.
train_step_1 = tf.function(train_step).get_concrete_function(w, x, y, opt1)
train_step_2 = tf.function(train_step).get_concrete_function(w, x, y, opt2)
for i in range(10):
  if i % 2 == 0:
    train_step_1(w, x, y) # `opt1` is not used as a parameter.
  else:
    train_step_2(w, x, y) # `opt2` is not used as a parameter.
""", set()),
    "python-iterator-bad": ("""
@tf.function
def buggy_consume_next(iterator):
  tf.print("Value:", next(iterator))

iterator = iter([1, 2, 3])
buggy_consume_next(iterator)
# This reuses the first value from the iterator, rather than consuming the next value.
buggy_consume_next(iterator)
buggy_consume_next(iterator)
""", {"TFC007"}),
    "python-iterator-bad-older": ("""
external_var = tf.Variable(0)
@tf.function
def buggy_consume_next(iterator):
  external_var.assign_add(next(iterator))
  tf.print("Value of external_var:", external_var)

iterator = iter([0, 1, 2, 3])
buggy_consume_next(iterator)
# This reuses the first value from the iterator, rather than consuming the next value.
buggy_consume_next(iterator)
buggy_consume_next(iterator)
""", {"TFC007"}),
    "python-iterator-fix": ("""
@tf.function
def good_consume_next(iterator):
  # This is ok, iterator is a tf.data.Iterator
  tf.print("Value:", next(iterator))

ds = tf.data.Dataset.from_tensor_slices([1, 2, 3])
iterator = iter(ds)
good_consume_next(iterator)
good_consume_next(iterator)
good_consume_next(iterator)
""", set()),
    "python-data-loop-bad": ("""
def measure_graph_size(f, *args):
  g = f.get_concrete_function(*args).graph
  print("{}({}) contains {} nodes in its graph".format(
      f.__name__, ', '.join(map(str, args)), len(g.as_graph_def().node)))

@tf.function
def train(dataset):
  loss = tf.constant(0)
  for x, y in dataset:
    loss += tf.abs(y - x) # Some dummy computation.
  return loss

small_data = [(1, 1)] * 3
big_data = [(1, 1)] * 10
measure_graph_size(train, small_data)
measure_graph_size(train, big_data)
""", {"TFC005"}),
    "python-data-loop-fix": ("""
def measure_graph_size(f, *args):
  g = f.get_concrete_function(*args).graph
  print("{}({}) contains {} nodes in its graph".format(
      f.__name__, ', '.join(map(str, args)), len(g.as_graph_def().node)))

@tf.function
def train(dataset):
  loss = tf.constant(0)
  for x, y in dataset:
    loss += tf.abs(y - x) # Some dummy computation.
  return loss

small_data = [(1, 1)] * 3
big_data = [(1, 1)] * 10
measure_graph_size(train, tf.data.Dataset.from_generator(
    lambda: small_data, (tf.int32, tf.int32)))
measure_graph_size(train, tf.data.Dataset.from_generator(
    lambda: big_data, (tf.int32, tf.int32)))
""", set()),
    # The guide's function prints on purpose, to show when tracing happens: a print that says it reports
    # tracing is no finding (issue 36: judged deliberate wherever it was met).
    "retrace-python-numbers-bad": ("""
def train_one_step():
  pass

@tf.function
def train(num_steps):
  print("Tracing with num_steps = ", num_steps)
  tf.print("Executing with num_steps = ", num_steps)
  for _ in tf.range(num_steps):
    train_one_step()

print("Retracing occurs for different Python arguments.")
train(num_steps=10)
train(num_steps=20)
""", {"TFC012"}),
    "retrace-python-numbers-fix": ("""
def train_one_step():
  pass

@tf.function
def train(num_steps):
  tf.print("Executing with num_steps = ", num_steps)
  for _ in tf.range(num_steps):
    train_one_step()

print()
print("Traces are reused for Tensor arguments.")
train(num_steps=tf.constant(10))
train(num_steps=tf.constant(20))
""", set()),
    "retrace-new-objects-bad": ("""
@tf.function
def get_mixed_flavor(fruit_a, fruit_b):
  return fruit_a.flavor + fruit_b.flavor

class Fruit:
  flavor = tf.constant([0, 0])

class Apple(Fruit):
  flavor = tf.constant([1, 2])

class Mango(Fruit):
  flavor = tf.constant([3, 4])

get_mixed_flavor(Apple(), Mango()) # Traces a new concrete function
get_mixed_flavor(Apple(), Mango()) # Traces a new concrete function again
""", {"TFC012"}),
    "accumulate-tensorarray-fix": ("""
batch_size = 2
seq_len = 3
feature_size = 4

def rnn_step(inp, state):
  return inp + state

@tf.function
def dynamic_rnn(rnn_step, input_data, initial_state):
  # [batch, time, features] -> [time, batch, features]
  input_data = tf.transpose(input_data, [1, 0, 2])
  max_seq_len = input_data.shape[0]

  states = tf.TensorArray(tf.float32, size=max_seq_len)
  state = initial_state
  for i in tf.range(max_seq_len):
    state = rnn_step(input_data[i], state)
    states = states.write(i, state)
  return tf.transpose(states.stack(), [1, 0, 2])

dynamic_rnn(rnn_step,
            tf.random.uniform([batch_size, seq_len, feature_size]),
            tf.zeros([batch_size, feature_size]))
""", set()),
    # The article's "Python List v.s. TensorArray" pitfall, written out (the article shows it as an image).
    "accumulate-python-list-bad": ("""
@tf.function
def dynamic_rnn(rnn_step, input_data, initial_state):
  input_data = tf.transpose(input_data, [1, 0, 2])
  max_seq_len = input_data.shape[0]
  states = []
  state = initial_state
  for i in tf.range(max_seq_len):
    state = rnn_step(input_data[i], state)
    states.append(state)
  return tf.transpose(tf.stack(states), [1, 0, 2])
""", {"TFC017"}),
}


def codes(snippet: str) -> set[str]:
    return codes_of_all_rules(IMPORT + snippet)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_case(case: str) -> None:
    snippet, expected = CASES[case]
    assert codes(snippet) == expected, case




@pytest.mark.parametrize("topic", ["loops", "retrace"])
def test_bad_fixture_reports_exactly_its_expectations(topic: str) -> None:
    path = FIXTURES / f"{topic}_bad.py"
    assert fixture_findings(path) == expected_findings(path)


@pytest.mark.parametrize("topic", ["loops", "retrace"])
def test_good_fixture_reports_nothing(topic: str) -> None:
    assert fixture_findings(FIXTURES / f"{topic}_good.py") == []


def test_tfc012_unsafe_fixes_pass_tensors_and_clear_the_numbers() -> None:
    source = (FIXTURES / "retrace_bad.py").read_text()
    findings = list(RetracePythonArg().check(analyze_source("retrace_bad.py", source, "retrace_bad")))
    fixes = [f.fix for f in findings if f.fix is not None]
    assert len(fixes) == 3 and not any(fix.safe for fix in fixes)  # two loop counters, one literal
    fixed, applied = apply_fixes(source, fixes)
    assert len(applied) == 3 and parses(fixed)
    assert "train_step(net, warmup, x, y, tf.constant(step))" in fixed
    assert "decay(x, tf.constant(0.2))" in fixed and "decay(batch, tf.constant(float(epoch)))" in fixed
    remaining = RetracePythonArg().check(analyze_source("retrace_bad.py", fixed, "retrace_bad"))
    assert [f.fix for f in remaining] == [None]  # only the new-object finding, which has no fix


def test_tfc017_reports_a_list_grown_in_nested_graph_loops_once() -> None:
    snippet = ("@tf.function\ndef func(A, B):\n    A = tf.convert_to_tensor(A)\n    B = tf.convert_to_tensor(B)\n"
               "    S = []\n    for b in B:\n        for a in A:\n            S.append(tf.reduce_sum(a * b))\n    return S\n")
    findings = [f for rule in all_rules() if rule.code == "TFC017"
                for f in rule().check(analyze_source("nested.py", IMPORT + snippet, "nested"))]
    assert [(f.line, f.code) for f in findings] == [(9, "TFC017")] and "(line 7)" in findings[0].message
