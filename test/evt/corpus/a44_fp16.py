# expect: accept
# args: --dtype f16
def epi(accum, C, bias: "1,N"):
    D = relu(accum + C + bias)
    return D
