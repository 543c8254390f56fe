"""tensorflow/tensorflow#33308 "iterating over 'tf.Tensor' is not allowed AutoGraph did not convert this function."

A list comprehension over `tf.range(...)` in a tf.function: AutoGraph does not convert
comprehensions, so Python iterates over a symbolic tensor (OperatorNotAllowedInGraphError).
"""
import tensorflow as tf

from hparams import hp


@tf.function
def band2bin(bands):
    tensor_list = [tf.tile(tf.expand_dims(bands[:, b, :], axis=1), [1, hp.band[b, 1]-hp.band[b, 0]+1, 1]) for b in tf.range(bands.shape[1])]  # expect: TFC021
    bins = tf.concat(tensor_list, axis=1)
    return bins
