# expect: accept
def epi(accum, bias: "1,N"):
    D = relu(accum + bias)
    return D
