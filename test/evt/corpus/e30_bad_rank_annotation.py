# expect: error: must list 2 dimensions
def epi(accum, bias: "1,N,L"):
    D = accum + bias
    return D
