"""tensorflow/tensorflow#27120 "tf.function-decorated function tried to create variables on non-first call" (the fix).

A maintainer's suggestion for training with two optimizers: one tf.function per optimizer, picked
in eager Python, so each function creates its optimizer's slot variables on its own first call.
The two optimizers are module-level in the thread's example; their definitions are added here.
"""
import tensorflow as tf

fast_optimizer = tf.keras.optimizers.SGD(0.1)
slow_optimizer = tf.keras.optimizers.SGD(0.001)


@tf.function
def apply_gradients_fast(grads, vars):
    grads = [grads]
    fast_optimizer.apply_gradients(zip(grads, vars))


@tf.function
def apply_gradients_slow(grads, vars):
    grads = [grads]
    slow_optimizer.apply_gradients(zip(grads, vars))


def apply_grads(use_fast, grads_per_model, vars):
    for i in range(2):
        if use_fast[i]:
            apply_gradients_fast(grads_per_model[i], vars[i])
        else:
            apply_gradients_slow(grads_per_model[i], vars[i])
