"""tensorflow/tensorflow#47139 "InaccessibleTensorError for tensor defined in same scope".

Python lists grown inside loops over tensors (`for b in B`, `for a in A`): AutoGraph makes them
graph loops, and the tensors appended inside the loop body cannot be read outside it.
"""
import tensorflow as tf

cosine_loss = tf.keras.losses.CosineSimilarity(axis=0, reduction=tf.keras.losses.Reduction.NONE)


@tf.function
def func():
    A = tf.convert_to_tensor([[1, 1., 1], [1, 3, 1]])
    B = tf.convert_to_tensor([[1, 1., 1]])

    S = []
    for b in B:
        S_n = []
        for a in A:
            S.append(-cosine_loss(a, b))  # expect: TFC017
        S.append(S_n)  # expect: TFC017

    return S


print(func())
