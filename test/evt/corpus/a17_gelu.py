# expect: accept
def epi(accum, bias: "1,N"):
    D = gelu(accum + bias)
    return D
