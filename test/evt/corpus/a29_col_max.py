# expect: accept
def epi(accum, bias: "1,N"):
    x = accum + bias
    D = relu(x)
    c = max(x, dim=1)
    return D, c
