"""tensorflow/tensorflow#40508 "AttributeError: 'Tensor' object has no attribute 'numpy'".

A custom loss passed to `model.compile` calls `.numpy()`: Keras traces the loss into the training
graph, where the tensor is symbolic, and its `print` runs only while tracing. (The model in the thread has more layers before its
`compile(..., loss=loss)` call; trimmed to one layer.)
"""
import tensorflow as tf
import numpy as np
import keras.backend as K
from tensorflow.keras.datasets import mnist
from tensorflow.keras.utils import to_categorical
from tensorflow.keras.models import Sequential
from tensorflow.keras.layers import Flatten, Dense, Conv2D, MaxPool2D, Input


def loss(yT, yP):
    err = yT - yP
    print(err.numpy())  # expect: TFC001 TFC011
    squaredError = tf.square(err)
    meanError = tf.reduce_mean(squaredError)
    return meanError


(xTrain, yTrain), (xTest, yTest) = mnist.load_data()
print(xTrain.shape, yTrain.shape, type(xTest))

xTrain, xTest = xTrain / 255, xTest / 255
yTrain, yTest = to_categorical(yTrain, num_classes=10), to_categorical(yTest, num_classes=10)

model = Sequential()
model.add(Flatten(input_shape=(28, 28)))
model.compile(optimizer='adam', loss=loss)
