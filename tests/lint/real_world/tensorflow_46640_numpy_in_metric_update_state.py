"""tensorflow/tensorflow#46640 "AttributeError: 'Tensor' object has no attribute 'numpy'".

A custom Keras metric computes scikit-learn's F1 score in `update_state`, calling `.numpy()` on
`y_true` and `y_pred`. Keras runs `update_state` inside its traced train and test functions, where
the arguments are symbolic tensors without `.numpy()`. (`result` is left out; the two imports are
added, the reporter names `tensorflow.keras.metrics.Metric` and `sklearn.metrics`.)
"""
import tensorflow as tf
from sklearn.metrics import f1_score
from tensorflow.keras.metrics import Metric


class SelfF1(Metric):
    def __init__(self, average, name="self_f1", **kwargs):
        super(SelfF1, self).__init__(name=name, **kwargs)
        self.f1_value = self.add_weight(name="sf", initializer="zeros", dtype="float64")
        self.average = average

    def update_state(self, y_true, y_pred, sample_weight=None):

        y_pred = tf.reshape(tf.argmax(y_pred, axis=1), shape=(-1,))
        if len(y_true.shape) == 2 and y_true.shape[1] != 1:
            y_true = tf.reshape(tf.argmax(y_true, axis=1), shape=(-1,))

        f1_value = f1_score(y_true=y_true.numpy(), y_pred=y_pred.numpy(), average=self.average)  # expect: TFC011 TFC011

        self.f1_value.assign(f1_value)
