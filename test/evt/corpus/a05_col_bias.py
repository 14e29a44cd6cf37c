# expect: accept
def epi(accum, bias: "M,1"):
    D = accum + bias
    return D
