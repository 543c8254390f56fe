"""tensorflow/tensorflow#59725 "locals() not working in tensorflow.function decorator".

`locals()` inside a tf.function sees AutoGraph's rewritten frame: in the `for` loop, the frame of the
function AutoGraph makes of the loop's body, so looking functions up by name raises KeyError (checked
with TensorFlow 2.21); the `print` of the keys runs only while tracing.
"""
import tensorflow as tf


@tf.function
def sample_function(inputs: tf.Tensor, application_order: list = ['method_3', 'method_1', 'method_2']):

    def method_1(inputs: tf.Tensor): return inputs*2                               # some complex code
    def method_2(inputs: tf.Tensor): return inputs/2                               # some complex code
    def method_3(inputs: tf.Tensor): return inputs*3                               # some complex code

    print(locals().keys())  # expect: TFC001

    for application in application_order:
        inputs = locals()[application](inputs)  # expect: TFC025

    return inputs


sample_function(tf.random.normal((1, 3, 3, 1)))
