"""tensorflow/tensorflow#33308 "iterating over 'tf.Tensor' is not allowed AutoGraph did not convert this function." (the fix).

The reporter's own solution: "I solved it by changing tf.range to range and it works." The band
count is a static shape, so the comprehension runs over Python integers.
"""
import tensorflow as tf

from hparams import hp


@tf.function
def band2bin(bands):
    tensor_list = [tf.tile(tf.expand_dims(bands[:, b, :], axis=1), [1, hp.band[b, 1]-hp.band[b, 0]+1, 1]) for b in range(bands.shape[1])]
    bins = tf.concat(tensor_list, axis=1)
    return bins
