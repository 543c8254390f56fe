"""tensorflow/tensorflow#43111 "tf .function gives different output than standard function".

A Python bool `holding` rebound under conditions on tensors (`if act_value > 0.5`) inside a loop
that AutoGraph converts: the flag is evaluated while tracing, so the graph's loss differs from the
eager one. The `while` bound comes from `len(prices)`, a Python number, so the loop is unrolled
(the reporter notes the function takes a very long time to compile).
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
                holding = True  # expect-missing: Python flag rebound under a tensor-dependent condition
                entry_point = curr_price

            else:  # SELL
                holding = False  # expect-missing: Python flag rebound under a tensor-dependent condition
                exit_point = curr_price
                profit += (pow(keep_perc, 2) * exit_point / entry_point) - 1

        index += 1
    return profit
