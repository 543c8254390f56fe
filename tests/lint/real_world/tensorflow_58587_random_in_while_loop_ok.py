"""tensorflow/tensorflow#58587 "tf.random.uniform generates identical random numbers when used both inside and outside tf.while_loop in a decorated function" (user code correct).

`tf.random.uniform` in a tf.function and in the body of a `tf.while_loop` it runs: TensorFlow ops,
evaluated on every call. The reporter found that TensorFlow 2.8 gave both calls the same number
(an op-seed counter shared by the two graphs); the user code has no tracing pitfall. (The
reporter's commented-out lines are kept; `import tensorflow` added.)
"""
import tensorflow as tf

max_steps=1

def condition(index,  random_num):
    return index < max_steps
def body(index,  random_num):
    return index+1, tf.random.uniform([1],dtype='float32')
@tf.function   
def function():
    index = tf.constant(0, dtype="int8")
    
    a=tf.random.uniform([1],dtype='float32')    
  
    index, random_num=tf.while_loop(condition,body,[index, tf.zeros([1],dtype='float32')])
    
#    b = tf.random.uniform([1])
#    c = tf.random.uniform([1])
    return a, random_num

a, b=function()

print(a, b) 
