"""tensorflow/tensorflow#50765 "Memory leak in custom training loop + tf.function" (correct code).

A commenter's reproduction: one tf.function defined once and called in a loop with a tensor of a
fixed shape. The memory growth is a TensorFlow bug; the code itself has no tf.function pitfall.
"""
import tensorflow as tf


@tf.function
def operate(img):
    return img


img = tf.zeros((6, 6, 7))
for i in range(100000000):
    if i % 20000 == 0: print('hi')
    s = operate(img)
