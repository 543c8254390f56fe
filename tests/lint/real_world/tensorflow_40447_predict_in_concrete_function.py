"""tensorflow/tensorflow#40447 "[Using tf.function()] ValueError: Input 0 of layer dense is incompatible with the layer".

The reporter wants a concrete function of a functional Keras model to save it, and wraps
`model.predict` in a tf.function with an input signature: `predict` works eagerly but fails while
tracing (TypeError in TensorFlow 2.2, and in 2.21:
`int() argument must be ... not 'NoneType'`); the model itself, `model(x)`, is what a tf.function calls.
(The printed outputs in the reporter's comments are left out.)
"""
import tensorflow as tf

inputs = tf.keras.Input(shape=(3,))
x = tf.keras.layers.Dense(4, activation=tf.nn.relu)(inputs)
outputs = tf.keras.layers.Dense(5, activation=tf.nn.softmax)(x)
model = tf.keras.Model(inputs=inputs, outputs=outputs)

x = tf.constant([[1.0,2.0,3.0], [1.0,2.0,3.0]])
model.predict(x) 

@tf.function(input_signature=[tf.TensorSpec(shape=(None, 3), dtype=tf.float32)])
def predict(x):
  return model.predict(x)  # expect: TFC011
p = predict.get_concrete_function()
