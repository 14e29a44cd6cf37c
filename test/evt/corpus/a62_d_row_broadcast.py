# expect: accept
def epi(accum, bias: "1,N"):
    D = bias
    E = accum - bias
    return D, E
