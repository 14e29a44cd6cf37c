# expect: error: dimension 0 of annotation "N,1" must be M or 1
def epi(accum, bias: "N,1"):
    D = accum + bias
    return D
