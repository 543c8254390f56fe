"""tensorflow/tensorflow#37444 "InaccessibleTensorError in graph mode with for loop itteration (different sized tensors) ( tf.image.resize)".

A commenter's smaller sample with the same error: `o.step(...)`, called in a `tf.range` loop of a
tf.function, stores a tensor of the loop body on the plain object `o` (`self.board = ...`); reading
`o.board` after the loop reaches into the loop's graph (InaccessibleTensorError). The commenter's
workaround in the loop has the same store. (Code as posted, the commented-out lines kept.)
"""
import tensorflow as tf

class Connect4Environment(object):
  def __init__(self, batch_size:int=1):
    self.board = tf.zeros((batch_size,6,7), dtype=tf.int8)

  def step(self, board, action_mask):
    #tf.debugging.Assert(action_mask.ndim == board.ndim) # Fails with "'Tensor' object has no attribute 'ndim'" in graph mode
    self.board = board * action_mask  # expect: TFC009
  
@tf.function
def play_game():

  batch_size = 4
  history = tf.zeros([batch_size,1], dtype=tf.int32)
  o = Connect4Environment(batch_size)

  for current_index in tf.range(0, 0): # seems XLA doesn't drop the loop
    action_mask = tf.expand_dims(tf.one_hot(history[:,current_index], 7, dtype=tf.int8), 1)
    o.step(o.board, action_mask)
    #o.board = o.board * action_mask # using this way avoid the crash

  current_observation = tf.stack([o.board>0, o.board<0], -1) # pass if this line is commented
  return tf.constant(0)
