"""tensorflow/tensorflow#37670 "AutoGraph could not transform function" (works).

The reporter reproduces the first example of the tf.function guide and gets AutoGraph's "Please
report this" message (an environment problem, not the code): the function is correct.
"""
#!/usr/bin/env python
from __future__ import absolute_import, division, print_function, unicode_literals
import tensorflow as tf
import os
assert os.getenv("AUTOGRAPH_VERBOSITY") == "10"
@tf.function
def add(a, b):
  return a + b
add(tf.ones([2, 2]), tf.ones([2, 2]))
