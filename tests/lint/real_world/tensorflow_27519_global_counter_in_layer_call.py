"""tensorflow/tensorflow#27519 "TF 2.0 'Tensor' object has no attribute 'numpy' while using .numpy() although eager execution enabled by default".

A commenter's layer (the `test` driver that follows it in the thread is left out): `call` of a
Keras layer counts its calls in a global and prints them, and reads `inputs.numpy()` only when the
inputs have it. Under `fit` Keras traces `call`, so the counter and the prints run once per trace,
not once per batch; the `.numpy()` branch runs only eagerly (its `hasattr` test guards it).
"""
from tensorflow.keras import layers

counter=0

class MyDense(layers.Dense):
  def __init__(self, units, activation,input_shape):
    super().__init__(units=units, activation=activation,input_shape=input_shape)

  def call(self, inputs):
      global counter
      
      counter += 1  # expect: TFC002
      print('\n{}. inputs.numpy()='.format(counter))  # expect: TFC001
      if hasattr(inputs,'numpy'):
          print('{}'.format(inputs.numpy()))
      else:
          print('not available.')  # expect: TFC001
          
      return super().call(inputs)
