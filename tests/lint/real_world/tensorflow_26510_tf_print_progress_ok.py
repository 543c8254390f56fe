"""tensorflow/tensorflow#26510 "tf.print() support of `sep` and `end` arguments" (works).

The feature request's example of a training loop in a tf.function: two `tf.range` loops and
`tf.print` with `sep` and `end`, which TensorFlow has supported since. Everything runs on every
call. (The reporter's commented-out lines for the eager comparison are kept.)
"""
import tensorflow as tf

# Uncomment these lines to see the expected output
#tf.print = print
#tf.function = lambda f: f
#tf.range = range

@tf.function
def train(n_epochs, n_steps):
    for epoch in tf.range(1, n_epochs + 1):
        tf.print("Epoch ", epoch, "/", n_epochs, sep="")
        for step in tf.range(1, n_steps + 1):
            tf.print("\rStep ", step, "/", n_steps, sep="", end="")
            # ... training loop
        tf.print()

train(n_epochs=10, n_steps=10000)
