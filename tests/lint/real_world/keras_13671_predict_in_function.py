"""keras-team/keras#13671 "Calling a simple Keras model inside a @tf.function concrete function produces error".

A commenter's minimal example: `model.predict` inside a tf.function. `predict` is a high-level
endpoint that runs its own loop and tf.function and returns NumPy arrays; called while tracing it
raises (TensorFlow 2.1: ValueError; 2.21:
AttributeError, `'SymbolicTensor' object has no attribute 'numpy'`). Call the model itself, `model(x)`, inside a tf.function.
(The notebook's `%tensorflow_version 2.x` line is left out.)
"""
import tensorflow as tf
import numpy as np
from tensorflow import keras

x = np.random.random((10,16))
model = keras.Sequential()
model.add(keras.layers.Dense(32, input_shape=(16,), activation = tf.nn.relu))
y = model.predict(x)

@tf.function
def test(model, x):

    y = model.predict(x, steps = 1)  # expect: TFC011

    return y

y = test(model,x)
