"""marload/DeepRL-TensorFlow2 (876266d): PPO for continuous actions (PPO/PPO_Continuous.py) on
Pendulum (3 state dimensions, 1 action bounded by 2.0), in float64 as the script sets
(`tf.keras.backend.set_floatx('float64')`): the `Actor`'s model (mu through a tanh and a Lambda
times the bound, std through a softplus) as `get_action` calls it on one state, and the
`Critic`'s model as the update calls it on a batch of states (1 to `update_interval` = 5). The
script starts wandb and parses its arguments when imported, and imports gym: wandb and gym are
empty stand-ins, and its arguments are parsed from an empty command line (their defaults)."""

import importlib.util
import os
import sys
import types

ROOT = os.path.join(os.environ["TFCHECK_USER_REPOS"], "DeepRL-TensorFlow2")
sys.modules.setdefault("gym", types.ModuleType("gym"))
sys.modules.setdefault("wandb", types.SimpleNamespace(init=lambda **kwargs: None, log=lambda *args, **kwargs: None))

import tensorflow as tf  # noqa: E402

import tfcheck  # noqa: E402

_argv, sys.argv = sys.argv, [sys.argv[0]]
try:
    _spec = importlib.util.spec_from_file_location("PPO_Continuous", os.path.join(ROOT, "PPO", "PPO_Continuous.py"))
    ppo = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ppo)
finally:
    sys.argv = _argv

tf.keras.utils.set_random_seed(0)
STATE_DIM, ACTION_DIM, ACTION_BOUND, STD_BOUND = 3, 1, 2.0, [1e-2, 1.0]
actor = ppo.Actor(STATE_DIM, ACTION_DIM, ACTION_BOUND, STD_BOUND)
critic = ppo.Critic(STATE_DIM)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, STATE_DIM], tf.float64)])
def act(state):
    return actor.model(state, training=False)


@tfcheck.aot(dims={"batch": (1, 5)})
@tf.function(input_signature=[tf.TensorSpec([None, STATE_DIM], tf.float64)])
def value(states):
    return critic.model(states, training=False)
