"""tensorflow/tensorflow#46012 "tf.function retracing" (correct code).

Six fresh Keras models trained in a loop; Keras warns that its own predict function retraces. No
tf.function is written here, and nothing in this code is a pitfall the linter should report.
"""
import tensorflow as tf
import numpy as np
from keras import *
from keras.layers import *

X = np.random.uniform(-1, 1, size=(1, 1000))
y = np.array([[0.7974]])

for _ in range(6):
    model = Sequential([
        Input(shape=1000),
        Dense(1, activation='sigmoid'),
    ])

    model.compile(loss='mse', optimizer='adam')
    model.fit(X, y, batch_size=1, epochs=100, verbose=0)
    print(model.predict(X))
