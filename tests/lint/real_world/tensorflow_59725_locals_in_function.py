"""tensorflow/tensorflow#59725 "locals() not working in tensorflow.function decorator".

`locals()` inside a tf.function sees AutoGraph's rewritten frame, so looking functions up by name
fails; the `print` of the keys runs only while tracing.
"""
import tensorflow as tf


@tf.function
def sample_function(inputs: tf.Tensor, application_order: list = ['method_3', 'method_1', 'method_2']):

    def method_1(inputs: tf.Tensor): return inputs*2                               # some complex code
    def method_2(inputs: tf.Tensor): return inputs/2                               # some complex code
    def method_3(inputs: tf.Tensor): return inputs*3                               # some complex code

    print(locals().keys())  # expect: TFC001

    for application in application_order:
        inputs = locals()[application](inputs)  # expect-missing: locals() in graph code

    return inputs


sample_function(tf.random.normal((1, 3, 3, 1)))
