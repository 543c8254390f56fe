"""tensorflow/tensorflow#43111 "tf .function gives different output than standard function".

A Python bool `holding` rebound under `if act_value > 0.5` (a condition on tensors when the
arguments are arrays or tensors) inside a loop that AutoGraph converts: the flag is evaluated while
tracing, so the graph's loss differs from the eager one. The `while` bound comes from
`len(prices)`, a Python number, so the loop is unrolled (the reporter notes the function takes a
very long time to compile).

The flag's rebindings under `if act_value > 0.5` are known misses (`expect-missing`, counted
against the suite's recall): whether that test is a tensor depends on what the caller passes, and
the thread does not show the call ("precomputed predictions and price history"). Checked with
TensorFlow 2.21 on random inputs: called with NumPy arrays or tensors, it returns 0.0034 where it
returns 0.0623 eagerly (the reported bug); called with Python lists, it returns the eager 0.0623.
Nothing in the file tells the two apart: a list of floats is subscripted by an index and compared
with 0.5 just as an array is. TFC024 reports both lines once a call in the file passes arrays or
tensors (its must-flag example of this shape); from this file alone it cannot know.
"""
import tensorflow as tf


@tf.function
def get_loss(h_actions, nh_actions, prices):
    entry_point = 0.0
    exit_point = 0.0
    holding = False
    profit = 0.0
    index = 0
    fee = 0.001
    keep_perc = 1 - fee
    final_index = len(prices) - 1

    while index < final_index:  # expect: TFC005
        curr_price = prices[index]

        if holding:
            act_value = h_actions[index]
        else:
            act_value = nh_actions[index]

        if act_value > 0.5:
            if holding is False:  # BUY
                holding = True  # expect-missing: flag rebound under a tensor condition when the caller passes arrays (see the header)
                entry_point = curr_price

            else:  # SELL
                holding = False  # expect-missing: flag rebound under a tensor condition when the caller passes arrays (see the header)
                exit_point = curr_price
                profit += (pow(keep_perc, 2) * exit_point / entry_point) - 1

        index += 1
    return profit
