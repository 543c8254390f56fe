"""tensorflow/tensorflow#48851 "tf.function traces twice when creating Variables in the first call?".

The reporter uses Python `print` to see tracing and is surprised how often it runs: `print` runs
only while the function is traced (twice when variables are created on the first call), never on
later calls; `tf.print` runs on every call. The variable is created behind a first-call guard.

The print is no finding: its text says it reports tracing, and the reporter uses it to watch tracing
on purpose (issue 36: prints that announce tracing were judged deliberate wherever they were met).
"""
import tensorflow as tf


class Count:
    def __init__(self):
        self.count = None

    @tf.function
    def __call__(self):
        print("This function is tracing !")
        tf.print("This function is executing !")
        if self.count is None:
            self.count = tf.Variable(0)
        return self.count.assign_add(1)


counter = Count()
counter()
