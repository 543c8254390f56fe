"""NVlabs/sionna#867 "can't use tf.function() decorator with TBEncoder and TBDecoder" (correct user code).

The user's wrapper only calls a decoder layer inside a tf.function. The reported out-of-scope
tensor is cached inside the library's layer, which this file does not contain: the user's code
must stay silent.
"""
import tensorflow as tf


@tf.function()
def run_decoder_graph(decoder_instance, llrs_input): return decoder_instance(llrs_input)


decoded_tb_bits, tb_crc_status = run_decoder_graph(dec, llrs)
