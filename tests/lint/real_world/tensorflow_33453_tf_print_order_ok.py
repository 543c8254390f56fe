"""tensorflow/tensorflow#33453 "tf.print operations inside tf.function do not print in order" (works).

A tf.function that updates a global `tf.Variable` with `assign` and prints it with `tf.print`
under a tensor `if`: everything runs on every call. The reporter saw the prints out of order in
TensorFlow 2.0; the maintainers answered that it is fixed in tf-nightly.
"""
import tensorflow as tf

v = tf.Variable(5)

@tf.function
def find_next_odd():
  tf.print('1:',v)
  v.assign(v + 1)
  tf.print('2:', v)
  if v % 2 == 0:
    v.assign(v + 1)
    tf.print('3:', v)

find_next_odd()
